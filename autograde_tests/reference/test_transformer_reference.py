"""The Transformer assembled (lesson 8) against PyTorch's own: nn.LayerNorm,
nn.TransformerEncoderLayer, nn.TransformerDecoderLayer and their stacks, with copied weights
(post-norm, ReLU, dropout off), masks included; then the small trainable model of
attention_ref.pt.model and its greedy decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.pt import model as tm

from .tolerances import TOLERANCES

DTYPES = [torch.float32, torch.float64]


def _to_numpy(params):
    """A nested parameter dict (or a list of them) with every tensor as a NumPy array."""
    if isinstance(params, (list, tuple)):
        return [_to_numpy(p) for p in params]
    return {
        k: _to_numpy(v) if isinstance(v, dict) else (v.cpu().numpy() if torch.is_tensor(v) else v)
        for k, v in params.items()
    }


def _perturbed(module, device, dtype, seed):
    """``module`` on device/dtype in eval mode, every parameter moved off its initial value (biases
    non-zero, LayerNorm gamma != 1 and beta != 0), so that copying each of them is tested."""
    torch.manual_seed(seed)
    module = module.to(device, dtype).eval()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return module


def _encoder_layer(d_model, h, d_ff, device, dtype, seed=0):
    return _perturbed(
        nn.TransformerEncoderLayer(d_model, h, d_ff, dropout=0.0, batch_first=True),
        device,
        dtype,
        seed,
    )


def _decoder_layer(d_model, h, d_ff, device, dtype, seed=0):
    return _perturbed(
        nn.TransformerDecoderLayer(d_model, h, d_ff, dropout=0.0, batch_first=True),
        device,
        dtype,
        seed,
    )


# ---- layer normalization and Add & Norm ---------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 7, 16), (2, 3, 4, 6)], ids=str)
def test_layer_norm_matches_nn_layer_norm(device, dtype, shape):
    norm = _perturbed(nn.LayerNorm(shape[-1]), device, dtype, 1)
    x = (3 * torch.randn(shape, dtype=dtype) + 5).to(device)  # far from mean 0, variance 1
    got = rpt.layer_norm(x, norm.weight.detach(), norm.bias.detach())
    assert got.dtype == dtype and got.device.type == device.type
    torch.testing.assert_close(got, norm(x), **TOLERANCES[dtype])
    np.testing.assert_allclose(
        rnp.layer_norm(
            x.cpu().numpy(), norm.weight.detach().cpu().numpy(), norm.bias.detach().cpu().numpy()
        ),
        norm(x).detach().cpu().numpy(),
        **TOLERANCES[dtype],
    )


def test_layer_norm_details(device):
    """Biased variance, eps inside the square root, constant rows give beta (not NaN), custom
    eps."""
    x = torch.tensor(
        [[1.0, 2.0, 3.0, 4.0], [7.0, 7.0, 7.0, 7.0]], dtype=torch.float64, device=device
    )
    gamma, beta = (
        torch.full((4,), 2.0, dtype=torch.float64, device=device),
        torch.arange(4.0, dtype=torch.float64, device=device),
    )
    got = rpt.layer_norm(x, gamma, beta)
    by_hand = (x[0] - 2.5) / np.sqrt(
        1.25 + 1e-5
    ) * 2 + beta  # variance of 1, 2, 3, 4 is 1.25 (not 5/3)
    torch.testing.assert_close(got[0], by_hand)
    torch.testing.assert_close(got[1], beta)  # zero variance: x - mean = 0, and eps keeps it finite
    for eps in (1e-3, 1e-12):
        torch.testing.assert_close(
            rpt.layer_norm(x, gamma, beta, eps), nn.functional.layer_norm(x, (4,), gamma, beta, eps)
        )
        np.testing.assert_allclose(
            rnp.layer_norm(x.cpu().numpy(), gamma.cpu().numpy(), beta.cpu().numpy(), eps),
            rpt.layer_norm(x, gamma, beta, eps).cpu().numpy(),
            rtol=1e-12,
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_layer_norm_half_precision_follows_float32(device, dtype):
    x, gamma, beta = (
        torch.randn(3, 5, 16, device=device) * 4,
        torch.randn(16, device=device),
        torch.randn(16, device=device),
    )
    got = rpt.layer_norm(x.to(dtype), gamma.to(dtype), beta.to(dtype))
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), rpt.layer_norm(x, gamma, beta), rtol=5e-2, atol=5e-2)


def test_add_and_norm_is_post_norm(device):
    """LayerNorm(x + Sublayer(x)): the residual is added before the normalization, not after."""
    x = torch.randn(2, 5, 8, device=device)
    norm = {"gamma": torch.randn(8, device=device), "beta": torch.randn(8, device=device)}
    sublayer = lambda t: torch.tanh(t) * 3 + 1  # noqa: E731
    want = nn.functional.layer_norm(x + sublayer(x), (8,), norm["gamma"], norm["beta"], 1e-5)
    torch.testing.assert_close(rpt.add_and_norm(x, sublayer, norm), want)
    np_norm = _to_numpy(norm)
    np.testing.assert_allclose(
        rnp.add_and_norm(x.cpu().numpy(), lambda t: np.tanh(t) * 3 + 1, np_norm),
        want.cpu().numpy(),
        rtol=1e-5,
        atol=1e-5,
    )
    torch.testing.assert_close(
        rpt.add_and_norm(x, sublayer, norm | {"eps": 0.5}),
        nn.functional.layer_norm(x + sublayer(x), (8,), norm["gamma"], norm["beta"], 0.5),
    )


# ---- encoder and decoder layers against nn.TransformerEncoderLayer / DecoderLayer ---------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask_kind", [None, "padding", "square"])
def test_encoder_layer_matches_nn_transformer_encoder_layer(device, dtype, mask_kind):
    d_model, h, d_ff, batch, n = 24, 4, 40, 3, 7
    layer = _encoder_layer(d_model, h, d_ff, device, dtype)
    x = torch.randn(batch, n, d_model, generator=torch.Generator().manual_seed(2), dtype=dtype).to(
        device
    )
    ours, theirs = None, {}
    if mask_kind == "padding":
        ours = rpt.padding_mask(torch.tensor([7, 4, 1], device=device), n)
        theirs["src_key_padding_mask"] = rpt.to_key_padding_mask(ours)
    elif mask_kind == "square":  # any (n, n) pattern, the diagonal kept so that no row is empty
        ours = (torch.rand(n, n, generator=torch.Generator().manual_seed(3)) > 0.4).to(device)
        ours |= torch.eye(n, dtype=torch.bool, device=device)
        theirs["src_mask"] = ~ours  # PyTorch: True = ignore
    params = rpt.encoder_layer_params_from_torch(layer)
    want = layer(x, **theirs)
    got = rpt.encoder_layer(x, params, h, ours)
    assert got.dtype == dtype and got.device.type == device.type
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    np_got = rnp.encoder_layer(
        x.cpu().numpy(), _to_numpy(params), h, None if ours is None else ours.cpu().numpy()
    )
    np.testing.assert_allclose(np_got, want.detach().cpu().numpy(), **TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("masks", [(), ("tgt",), ("memory",), ("tgt", "memory")], ids=str)
def test_decoder_layer_matches_nn_transformer_decoder_layer(device, dtype, masks):
    d_model, h, d_ff, batch, n_tgt, n_src = 24, 4, 40, 3, 5, 7
    layer = _decoder_layer(d_model, h, d_ff, device, dtype)
    gen = torch.Generator().manual_seed(4)
    y = torch.randn(batch, n_tgt, d_model, generator=gen, dtype=dtype).to(device)
    memory = torch.randn(batch, n_src, d_model, generator=gen, dtype=dtype).to(device)
    tgt_mask = memory_mask = None
    # the paper's decoder: always causal
    theirs = {"tgt_mask": ~rpt.causal_mask(n_tgt, device=device)}
    if "tgt" in masks:
        tgt_mask = rpt.padding_mask(torch.tensor([5, 3, 1], device=device), n_tgt)
        theirs["tgt_key_padding_mask"] = rpt.to_key_padding_mask(tgt_mask)
    if "memory" in masks:
        memory_mask = rpt.padding_mask(torch.tensor([7, 2, 5], device=device), n_src)
        theirs["memory_key_padding_mask"] = rpt.to_key_padding_mask(memory_mask)
    params = rpt.decoder_layer_params_from_torch(layer)
    want = layer(y, memory, **theirs)
    got = rpt.decoder_layer(y, memory, params, h, tgt_mask, memory_mask)
    assert got.dtype == dtype and got.device.type == device.type
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    as_np = lambda m: None if m is None else m.cpu().numpy()  # noqa: E731
    np_got = rnp.decoder_layer(
        y.cpu().numpy(),
        memory.cpu().numpy(),
        _to_numpy(params),
        h,
        as_np(tgt_mask),
        as_np(memory_mask),
    )
    np.testing.assert_allclose(np_got, want.detach().cpu().numpy(), **TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_stacks_match_nn_transformer_encoder_and_decoder(device, dtype):
    """N layers, each with its own weights; the decoder's layers all read the encoder's final
    output. The paper's post-norm stacks have no extra LayerNorm at the end (norm=None)."""
    d_model, h, d_ff, n_layers = 16, 2, 32, 3
    enc = _perturbed(
        nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, h, d_ff, 0.0, batch_first=True),
            n_layers,
            enable_nested_tensor=False,
        ),
        device,
        dtype,
        5,
    )
    dec = _perturbed(
        nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d_model, h, d_ff, 0.0, batch_first=True), n_layers
        ),
        device,
        dtype,
        6,
    )
    gen = torch.Generator().manual_seed(7)
    src = torch.randn(2, 6, d_model, generator=gen, dtype=dtype).to(device)
    tgt = torch.randn(2, 4, d_model, generator=gen, dtype=dtype).to(device)
    src_pad = rpt.padding_mask(torch.tensor([6, 3], device=device), 6)
    enc_layers = [rpt.encoder_layer_params_from_torch(layer) for layer in enc.layers]
    dec_layers = [rpt.decoder_layer_params_from_torch(layer) for layer in dec.layers]
    assert len({id(p["self_attn"]["w_q"]) for p in enc_layers}) == n_layers, (
        "each layer has its own weights"
    )
    want_memory = enc(src, src_key_padding_mask=rpt.to_key_padding_mask(src_pad))
    memory = rpt.encoder(src, enc_layers, h, src_pad)
    torch.testing.assert_close(memory, want_memory, **TOLERANCES[dtype])
    want = dec(
        tgt,
        want_memory,
        tgt_mask=~rpt.causal_mask(4, device=device),
        memory_key_padding_mask=rpt.to_key_padding_mask(src_pad),
    )
    got = rpt.decoder(tgt, memory, dec_layers, h, memory_mask=src_pad)
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    np_memory = rnp.encoder(src.cpu().numpy(), _to_numpy(enc_layers), h, src_pad.cpu().numpy())
    np.testing.assert_allclose(np_memory, want_memory.detach().cpu().numpy(), **TOLERANCES[dtype])
    np.testing.assert_allclose(
        rnp.decoder(
            tgt.cpu().numpy(),
            np_memory,
            _to_numpy(dec_layers),
            h,
            memory_mask=src_pad.cpu().numpy(),
        ),
        want.detach().cpu().numpy(),
        **TOLERANCES[dtype],
    )


def test_attention_weights_of_every_layer(device):
    """return_weights gives each attention's per-head matrix: the encoder's equals
    nn.MultiheadAttention's own; the decoder's are causal, and padded source keys get zero
    weight."""
    d_model, h = 16, 4
    layer = _encoder_layer(d_model, h, 32, device, torch.float64)
    x = torch.randn(2, 5, d_model, dtype=torch.float64, device=device)
    out, weights = rpt.encoder_layer(
        x, rpt.encoder_layer_params_from_torch(layer), h, return_weights=True
    )
    torch.testing.assert_close(out, layer(x))
    torch.testing.assert_close(
        weights["self_attn"], layer.self_attn(x, x, x, average_attn_weights=False)[1]
    )

    dec = _decoder_layer(d_model, h, 32, device, torch.float64)
    src_pad = rpt.padding_mask(torch.tensor([5, 2], device=device), 5)
    y = torch.randn(2, 4, d_model, dtype=torch.float64, device=device)
    layers = [rpt.decoder_layer_params_from_torch(dec)] * 2
    _, all_weights = rpt.decoder(y, out, layers, h, memory_mask=src_pad, return_weights=True)
    assert len(all_weights) == 2
    for weights in all_weights:
        assert weights["self_attn"].shape == (2, h, 4, 4) and weights["cross_attn"].shape == (
            2,
            h,
            4,
            5,
        )
        assert torch.all(weights["self_attn"].triu(1) == 0), (
            "no decoder position attends to a later one"
        )
        assert torch.all(weights["cross_attn"][1, ..., 2:] == 0), (
            "padded source positions get no weight"
        )
        torch.testing.assert_close(
            weights["cross_attn"].sum(-1), torch.ones(2, h, 4, dtype=torch.float64, device=device)
        )
    _, enc_weights = rpt.encoder(
        x, [rpt.encoder_layer_params_from_torch(layer)], h, return_weights=True
    )
    assert [set(w) for w in enc_weights] == [{"self_attn"}]


def test_init_params_layout_and_the_two_backends_agree():
    """init_*_params give the documented nested layout in both backends, and NumPy and PyTorch
    compute the same layers from the same numbers."""
    np_enc = rnp.init_encoder_layer_params(16, 4, 48, np.random.default_rng(0))
    np_dec = rnp.init_decoder_layer_params(16, 4, 48, np.random.default_rng(1))
    pt_enc = rpt.init_encoder_layer_params(
        16, 4, 48, torch.Generator().manual_seed(0), dtype=torch.float64
    )
    assert list(np_enc) == list(pt_enc) == ["self_attn", "norm_1", "ffn", "norm_2"]
    assert list(np_dec) == ["self_attn", "norm_1", "cross_attn", "norm_2", "ffn", "norm_3"]
    assert list(rpt.init_decoder_layer_params(16, 4, 48)) == list(np_dec)
    for params in (np_enc, pt_enc):
        assert set(params["self_attn"]) == {"w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"}
        assert set(params["ffn"]) == {"w_1", "b_1", "w_2", "b_2"} and params["ffn"][
            "w_1"
        ].shape == (16, 48)
        assert set(params["norm_1"]) == {"gamma", "beta"} and (params["norm_1"]["gamma"] == 1).all()
    x, memory = (
        np.random.default_rng(2).normal(size=(2, 3, 16)),
        np.random.default_rng(3).normal(size=(2, 5, 16)),
    )
    np_dec_t = {k: {n: torch.from_numpy(a) for n, a in v.items()} for k, v in np_dec.items()}
    np.testing.assert_allclose(
        rpt.decoder_layer(torch.from_numpy(x), torch.from_numpy(memory), np_dec_t, 4).numpy(),
        rnp.decoder_layer(x, memory, np_dec, 4),
        rtol=1e-10,
        atol=1e-12,
    )


def test_from_torch_refuses_what_the_reference_does_not_model():
    with pytest.raises(ValueError, match="post-norm"):
        rpt.encoder_layer_params_from_torch(nn.TransformerEncoderLayer(8, 2, 16, norm_first=True))
    with pytest.raises(ValueError, match="ReLU"):
        rpt.decoder_layer_params_from_torch(nn.TransformerDecoderLayer(8, 2, 16, activation="gelu"))
    with pytest.raises(TypeError, match="TransformerEncoderLayer"):
        rpt.encoder_layer_params_from_torch(nn.TransformerDecoderLayer(8, 2, 16))
    layer = nn.TransformerEncoderLayer(
        8, 2, 16, layer_norm_eps=1e-3, dropout=0.0, batch_first=True
    ).eval()
    params = rpt.encoder_layer_params_from_torch(layer)
    assert params["norm_1"]["eps"] == 1e-3  # a non-default eps travels with the norm's parameters
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(rpt.encoder_layer(x, params, 2), layer(x))


def test_bad_input_is_named():
    enc = rnp.init_encoder_layer_params(8, 2, 16, np.random.default_rng(0))
    x = np.zeros((2, 3, 8))
    with pytest.raises(ValueError, match="lacks norm_2"):
        rnp.encoder_layer(x, {k: v for k, v in enc.items() if k != "norm_2"}, 2)
    with pytest.raises(ValueError, match="lacks cross_attn, norm_3"):
        rnp.decoder_layer(x, x, enc, 2)
    with pytest.raises(ValueError, match="list of layer parameter dicts"):
        rnp.encoder(x, enc, 2)
    with pytest.raises(ValueError, match=r"d_model differs.*\(2, 3, 8\).*\(6,\)"):
        rnp.layer_norm(x, np.ones(6), np.zeros(6))
    with pytest.raises(ValueError, match="eps must be positive"):
        rnp.layer_norm(x, np.ones(8), np.zeros(8), eps=0.0)
    with pytest.raises(ValueError, match="lacks beta"):
        rnp.add_and_norm(x, lambda t: t, {"gamma": np.ones(8)})
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        rpt.layer_norm(x, torch.ones(8), torch.zeros(8))


# ---- the trainable model, greedy decoding and the synthetic task --------------------------------


def _model(device, seed=0, **kwargs):
    kwargs = {
        "d_model": 16,
        "num_heads": 2,
        "d_ff": 32,
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
    } | kwargs
    return (
        tm.Transformer(
            tm.VOCAB_SIZE, tm.VOCAB_SIZE, generator=torch.Generator().manual_seed(seed), **kwargs
        )
        .to(device)
        .eval()
    )


def test_model_layers_are_the_reference_layers(device):
    """encode/decode are the reference stacks on scaled embeddings + positional encoding; the
    layer parameters are trainable and keep the reference's nested layout."""
    model = _model(device)
    src, tgt_in, _ = tm.make_batch("reverse", 3, 2, 6, torch.Generator().manual_seed(1), device)
    mask = model.source_mask(src)
    assert mask.shape == (3, 1, 6) and mask.dtype == torch.bool
    x = model.src_embed(src) * 4.0 + rpt.positional_encoding(6, 16, device=device)  # sqrt(16) = 4
    memory = model.encode(src, mask)
    torch.testing.assert_close(memory, rpt.encoder(x, model.encoder_layers, 2, mask))
    y = model.tgt_embed(tgt_in) * 4.0 + rpt.positional_encoding(7, 16, device=device)
    logits = model.decode(tgt_in, memory, mask)
    assert logits.shape == (3, 7, tm.VOCAB_SIZE)
    torch.testing.assert_close(
        logits, model.out(rpt.decoder(y, memory, model.decoder_layers, 2, memory_mask=mask))
    )
    torch.testing.assert_close(model(src, tgt_in), logits)
    names = {name for name, _ in model.named_parameters()}
    assert "decoder_layers.1.cross_attn.w_q" in names and "encoder_layers.0.norm_2.gamma" in names
    # embed_tgt(offset=t) embeds the token at position t: what step-by-step decoding needs
    torch.testing.assert_close(
        model.embed_tgt(tgt_in[:, 4:5], offset=4), model.embed_tgt(tgt_in)[:, 4:5]
    )


def test_decode_is_causal_and_encode_ignores_padding(device):
    model = _model(device, 1)
    src, tgt_in, _ = tm.make_batch("copy", 2, 3, 6, torch.Generator().manual_seed(2), device)
    mask = model.source_mask(src)
    memory = model.encode(src, mask)
    logits = model.decode(tgt_in, memory, mask)
    changed = tgt_in.clone()
    changed[:, 3:] = tm.FIRST_DIGIT + 7
    # no leak from the future
    torch.testing.assert_close(model.decode(changed, memory, mask)[:, :3], logits[:, :3])
    padded = src.clone()
    padded[src == tm.PAD] = tm.FIRST_DIGIT  # what sits under the padding must not matter
    real = mask[:, 0, :]
    torch.testing.assert_close(model.encode(padded, mask)[real], memory[real])
    torch.testing.assert_close(model.decode(tgt_in, model.encode(padded, mask), mask), logits)


def test_greedy_decode_feeds_back_and_stops(device):
    model = _model(device, 2)
    src, _, _ = tm.make_batch("reverse", 5, 2, 6, torch.Generator().manual_seed(3), device)
    out = tm.greedy_decode(model, src, 7, tm.BOS, tm.EOS)
    assert (
        out.dtype == torch.long
        and out.device.type == device.type
        and out.shape[0] == 5
        and out.shape[1] <= 7
    )
    # Every produced token is the decoder's argmax given the tokens produced before it
    mask = model.source_mask(src)
    fed_back = torch.cat([torch.full((5, 1), tm.BOS, device=device), out[:, :-1]], dim=1)
    argmax = model.decode(fed_back, model.encode(src, mask), mask).argmax(-1)
    for row, tokens in enumerate(out.tolist()):
        end = tokens.index(tm.EOS) + 1 if tm.EOS in tokens else len(tokens)
        assert tokens[:end] == argmax[row, :end].tolist()
        assert all(t == tm.PAD for t in tokens[end:]), "nothing after the end symbol but padding"
        assert tm.EOS not in tokens[: end - 1]

    # A model that always prefers EOS stops after one step; one that never does runs max_len steps
    with torch.no_grad():
        model.out.bias.zero_()
        model.out.bias[tm.EOS] = 1e4
    assert tm.greedy_decode(model, src, 7, tm.BOS, tm.EOS).tolist() == [[tm.EOS]] * 5
    with torch.no_grad():
        model.out.bias[tm.EOS] = -1e4
    never = tm.greedy_decode(model, src, 4, tm.BOS, tm.EOS)
    assert never.shape == (5, 4) and not (never == tm.EOS).any()


def test_make_batch_tasks():
    gen = torch.Generator().manual_seed(4)
    for task in tm.TASKS:
        src, tgt_in, tgt_out = tm.make_batch(task, 50, 2, 6, gen)
        assert src.shape == (50, 6) and tgt_in.shape == tgt_out.shape == (50, 7)
        for s, i, o in zip(src.tolist(), tgt_in.tolist(), tgt_out.tolist()):
            digits = [t for t in s if t != tm.PAD]
            assert 2 <= len(digits) <= 6 and s[: len(digits)] == digits, (
                "digits first, then padding"
            )
            want = {
                "copy": digits,
                "reverse": digits[::-1],
                "sort": sorted(digits),
                "swap_halves": digits[len(digits) // 2 :] + digits[: len(digits) // 2],
            }[task]
            n = len(digits)
            assert o[: n + 1] == want + [tm.EOS] and set(o[n + 1 :]) <= {tm.PAD}
            assert i[: n + 1] == [tm.BOS] + want and set(i[n + 1 :]) <= {tm.PAD}, (
                "shifted right by one"
            )
    assert tm.tokens_to_digits([tm.FIRST_DIGIT + 3, tm.FIRST_DIGIT, tm.EOS, tm.PAD]) == "30."
    with pytest.raises(ValueError, match="task"):
        tm.make_batch("shuffle", 2)


def test_exact_match_counts_whole_sequences():
    target = torch.tensor([[5, 6, tm.EOS, 0], [7, tm.EOS, 0, 0], [8, 9, 10, tm.EOS]])
    assert tm.exact_match(target, target) == 1.0
    assert tm.exact_match(target[:, :3], target) == pytest.approx(2 / 3)  # the third never ends
    wrong_end = target.clone()
    wrong_end[1, 2] = 4  # a token after EOS where padding belongs
    assert tm.exact_match(wrong_end, target) == pytest.approx(2 / 3)


def test_training_lowers_the_loss_on_every_device(device):
    """A few dozen steps on the copy task: the loss falls well below chance (ln 13 = 2.56)."""
    model = _model(device, 3, num_encoder_layers=1, num_decoder_layers=1)
    seen = []  # progress wraps the range of steps once (the lesson passes tqdm)
    threads = torch.get_num_threads()
    # tiny matrices: a second thread only waits (badly so on a busy machine)
    torch.set_num_threads(1)
    try:
        losses = tm.train(
            model,
            60,
            "copy",
            32,
            lr=1e-2,
            warmup=6,
            min_len=4,
            max_len=4,
            generator=torch.Generator().manual_seed(5),
            progress=lambda steps: seen.append(len(steps)) or steps,
        )
    finally:
        torch.set_num_threads(threads)
    assert seen == [60] and len(losses) == 60 and not model.training
    assert np.mean(losses[:5]) > 2.0 and np.mean(losses[-10:]) < 0.7 * np.mean(losses[:5])


def test_adam_matches_torch_optim_adam():
    """The written-out Adam takes the same steps as torch.optim.Adam, the learning rate changing per
    step."""
    torch.manual_seed(6)
    ours = [
        torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64)),
        torch.nn.Parameter(torch.randn(3, dtype=torch.float64)),
    ]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    adam, reference = (
        tm.Adam(ours, betas=(0.9, 0.98), eps=1e-9),
        torch.optim.Adam(theirs, betas=(0.9, 0.98), eps=1e-9),
    )
    x = torch.randn(5, 4, dtype=torch.float64)
    for step in range(12):
        lr = tm.learning_rate(step, 1e-2, 4)
        for params, opt in ((ours, adam), (theirs, reference)):
            opt.zero_grad()
            torch.tanh(x @ params[0] + params[1]).pow(2).sum().backward()
        for group in reference.param_groups:
            group["lr"] = lr
        adam.step(lr)
        reference.step()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # warm-up, then 1/sqrt
    assert tm.learning_rate(3, 1.0, 4) == 1.0 and tm.learning_rate(0, 1.0, 4) == 0.25
    assert tm.learning_rate(15, 1.0, 4) == pytest.approx(0.5)

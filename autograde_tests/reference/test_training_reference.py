"""Training the Transformer (lesson 8, the paper's section 5) against PyTorch's own: label smoothing
and padding in ``F.cross_entropy``, Eq. (3) under ``LambdaLR``, inverted dropout against
``nn.Dropout``, residual dropout where ``nn.TransformerEncoderLayer`` / ``DecoderLayer`` put it;
and the options lesson 8's ablations switch (no positional encoding, no residual, unscaled scores),
``scale`` against ``F.scaled_dot_product_attention``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.pt import model as tm
from attention_ref.pt.decoding import CachedDecoder

from .tolerances import TOLERANCES

DTYPES = [torch.float32, torch.float64]


def _dtypes(device):
    return [torch.float32] if device.type == "mps" else DTYPES  # MPS has no float64


# ---- label smoothing -----------------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.35, 1.0])
@pytest.mark.parametrize("shape", [(7,), (4, 9), (3, 5, 13)], ids=str)
def test_label_smoothing_matches_f_cross_entropy(device, smoothing, shape):
    """The value and the gradient of F.cross_entropy(..., ignore_index, label_smoothing)."""
    for dtype in _dtypes(device):
        gen = torch.Generator().manual_seed(len(shape) + int(100 * smoothing))
        vocab = shape[-1]
        logits = (3 * torch.randn(shape, generator=gen, dtype=dtype)).to(device).requires_grad_()
        targets = torch.randint(0, vocab, shape[:-1], generator=gen).to(device)
        if targets.numel() > 1:
            targets.view(-1)[::3] = 0  # some padding (class 0 here), never all of it
            targets.view(-1)[1] = 2
        got = rpt.label_smoothed_cross_entropy(logits, targets, smoothing, ignore_index=0)
        want = F.cross_entropy(
            logits.reshape(-1, vocab),
            targets.reshape(-1),
            ignore_index=0,
            label_smoothing=smoothing,
        )
        assert got.shape == () and got.dtype == dtype and got.device.type == device.type
        torch.testing.assert_close(got, want, **TOLERANCES[dtype])
        (grad_got,) = torch.autograd.grad(got, logits)
        (grad_want,) = torch.autograd.grad(want, logits)
        torch.testing.assert_close(grad_got, grad_want, **TOLERANCES[dtype])


def test_label_smoothing_is_szegedys_target_distribution():
    """(1 - eps) on the true class plus eps / V on every class, the true one included (Szegedy et
    al., 2016, section 7); padding positions count for nothing, the mean runs over the others."""
    gen = torch.Generator().manual_seed(1)
    vocab, eps = 6, 0.1
    logits = torch.randn(5, vocab, generator=gen, dtype=torch.float64)
    targets = torch.tensor([3, 0, 5, 0, 1])  # 0 = padding
    q = torch.full((5, vocab), eps / vocab, dtype=torch.float64)
    q[torch.arange(5), targets] += 1 - eps
    per_token = -(q * torch.log_softmax(logits, -1)).sum(-1)
    real = targets != 0
    want = per_token[real].mean()
    torch.testing.assert_close(rpt.label_smoothed_cross_entropy(logits, targets, eps, 0), want)
    assert q[0].sum() == pytest.approx(1.0) and q[0, 3] == pytest.approx(1 - eps + eps / vocab)
    # what padding would have cost if counted: changing the logits there changes nothing
    moved = logits.clone()
    moved[~real] += 10 * torch.randn(int((~real).sum()), vocab, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(rpt.label_smoothed_cross_entropy(moved, targets, eps, 0), want)
    # the loss's minimum is the entropy of the smoothed target, not 0
    best = torch.log(q)  # logits whose softmax is q itself
    entropy = -(q * torch.log(q)).sum(-1)[real].mean()
    torch.testing.assert_close(rpt.label_smoothed_cross_entropy(best, targets, eps, 0), entropy)


def test_label_smoothing_edge_cases():
    logits, targets = torch.randn(2, 3, 5), torch.zeros(2, 3, dtype=torch.long)
    all_padding = rpt.label_smoothed_cross_entropy(logits, targets, 0.1, ignore_index=0)
    assert torch.isnan(all_padding) and torch.isnan(
        F.cross_entropy(logits.reshape(-1, 5), targets.reshape(-1), ignore_index=0)
    ), "no real token: NaN, as F.cross_entropy"
    half = torch.randn(4, 7, dtype=torch.float16)
    t = torch.tensor([1, 2, 3, 4])
    got = rpt.label_smoothed_cross_entropy(half, t, 0.1)
    torch.testing.assert_close(
        got.float(), F.cross_entropy(half.float(), t, label_smoothing=0.1), rtol=1e-3, atol=1e-3
    )
    with pytest.raises(ValueError, match=r"\(4, 7\).*\(3,\)"):
        rpt.label_smoothed_cross_entropy(torch.randn(4, 7), torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="integer"):
        rpt.label_smoothed_cross_entropy(torch.randn(4, 7), torch.rand(4))
    with pytest.raises(ValueError, match="smoothing"):
        rpt.label_smoothed_cross_entropy(torch.randn(4, 7), t, 1.5)


# ---- the learning-rate schedule, Eq. (3) ---------------------------------------------------------


def test_lrate_is_equation_3():
    """By hand at the paper's constants: the peak 1 / sqrt(512 * 4000) at step 4000, linear
    before it, 1 / sqrt(step) after it; step_num counts from 1."""
    peak = 1 / math.sqrt(512 * 4000)
    assert rpt.lrate(4000, 512, 4000) == pytest.approx(peak, rel=1e-12)
    assert peak == pytest.approx(6.99e-4, rel=1e-3)
    assert rpt.lrate(1, 512, 4000) == pytest.approx(peak / 4000, rel=1e-12)  # linear from step 1
    assert rpt.lrate(2000, 512, 4000) == pytest.approx(peak / 2, rel=1e-12)
    assert rpt.lrate(16000, 512, 4000) == pytest.approx(peak / 2, rel=1e-12)  # 1 / sqrt(step)
    assert rpt.lrate(100, 32, 10, factor=3.0) == pytest.approx(3 * 32**-0.5 * 100**-0.5)
    steps = range(1, 12001)
    rates = [rpt.lrate(s, 512, 4000) for s in steps]
    assert int(np.argmax(rates)) + 1 == 4000
    with pytest.raises(ValueError, match="from 1"):
        rpt.lrate(0, 512, 4000)


def test_lrate_under_lambda_lr():
    """torch.optim.lr_scheduler.LambdaLR counts epochs from 0: lambda e: lrate(e + 1, ...) with a
    base learning rate of 1 gives Eq. (3) at step_num = e + 1, step after step."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: rpt.lrate(e + 1, 64, 5))
    for step_num in range(1, 30):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(rpt.lrate(step_num, 64, 5))
        optimizer.step()
        scheduler.step()


def test_learning_rate_is_equation_3_scaled_to_its_peak():
    for d_model, warmup, lr in [(32, 10, 8e-3), (512, 4000, 1e-3)]:
        factor = lr * math.sqrt(d_model * warmup)
        for step in [0, 1, warmup - 1, warmup, 5 * warmup]:
            assert tm.learning_rate(step, lr, warmup) == pytest.approx(
                rpt.lrate(step + 1, d_model, warmup, factor), rel=1e-12
            )


# ---- dropout -------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_is_inverted_dropout_like_nn_dropout(device, p):
    """In training: zeros with probability p (as often as nn.Dropout's), survivors x / (1 - p), the
    mean kept; in evaluation, or with p = 0: x itself."""
    for dtype in _dtypes(device):
        torch.manual_seed(0)
        x = (torch.rand(200, 500, dtype=dtype) + 0.5).to(device)
        out = rpt.dropout(x, p, training=True)
        assert out.shape == x.shape and out.dtype == dtype and out.device.type == device.type
        dropped = out == 0
        torch.testing.assert_close(out[~dropped], x[~dropped] / (1 - p), **TOLERANCES[dtype])
        theirs = nn.Dropout(p).train()(x) == 0
        n, sd = x.numel(), math.sqrt(p * (1 - p) / x.numel())
        for share in (dropped.float().mean().item(), theirs.float().mean().item()):
            assert abs(share - p) < 6 * sd, f"dropped {share:.4f} of {n}, expected {p}"
        assert abs(out.double().mean().item() / x.double().mean().item() - 1) < 0.01
        assert rpt.dropout(x, p, training=False) is x
        assert rpt.dropout(x, 0.0, training=True) is x
        assert (rpt.dropout(x, 1.0, training=True) == 0).all()
        torch.manual_seed(1)
        again = rpt.dropout(x, p, True)
        torch.manual_seed(1)
        assert torch.equal(again, rpt.dropout(x, p, True)), "seeded: the same mask"


def test_dropout_refuses_a_bad_probability():
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            rpt.dropout(torch.ones(3), p, True)


def _fixed_dropout(shape, p, seed, device, dtype):
    """A deterministic stand-in for dropout: one fixed mask for every call, so that where the
    layers apply it can be compared exactly with PyTorch's layers."""
    keep = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) >= p
    keep = keep.to(device=device, dtype=dtype)
    return lambda t: t * keep / (1 - p)


class _Apply(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def test_residual_dropout_sits_where_pytorchs_layers_put_it(device):
    """Dropout on each sub-layer's output before Add & Norm: nn.TransformerEncoderLayer's dropout1
    and dropout2, nn.TransformerDecoderLayer's dropout1-3 (their attention-weight and FFN-inner
    dropouts, which the paper's section 5.4 does not describe, switched off)."""
    for dtype in _dtypes(device):
        torch.manual_seed(2)
        drop = _fixed_dropout((3, 5, 16), 0.3, 3, device, dtype)
        enc = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.3, batch_first=True)
        dec = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.3, batch_first=True)
        enc, dec = enc.to(device, dtype).train(), dec.to(device, dtype).train()
        enc.self_attn.dropout = dec.self_attn.dropout = dec.multihead_attn.dropout = 0.0
        for layer, names in (
            (enc, ("dropout1", "dropout2")),
            (dec, ("dropout1", "dropout2", "dropout3")),
        ):
            layer.dropout = nn.Identity()
            for name in names:
                setattr(layer, name, _Apply(drop))
        x = torch.randn(3, 5, 16, dtype=dtype).to(device)
        memory = torch.randn(3, 6, 16, dtype=dtype).to(device)
        with torch.no_grad():
            want_enc = enc(x)
            want_dec = dec(x, memory, tgt_mask=~rpt.causal_mask(5, device=device))
        enc_params = rpt.encoder_layer_params_from_torch(enc)
        dec_params = rpt.decoder_layer_params_from_torch(dec)
        tol = TOLERANCES[dtype]
        torch.testing.assert_close(
            rpt.encoder_layer(x, enc_params, 4, dropout=drop), want_enc, **tol
        )
        torch.testing.assert_close(
            rpt.decoder_layer(x, memory, dec_params, 4, dropout=drop), want_dec, **tol
        )
        np_drop = lambda t: t * drop(torch.ones_like(x)).cpu().numpy()  # noqa: E731
        np.testing.assert_allclose(
            rnp.encoder_layer(x.cpu().numpy(), _to_numpy(enc_params), 4, dropout=np_drop),
            want_enc.cpu().numpy(),
            **tol,
        )


def _to_numpy(params):
    return {k: _to_numpy(v) if isinstance(v, dict) else v.cpu().numpy() for k, v in params.items()}


# ---- the ablations' options ----------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 0.05, 2.5])
def test_scale_matches_f_scaled_dot_product_attention(device, scale):
    for dtype in _dtypes(device):
        gen = torch.Generator().manual_seed(4)
        q, k, v = (
            torch.randn(2, 3, n, 8, generator=gen, dtype=dtype).to(device) for n in (4, 6, 6)
        )
        mask = (torch.rand(2, 3, 4, 6, generator=gen) > 0.3).to(device)
        mask[..., 0] = True
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        got = rpt.scaled_dot_product_attention(q, k, v, mask, scale=scale)
        torch.testing.assert_close(got, want, **TOLERANCES[dtype])
        np.testing.assert_allclose(
            rnp.scaled_dot_product_attention(
                q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), mask.cpu().numpy(), scale=scale
            ),
            want.cpu().numpy(),
            **TOLERANCES[dtype],
        )
    default = rpt.attention_weights(q, k)
    torch.testing.assert_close(default, rpt.attention_weights(q, k, scale=8**-0.5))


def test_unscaled_multi_head_attention_is_queries_times_sqrt_dk():
    """scale=1 in every head equals the scaled attention with W_q and b_q multiplied by
    sqrt(d_k): the unscaled scores are sqrt(d_k) times larger."""
    gen = torch.Generator().manual_seed(5)
    params = rpt.init_params(32, 2, gen, dtype=torch.float64)
    params["b_q"] = torch.randn(32, generator=gen, dtype=torch.float64)
    x = torch.randn(3, 5, 32, generator=gen, dtype=torch.float64)
    boosted = params | {"w_q": params["w_q"] * 4.0, "b_q": params["b_q"] * 4.0}  # sqrt(16) = 4
    got = rpt.encoder_self_attention(x, params, 2, scale=1.0)
    torch.testing.assert_close(got, rpt.encoder_self_attention(x, boosted, 2))
    np.testing.assert_allclose(
        rnp.encoder_self_attention(x.numpy(), _to_numpy(params), 2, scale=1.0), got.numpy()
    )


def test_no_residual_is_layer_norm_of_the_sublayer_alone():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 4, 8, generator=gen, dtype=torch.float64)
    gamma, beta = (torch.randn(8, generator=gen, dtype=torch.float64) for _ in range(2))
    one, zero = torch.ones(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64)
    norm = {"gamma": gamma, "beta": beta}
    torch.testing.assert_close(
        rpt.add_and_norm(x, torch.tanh, norm, residual=False),
        rpt.layer_norm(torch.tanh(x), gamma, beta),
    )
    params = rpt.init_encoder_layer_params(8, 2, 16, gen, dtype=torch.float64)
    h = rpt.layer_norm(rpt.encoder_self_attention(x, params["self_attn"], 2), one, zero)
    want = rpt.layer_norm(rpt.position_wise_ffn(h, params["ffn"]), one, zero)
    torch.testing.assert_close(rpt.encoder_layer(x, params, 2, residual=False), want)
    np.testing.assert_allclose(
        rnp.encoder_layer(x.numpy(), _to_numpy(params), 2, residual=False), want.numpy()
    )


def _model(device, seed=0, **options):
    return tm.Transformer(
        tm.VOCAB_SIZE,
        tm.VOCAB_SIZE,
        16,
        2,
        32,
        2,
        2,
        generator=torch.Generator().manual_seed(seed),
        **options,
    ).to(device)


def test_model_options_reach_every_layer(device):
    """residual=False and scale=1 are what the stacks compute with those options;
    positional=False embeds without the positional encoding."""
    model = _model(device, 1, residual=False, scale=1.0, positional=False).eval()
    src, tgt_in, _ = tm.make_batch("reverse", 3, 2, 6, torch.Generator().manual_seed(1), device)
    mask = model.source_mask(src)
    x = model.src_embed(src) * 4.0  # sqrt(16), no positional encoding
    memory = model.encode(src, mask)
    options = {"residual": False, "scale": 1.0}
    torch.testing.assert_close(memory, rpt.encoder(x, model.encoder_layers, 2, mask, **options))
    y = model.tgt_embed(tgt_in) * 4.0
    want = model.out(rpt.decoder(y, memory, model.decoder_layers, 2, None, mask, **options))
    torch.testing.assert_close(model.decode(tgt_in, memory, mask), want)


def test_without_positional_encoding_the_encoder_sees_a_set(device):
    """Lesson 7's permutation equivariance, in the whole encoder: permuting the source permutes the
    memory, so nothing downstream can tell the source's order (reverse cannot be learned)."""
    with_pe, without = _model(device, 2).eval(), _model(device, 2, positional=False).eval()
    src, _, _ = tm.make_batch("reverse", 4, 6, 6, torch.Generator().manual_seed(2), device)
    perm = torch.tensor([3, 0, 5, 1, 4, 2], device=device)
    torch.testing.assert_close(without.encode(src[:, perm]), without.encode(src)[:, perm])
    assert not torch.allclose(with_pe.encode(src[:, perm]), with_pe.encode(src)[:, perm], atol=1e-3)


def test_model_dropout_in_training_only(device):
    """dropout=p: two training-mode passes differ; eval() gives the dropout-free model's output,
    every time; dropout_fn (a learner's own, say) is called at every site with the mode."""
    calls = []

    def recording(t, p, training):
        calls.append((p, training))
        return F.dropout(t, p, training)

    model = _model(device, 3, dropout=0.1, dropout_fn=recording)
    plain = _model(device, 3).eval()
    src, tgt_in, _ = tm.make_batch("copy", 8, 3, 6, torch.Generator().manual_seed(3), device)
    model.train()
    torch.manual_seed(0)
    first, second = model(src, tgt_in), model(src, tgt_in)
    assert not torch.allclose(first, second), "in training mode, dropout draws a new mask each pass"
    # 2 embeddings + 2 sub-layers per encoder layer + 3 per decoder layer, here 2 + 4 + 6
    assert calls[:12] == [(0.1, True)] * 12 and len(calls) == 24
    model.eval()
    calls.clear()
    with torch.no_grad():
        out = model(src, tgt_in)
        torch.testing.assert_close(out, model(src, tgt_in), rtol=0, atol=0)
        torch.testing.assert_close(out, plain(src, tgt_in))
    assert calls == [(0.1, False)] * 24
    with pytest.raises(ValueError, match="dropout"):
        _model(device, dropout=1.0)


def test_the_kv_cache_refuses_an_ablated_model():
    for options in ({"residual": False}, {"scale": 1.0}):
        model = _model(torch.device("cpu"), **options).eval()
        src, _, _ = tm.make_batch("copy", 2, generator=torch.Generator().manual_seed(4))
        with pytest.raises(ValueError, match="ablat"):
            CachedDecoder(model, src)


def test_train_with_label_smoothing_and_a_schedule():
    """train(smoothing=, schedule=) is the lesson's loop: the schedule is asked for steps 1..N, the
    loss with smoothing stays above the smoothed target's entropy."""
    model = _model(torch.device("cpu"), 5, dropout=0.1)
    asked = []
    losses = tm.train(
        model,
        12,
        "copy",
        16,
        generator=torch.Generator().manual_seed(5),
        smoothing=0.1,
        schedule=lambda s: asked.append(s) or rpt.lrate(s, 16, 4, 0.5),
    )
    assert asked == list(range(1, 13)) and len(losses) == 12 and not model.training
    vocab = tm.VOCAB_SIZE
    top = 1 - 0.1 + 0.1 / vocab
    floor = -top * math.log(top) - (vocab - 1) * (0.1 / vocab) * math.log(0.1 / vocab)
    assert min(losses) > floor and losses[-1] < losses[0]

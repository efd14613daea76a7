"""Lesson 10's encoder-only and decoder-only models against PyTorch's own: the two objectives
against F.cross_entropy (ignore_index), BERT's masking by its statistics, BERT's parameter count
against a BERT-shaped stack of nn modules (and the published 110M / 340M), and the character-level
models of attention_ref.pt.lm against nn.TransformerEncoder with copied weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.pt import lm

from .tolerances import TOLERANCES

DTYPES = [torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny matrices: a second thread only waits for the first, and on a busy 2-core machine the
    two wait on each other at every operation (training here ran 25x slower with 2 threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _dtypes(device):
    return [torch.float32] if device.type == "mps" else DTYPES  # MPS has no float64


def _problem(shape, vocab, device, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(*shape, vocab, generator=g, dtype=dtype)).to(device)
    targets = torch.randint(0, vocab, shape, generator=g).to(device)
    selected = (torch.rand(shape, generator=g) < 0.3).to(device)
    return logits, targets, selected


# ---- the masked-token objective ------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (3, 9), (2, 3, 5)], ids=str)
def test_masked_lm_loss_is_cross_entropy_with_ignore_index(device, shape):
    for dtype in _dtypes(device):
        logits, targets, selected = _problem(shape, 11, device, dtype, seed=len(shape))
        selected.view(-1)[0] = True  # at least one position to predict
        want = F.cross_entropy(
            logits.reshape(-1, 11),
            torch.where(selected, targets, -100).reshape(-1),
            ignore_index=-100,
        )
        got = rpt.masked_lm_loss(logits, targets, selected)
        assert got.dtype == dtype and got.device.type == device.type and got.ndim == 0
        torch.testing.assert_close(got, want, **TOLERANCES[dtype])
        np_got = rnp.masked_lm_loss(*(t.cpu().numpy() for t in (logits, targets, selected)))
        np.testing.assert_allclose(np_got, want.item(), **TOLERANCES[dtype])


def test_masked_lm_loss_ignores_unselected_positions_and_survives_huge_logits(device):
    logits, targets, selected = _problem((4, 6), 9, device, torch.float32, seed=3)
    logits = logits.clone().requires_grad_()
    rpt.masked_lm_loss(logits, targets, selected).backward()
    assert (logits.grad[~selected] == 0).all() and (logits.grad[selected] != 0).any()
    huge = logits.detach() * 1e4
    want = F.cross_entropy(
        huge.reshape(-1, 9), torch.where(selected, targets, -100).reshape(-1), ignore_index=-100
    )
    torch.testing.assert_close(rpt.masked_lm_loss(huge, targets, selected), want)
    nothing = torch.zeros_like(selected)
    assert torch.isnan(F.cross_entropy(huge[0], torch.full_like(targets[0], -100)))  # PyTorch: NaN
    assert rpt.masked_lm_loss(huge, targets, nothing).item() == 0  # the library: 0
    assert rnp.masked_lm_loss(huge.cpu().numpy(), targets.cpu().numpy(), nothing.cpu().numpy()) == 0


# ---- the next-token objective --------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2,), (5,), (3, 8), (2, 2, 4)], ids=str)
def test_next_token_loss_is_cross_entropy_of_the_shifted_targets(device, shape):
    for dtype in _dtypes(device):
        logits, tokens, _ = _problem(shape, 13, device, dtype, seed=7)
        want = F.cross_entropy(logits[..., :-1, :].reshape(-1, 13), tokens[..., 1:].reshape(-1))
        got = rpt.next_token_loss(logits, tokens)
        torch.testing.assert_close(got, want, **TOLERANCES[dtype])
        np_got = rnp.next_token_loss(logits.cpu().numpy(), tokens.cpu().numpy())
        np.testing.assert_allclose(np_got, want.item(), **TOLERANCES[dtype])
    with pytest.raises(ValueError, match="at least 2 tokens"):
        rpt.next_token_loss(logits[..., :1, :], tokens[..., :1])


# ---- BERT's masking ------------------------------------------------------------------------------


def _masking_statistics(tokens, inputs, selected, vocab, mask_id, num_special):
    ordinary = tokens >= num_special
    chosen_in, chosen_orig = inputs[selected], tokens[selected]
    share_other = ((chosen_in != mask_id) & (chosen_in != chosen_orig)).mean()
    return {
        "selected": selected[ordinary].mean(),
        "special selected": selected[~ordinary].any(),
        "unselected copied": (inputs[~selected] == tokens[~selected]).all(),
        "[MASK]": (chosen_in == mask_id).mean(),
        "unchanged": (chosen_in == chosen_orig).mean(),
        "other": share_other,
        "specials drawn": (chosen_in[chosen_in != mask_id] < num_special).any(),
    }


@pytest.mark.parametrize("backend", ["np", "pt"])
def test_mask_tokens_follows_berts_80_10_10_rule(backend):
    vocab, mask_id, num_special = 30, 1, 3
    r = np.random.default_rng(0)
    tokens = r.integers(num_special, vocab, size=(500, 400))
    tokens[:, -40:] = 0  # padding
    tokens[:, 0] = 2  # a [CLS]-like special first token
    if backend == "np":
        inputs, selected = rnp.mask_tokens(tokens, np.random.default_rng(1), vocab, mask_id, 3)
    else:
        t_in, t_sel = rpt.mask_tokens(
            torch.from_numpy(tokens), torch.Generator().manual_seed(1), vocab, mask_id, 3
        )
        inputs, selected = t_in.numpy(), t_sel.numpy()
    assert inputs.dtype == tokens.dtype and selected.dtype == bool
    stats = _masking_statistics(tokens, inputs, selected, vocab, mask_id, num_special)
    ordinary = vocab - num_special  # a random replacement is the original token 1 time in 27
    assert abs(stats["selected"] - 0.15) < 0.003
    assert abs(stats["[MASK]"] - 0.8) < 0.01
    assert abs(stats["unchanged"] - (0.1 + 0.1 / ordinary)) < 0.01
    assert abs(stats["other"] - 0.1 * (1 - 1 / ordinary)) < 0.01
    assert not stats["special selected"] and stats["unselected copied"]
    assert not stats["specials drawn"]


def test_mask_tokens_is_reproducible_and_runs_on_the_tokens_device(device):
    tokens = torch.randint(2, 50, (4, 64), generator=torch.Generator().manual_seed(0)).to(device)
    first = rpt.mask_tokens(tokens, torch.Generator().manual_seed(5), 50, 1, 2)
    again = rpt.mask_tokens(tokens, torch.Generator().manual_seed(5), 50, 1, 2)
    assert all(t.device.type == device.type for t in first)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    tokens32 = tokens.to(torch.int32)
    assert rpt.mask_tokens(tokens32, None, 50, 1, 2)[0].dtype == torch.int32
    everything, _ = rpt.mask_tokens(tokens, None, 50, 1, 2, select_prob=1.0)
    assert not torch.equal(everything, tokens)
    with pytest.raises(ValueError, match="mask_id"):
        rpt.mask_tokens(tokens, None, 50, 7, 2)


# ---- BERT's size ---------------------------------------------------------------------------------


def _bert_shaped(vocab, d_model, layers, heads, d_ff):
    """BERT's encoder as nn modules on the meta device (shapes only, no memory): token, position
    and segment embeddings, their LayerNorm, the encoder layers, the pooler."""
    meta = dict(device="meta")
    return nn.ModuleList(
        [
            *(  # from_pretrained: nn.Embedding's own initialization on meta imports torch._dynamo
                nn.Embedding.from_pretrained(torch.empty(rows, d_model, **meta))
                for rows in (vocab, 512, 2)
            ),
            nn.LayerNorm(d_model, **meta),
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(d_model, heads, d_ff, **meta),
                layers,
                enable_nested_tensor=False,
            ),
            nn.Linear(d_model, d_model, **meta),
        ]
    )


@pytest.mark.parametrize(
    "name, config, published, exact",
    [
        ("BERT-base", (30522, 768, 12, 12, 3072), 110e6, 109_482_240),
        ("BERT-large", (30522, 1024, 24, 16, 4096), 340e6, 335_141_888),
    ],
)
def test_bert_parameter_counts_match_nn_modules_and_the_paper(name, config, published, exact):
    vocab, d_model, layers, heads, d_ff = config
    counts = rnp.bert_parameter_counts(vocab, d_model, layers, heads, d_ff)
    assert rpt.bert_parameter_counts(vocab, d_model, layers, heads, d_ff) == counts
    modules = _bert_shaped(vocab, d_model, layers, heads, d_ff)
    assert sum(counts.values()) == sum(p.numel() for p in modules.parameters()) == exact
    assert counts["layers"] == sum(p.numel() for p in modules[4].parameters())
    assert abs(exact - published) / published < 0.015, f"{name}: {exact:,} vs {published:,.0f}"
    assert rnp.bert_parameter_counts(vocab, d_model, layers, 1, d_ff) == counts  # h changes nothing


# ---- the character-level models ------------------------------------------------------------------


@pytest.mark.parametrize("causal", [True, False], ids=["decoder-only", "encoder-only"])
def test_transformer_lm_is_a_stack_of_nn_transformer_encoder_layers(device, causal):
    """Encoder-only: nn.TransformerEncoderLayer without a mask; decoder-only: the same layer with
    the causal mask. The weights are PyTorch's (moved off their initial values), copied in."""
    for dtype in _dtypes(device):
        model = lm.TransformerLM(20, 16, 4, 32, 2, causal, torch.Generator().manual_seed(0))
        torch.manual_seed(1)
        layers = [
            nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True) for _ in "ab"
        ]
        with torch.no_grad():
            for ours, theirs in zip(model.layers, layers):
                for p in theirs.parameters():
                    p.add_(0.1 * torch.randn_like(p))
                for part, tensors in rpt.encoder_layer_params_from_torch(theirs).items():
                    for key, value in tensors.items():
                        ours[part][key].copy_(value)
        model = model.to(device, dtype).eval()
        tokens = torch.randint(2, 20, (3, 9), generator=torch.Generator().manual_seed(2)).to(device)
        mask = nn.Transformer.generate_square_subsequent_mask(9, device=device, dtype=dtype)
        with torch.no_grad():
            x = model.embed(tokens)
            for layer in layers:
                layer = layer.to(device, dtype).eval()
                x = layer(x, src_mask=mask if causal else None, is_causal=causal)
            torch.testing.assert_close(model(tokens), model.out(x), **TOLERANCES[dtype])


def test_encoder_only_sees_both_sides_decoder_only_only_the_past():
    """Lesson 3's leakage test on the two families: change the last token and see which
    positions' outputs move."""
    tokens = torch.randint(2, 20, (1, 8), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[0, -1] = 2 if tokens[0, -1] != 2 else 3
    for causal, moved in ((True, [False] * 7 + [True]), (False, [True] * 8)):
        model = lm.TransformerLM(20, 16, 4, 32, 2, causal, torch.Generator().manual_seed(1))
        with torch.no_grad():
            diff = (model(tokens) - model(changed)).abs().amax(-1)[0]
        assert (diff > 1e-6).tolist() == moved


def test_training_lowers_both_objectives_and_the_zen_ships_with_python():
    text = lm.zen_of_python()
    assert text.startswith("The Zen of Python") and len(text) > 800 and text.endswith("those!\n")
    tok = lm.CharTokenizer(text)
    assert tok.decode(tok.encode(text)) == text and tok.vocab_size == lm.NUM_SPECIAL + len(
        set(text)
    )
    data = tok.encode(text)
    for causal in (True, False):
        torch.manual_seed(0)
        model = lm.TransformerLM(
            tok.vocab_size, 32, 2, 64, 1, causal, torch.Generator().manual_seed(0)
        )
        losses = lm.train_lm(model, data, 40, 8, 24, rng=torch.Generator().manual_seed(1))
        assert np.mean(losses[-5:]) < 0.75 * np.mean(losses[:5]), (causal, losses[:5], losses[-5:])

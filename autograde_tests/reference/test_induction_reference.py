"""Lesson 15's attention-only model, its data and its training: each layer is lesson 4's multi-head
attention under lesson 3's causal mask; the whole forward pass equals one written independently
with ``F.scaled_dot_product_attention`` from the per-head weights; the residual stream is the sum
of its components; an edit of a head's output reaches the later layers; training grows an
induction head in two layers and not in one; the challenge's mystery model hides silent twins.
On every device present."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attention_ref.pt as rpt
from attention_ref.pt.induction import (
    BOS,
    AttentionOnly,
    mystery_model,
    position_losses,
    repeated_random_tokens,
    repeated_segments,
    train_attention_only,
    with_heads,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny matrices: a second thread only waits for the first, and on a busy 2-core machine the
    two wait on each other at every operation (this module's training, 400 steps, did not end in
    15 minutes with two threads at a load of 25; with one it takes seconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(device, dtype=torch.float32, seed=0, **sizes) -> AttentionOnly:
    model = AttentionOnly(generator=torch.Generator().manual_seed(seed), **sizes)
    return model.to(device=device, dtype=dtype)


def _independent_forward(model: AttentionOnly, tokens: torch.Tensor) -> torch.Tensor:
    """The model written again from its per-head weights with PyTorch's own attention."""
    x = model.W_E[tokens] + model.W_pos[: tokens.shape[-1]]
    for layer in range(model.num_layers):
        q, k, v = (
            torch.einsum("bnd,hde->bhne", x, w[layer]) for w in (model.W_Q, model.W_K, model.W_V)
        )
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + torch.einsum("bhne,hed->bnd", z, model.W_O[layer])
    return x @ model.W_U


def test_repeated_segments_repeat_with_their_length():
    tokens, lengths = repeated_segments(50, 41, 64, 6, 20, torch.Generator().manual_seed(3))
    assert tokens.shape == (50, 41) and lengths.shape == (50,)
    assert (tokens[:, 0] == BOS).all() and (tokens[:, 1:] >= 1).all() and (tokens < 64).all()
    assert lengths.min() >= 6 and lengths.max() <= 20 and len(lengths.unique()) > 5
    for row, length in zip(tokens, lengths.tolist()):
        body = row[1:]
        assert torch.equal(body[length:], body[: len(body) - length])
    again, _ = repeated_segments(50, 41, 64, 6, 20, torch.Generator().manual_seed(3))
    assert torch.equal(tokens, again)
    with pytest.raises(ValueError, match="min_len"):
        repeated_segments(2, 41, 64, 10, 5)
    with pytest.raises(ValueError, match="vocab_size"):
        repeated_segments(2, 41, 1)


def test_repeated_random_tokens_are_bos_and_a_segment_twice():
    tokens = repeated_random_tokens(4, 7, 30, torch.Generator().manual_seed(1))
    assert tokens.shape == (4, 15) and (tokens[:, 0] == BOS).all()
    assert torch.equal(tokens[:, 1:8], tokens[:, 8:]) and (tokens[:, 1:] >= 1).all()


def test_a_layer_is_lesson_4s_multi_head_attention(device):
    model = _model(device, torch.float64, d_model=24, num_heads=3, num_layers=2, n_ctx=9)
    x = torch.randn(2, 9, 24, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(
        device
    )
    outputs, weights = model.head_outputs(x, 1)
    want, want_weights = rpt.multi_head_attention(
        x, x, x, model.layers[1], 3, rpt.causal_mask(9, device=device), return_weights=True
    )
    torch.testing.assert_close(outputs.sum(dim=-3), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights, want_weights, rtol=1e-12, atol=1e-12)
    assert outputs.shape == (2, 3, 9, 24) and outputs.device == x.device


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_the_model_is_attention_written_again(device, dtype):
    if device.type == "mps" and dtype == torch.float64:
        pytest.skip("MPS has no float64")
    model = _model(
        device, dtype, vocab_size=20, d_model=16, num_heads=2, num_layers=3, n_ctx=12, d_head=5
    )
    tokens = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(4)).to(device)
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        logits, weights = model(tokens, return_weights=True)
        torch.testing.assert_close(logits, _independent_forward(model, tokens), **tol)
        parts, labels = model.components(tokens)
    assert logits.shape == (3, 12, 20) and logits.dtype == dtype and logits.device == tokens.device
    assert len(weights) == 3 and weights[0].shape == (3, 2, 12, 12)
    assert labels == ["embed", "pos"] + [f"L{layer}H{h}" for layer in range(3) for h in range(2)]
    assert parts.shape == (3, 8, 12, 16)
    torch.testing.assert_close(parts.sum(dim=-3) @ model.W_U, logits, **tol)
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(1, 13, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="integer"):
        model(torch.zeros(1, 3, device=device))


def test_the_per_head_views_are_the_layers_weights():
    model = _model("cpu", d_model=12, num_heads=3, n_ctx=5)
    w_q = model.layers[1]["w_q"]  # (d_model, heads * d_head), lesson 4's layout
    assert model.W_Q.shape == (2, 3, 12, 4) and model.W_O.shape == (2, 3, 4, 12)
    torch.testing.assert_close(model.W_Q[1, 2], w_q[:, 8:12])
    torch.testing.assert_close(model.W_O[0, 1], model.layers[0]["w_o"][4:8])
    assert model.W_E is model.embed and model.W_U is model.unembed
    model.W_Q.sum().backward()  # the views carry gradients to the parameters
    assert model.layers[0]["w_q"].grad is not None


def test_an_edit_of_a_head_reaches_the_later_layers(device):
    model = _model(device, torch.float64, n_ctx=11)
    tokens = repeated_random_tokens(3, 5, 64, torch.Generator().manual_seed(5)).to(device)
    seen = []

    def silence_head_0_of_layer_0(layer, outputs):
        seen.append((layer, tuple(outputs.shape)))
        return (
            torch.cat([torch.zeros_like(outputs[:, :1]), outputs[:, 1:]], dim=1)
            if layer == 0
            else outputs
        )

    with torch.no_grad():
        _, plain = model(tokens, return_weights=True)
        _, edited = model(tokens, edit_heads=silence_head_0_of_layer_0, return_weights=True)
        unchanged = model(tokens, edit_heads=lambda layer, outputs: outputs)
    assert seen == [(0, (3, 2, 11, 64)), (1, (3, 2, 11, 64))]
    torch.testing.assert_close(edited[0], plain[0])  # layer 0's own pattern is computed before
    assert (edited[1] - plain[1]).abs().max() > 1e-3  # layer 1 reads the edited stream
    torch.testing.assert_close(unchanged, model(tokens))


@pytest.fixture(scope="module")
def trained():
    """Lesson 15's two-layer model at the lesson's seed, and a one-layer one (CPU, one thread's
    worth of work: a few seconds each)."""
    models = {}
    for layers in (2, 1):
        model = AttentionOnly(num_layers=layers, generator=torch.Generator().manual_seed(15))
        record = train_attention_only(model, 400, generator=torch.Generator().manual_seed(16))
        models[layers] = (model, record)
    return models


def test_two_layers_learn_to_copy_and_one_layer_does_not(trained):
    (two, record_two), record_one = trained[2], trained[1][1]
    assert len(record_two["loss"]) == 400 and set(record_two) == {"loss", "first", "repeated"}
    tail = lambda record, key: sum(record[key][-20:]) / 20  # noqa: E731
    assert tail(record_two, "repeated") < 1.0 < 2.0 < tail(record_one, "repeated")
    assert tail(record_two, "first") > 4.0 and tail(record_one, "first") > 4.0  # ln 63 = 4.14
    tokens = repeated_random_tokens(32, 20, 64, torch.Generator().manual_seed(17))
    with torch.no_grad():
        _, weights = two(tokens, return_weights=True)
    assert rpt.previous_token_score(weights[0]).mean(0).max() > 0.4
    assert (rpt.induction_score(weights[1], 20).mean(0) > 0.5).all()
    losses = position_losses(two, tokens)
    assert losses.shape == (40,) and losses[21:].mean() < 1.0 < 3.5 < losses[:5].mean()


def test_the_mystery_model_hides_silent_twins(trained):
    model = trained[2][0]
    found = rpt.find_induction_circuit(model)
    mystery, answer = mystery_model(
        model, found["previous_token"], found["induction"], torch.Generator().manual_seed(7)
    )
    assert mystery.num_heads == 3 and mystery.W_Q.shape == (2, 3, 64, 32)
    tokens = repeated_random_tokens(16, 20, 64, torch.Generator().manual_seed(8))
    with torch.no_grad():
        (base, _), (logits, weights) = (
            model(tokens, return_weights=True),
            mystery(tokens, return_weights=True),
        )
    assert (logits - base).abs().max() < 0.05 * base.abs().max()  # the twins change next to nothing
    scores = rpt.previous_token_score(weights[0]).mean(0)
    twin = [
        h
        for h in range(3)
        if h != answer["previous_token"]
        and torch.isclose(scores[h], scores[answer["previous_token"]])
    ]
    assert len(twin) == 1, "the previous-token head's twin has its pattern"
    assert rpt.find_induction_circuit(mystery) == answer
    assert sorted(answer["induction"]) == answer["induction"] and len(answer["induction"]) == len(
        found["induction"]
    )
    identity = with_heads(model, model.W_Q, model.W_K, model.W_V, model.W_O)
    torch.testing.assert_close(identity(tokens), base)
    with pytest.raises(ValueError, match="two-layer"):
        mystery_model(AttentionOnly(num_layers=1), 0, [0])

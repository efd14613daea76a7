"""Lesson 15's readings of a model against their definitions written out (loops over queries,
heads and pairs, matrices multiplied out), and against TransformerLens where the two map: the
attention patterns, its head detector's previous-token and induction scores, the OV circuit's
eigenvalues through its ``FactoredMatrix``, and ``all_composition_scores("K")``. The comparisons
with TransformerLens skip, saying so, where it is not installed (a bare GPU machine)."""

from __future__ import annotations

import pytest
import torch

import attention_ref.pt as rpt
from attention_ref.pt.induction import AttentionOnly, repeated_random_tokens
from attention_ref.testing import record_torch

NO_LENS = "transformer_lens is not installed here: the comparisons with it need it (make install)"


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny matrices: a second thread only waits for the first, and on a busy 2-core machine the
    two wait on each other at every operation (this module's training, 400 steps, did not end in
    15 minutes with two threads at a load of 25; with one it takes seconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(device="cpu", dtype=torch.float64, seed=0, **sizes) -> AttentionOnly:
    return AttentionOnly(generator=torch.Generator().manual_seed(seed), **sizes).to(
        device=device, dtype=dtype
    )


def _patterns(shape, seed) -> torch.Tensor:
    """Causal attention weights: rows of a lower triangle that sum to 1."""
    scores = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    n = shape[-1]
    return torch.softmax(
        scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -torch.inf), dim=-1
    )


def test_the_scores_are_their_definitions(device):
    weights = _patterns((2, 3, 11, 11), 1).to(device)
    seg = 5
    for b in range(2):
        for h in range(3):
            w = weights[b, h]
            prev = sum(w[i, i - 1] for i in range(1, 11)) / 10
            first = sum(w[i, 0] for i in range(1, 11)) / 10
            ind = sum(w[i, i - seg + 1] for i in range(seg + 1, 2 * seg + 1)) / seg
            torch.testing.assert_close(rpt.previous_token_score(weights)[b, h], prev)
            torch.testing.assert_close(rpt.first_token_score(weights)[b, h], first)
            torch.testing.assert_close(rpt.induction_score(weights, seg)[b, h], ind)
    assert rpt.induction_score(weights, seg).device == weights.device
    with pytest.raises(ValueError, match="seg_len"):
        rpt.induction_score(weights, 4)
    with pytest.raises(ValueError, match="n, n"):
        rpt.previous_token_score(weights[..., :-1])


def test_the_scores_of_perfect_heads():
    n, seg = 9, 4
    previous = torch.eye(n, dtype=torch.float64).roll(-1, dims=1).tril()
    previous[0, 0] = 1.0
    induction = torch.zeros(n, n, dtype=torch.float64)
    induction[:, 0] = 1.0
    for i in range(seg + 1, n):
        induction[i] = 0.0
        induction[i, i - seg + 1] = 1.0
    assert rpt.previous_token_score(previous) == 1.0 and rpt.induction_score(previous, seg) == 0.0
    assert rpt.induction_score(induction, seg) == 1.0 and rpt.first_token_score(induction) == 0.5


def _loss(logits, tokens):
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


@pytest.mark.parametrize("method", ["zero", "mean"])
def test_ablation_is_the_model_without_that_heads_output(device, method):
    model = _model(device, n_ctx=13, num_heads=3)
    tokens = repeated_random_tokens(5, 6, 64, torch.Generator().manual_seed(2)).to(device)
    before = {name: p.clone() for name, p in model.named_parameters()}
    # written again: layer 0 by hand, head 1 replaced, then layer 1 on that stream
    x = model.W_E[tokens] + model.W_pos[:13]
    with torch.no_grad():
        out0, _ = model.head_outputs(x, 0)
        out0 = out0.clone()
        out0[:, 1] = 0 if method == "zero" else out0[:, 1].mean(dim=0, keepdim=True)
        x = x + out0.sum(1)
        out1, _ = model.head_outputs(x, 1)
        want = (x + out1.sum(1)) @ model.W_U
        got = rpt.ablate_head(model, tokens, 0, 1, method)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    assert _loss(got, tokens) != _loss(model(tokens), tokens)
    with pytest.raises(ValueError, match="method"):
        rpt.ablate_head(model, tokens, 0, 1, "resample")
    with pytest.raises(ValueError, match="no head 3"):
        rpt.ablate_head(model, tokens, 0, 3)


def test_the_circuits_are_their_products_never_vocab_by_vocab():
    g = torch.Generator().manual_seed(3)
    vocab, d, dh = 2048, 32, 8
    w_e, w_u = torch.randn(vocab, d, generator=g), torch.randn(d, vocab, generator=g)
    w_q, w_k, w_v = (torch.randn(d, dh, generator=g) for _ in range(3))
    w_o = torch.randn(dh, d, generator=g)
    (left, right), record = record_torch(rpt.qk_circuit, w_e, w_q, w_k)
    assert left.shape == (vocab, dh) and right.shape == (dh, vocab)
    assert record.largest_new_bytes < vocab * vocab * 4 / 8
    torch.testing.assert_close(left[:50] @ right[:, :40], (w_e[:50] @ w_q) @ (w_e[:40] @ w_k).T)
    (left, right), record = record_torch(rpt.ov_circuit, w_e, w_v, w_o, w_u)
    assert left.shape == (vocab, dh) and right.shape == (dh, vocab)
    assert record.largest_new_bytes < vocab * vocab * 4 / 8
    torch.testing.assert_close(
        left[:30] @ right[:, :20], w_e[:30] @ w_v @ w_o @ w_u[:, :20], rtol=1e-4, atol=1e-3
    )
    score, record = record_torch(rpt.copying_score, left, right)
    assert record.largest_new_bytes < vocab * vocab * 4 / 8
    assert -1.0 <= score <= 1.0


def test_the_copying_score_is_the_eigenvalues_of_the_whole_matrix():
    g = torch.Generator().manual_seed(4)
    for vocab, dh in [(12, 3), (30, 7), (5, 5)]:
        left = torch.randn(vocab, dh, generator=g, dtype=torch.float64)
        right = torch.randn(dh, vocab, generator=g, dtype=torch.float64)
        eigenvalues = torch.linalg.eigvals(left @ right)
        want = (eigenvalues.sum().real / eigenvalues.abs().sum()).item()
        assert rpt.copying_score(left, right) == pytest.approx(want, rel=1e-9, abs=1e-12)
    basis = torch.randn(20, 4, generator=g, dtype=torch.float64)
    assert rpt.copying_score(basis, basis.pinverse()) == pytest.approx(1.0)  # a projection copies
    assert rpt.copying_score(basis, -basis.pinverse()) == pytest.approx(-1.0)


def test_k_composition_is_elhage_et_als_frobenius_ratio(device):
    g = torch.Generator().manual_seed(5)
    d, dh = 10, 3
    w_v, w_k = (torch.randn(h, d, dh, generator=g, dtype=torch.float64).to(device) for h in (2, 3))
    w_o = torch.randn(2, dh, d, generator=g, dtype=torch.float64).to(device)
    w_q = torch.randn(3, d, dh, generator=g, dtype=torch.float64).to(device)
    got = rpt.k_composition_scores(w_v, w_o, w_q, w_k)
    assert got.shape == (2, 3) and got.device == w_v.device
    for i in range(2):
        for j in range(3):
            # Elhage et al.'s column vectors: W_QK = W_Q^T W_K, W_OV = W_O W_V (their W_Q: ours^T)
            qk, ov = w_q[j] @ w_k[j].T, (w_v[i] @ w_o[i]).T
            want = torch.linalg.norm(qk @ ov) / (torch.linalg.norm(qk) * torch.linalg.norm(ov))
            torch.testing.assert_close(got[i, j], want)


def test_direct_logit_attribution_adds_up_to_the_logit(device):
    model = _model(device, n_ctx=13)
    tokens = repeated_random_tokens(4, 6, 64, torch.Generator().manual_seed(6)).to(device)
    with torch.no_grad():
        parts, _ = model.components(tokens)
        got = rpt.direct_logit_attribution(parts, model.W_U, tokens)
        logits = model(tokens)
    assert got.shape == (4, 6, 12)
    correct = logits[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    torch.testing.assert_close(got.sum(dim=1), correct, rtol=1e-10, atol=1e-10)
    each = (parts[:, :, :-1] @ model.W_U).gather(-1, tokens[:, None, 1:, None].expand(4, 6, 12, 1))[
        ..., 0
    ]
    torch.testing.assert_close(got, each, rtol=1e-10, atol=1e-10)
    many = torch.randn(2, 6, 9, 8, generator=torch.Generator().manual_seed(7))
    big_u = torch.randn(8, 5000, generator=torch.Generator().manual_seed(8))
    ids = torch.randint(0, 5000, (2, 9), generator=torch.Generator().manual_seed(9))
    _, record = record_torch(rpt.direct_logit_attribution, many, big_u, ids)
    assert record.largest_new_bytes < 2 * 6 * 9 * 5000 * 4 / 8  # no logit of every token


def _lens():
    pytest.importorskip("transformer_lens", reason=NO_LENS)
    from attention_ref.lens import to_transformer_lens

    return to_transformer_lens


@pytest.fixture(scope="module")
def lens_pair():
    to_transformer_lens = _lens()
    model = _model(seed=11, num_heads=2, n_ctx=41)
    return model, to_transformer_lens(model)


def test_transformer_lens_runs_the_same_model(lens_pair):
    model, bridge = lens_pair
    tokens = repeated_random_tokens(3, 20, 64, torch.Generator().manual_seed(10))
    with torch.no_grad():
        logits, weights = model(tokens, return_weights=True)
        lens_logits, cache = bridge.run_with_cache(tokens)
    torch.testing.assert_close(lens_logits, logits, rtol=1e-10, atol=1e-10)
    for layer in range(2):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.attn.hook_pattern"], weights[layer], rtol=1e-10, atol=1e-12
        )


def test_transformer_lens_scores_and_circuits_are_the_courses(lens_pair):
    from transformer_lens import head_detector

    model, bridge = lens_pair
    distinct = (
        torch.randperm(63, generator=torch.Generator().manual_seed(12))[:20] + 1
    )  # no token twice
    tokens = torch.cat([torch.zeros(1, dtype=torch.long), distinct, distinct])[None]
    n = tokens.shape[-1]
    with torch.no_grad():
        _, weights = model(tokens, return_weights=True)
    for layer in range(2):
        for head in range(2):
            w = weights[layer][0, head]
            lens_score = lambda pattern: head_detector.compute_head_attention_similarity_score(  # noqa: E731
                w, pattern, exclude_bos=False, exclude_current_token=False, error_measure="mul"
            )
            # TransformerLens averages over all n rows; the course over the rows that have a target
            prev = lens_score(head_detector.get_previous_token_head_detection_pattern(tokens))
            assert prev * n / (n - 1) == pytest.approx(rpt.previous_token_score(w).item(), rel=1e-9)
            induction = lens_score(head_detector.get_induction_head_detection_pattern(tokens))
            assert induction * n / 20 == pytest.approx(rpt.induction_score(w, 20).item(), rel=1e-9)
            full_ov = bridge.W_E @ bridge.OV[layer, head] @ bridge.W_U  # a FactoredMatrix
            eigenvalues = full_ov.eigenvalues
            lens_copying = (eigenvalues.sum().real / eigenvalues.abs().sum()).item()
            ours = rpt.copying_score(
                *rpt.ov_circuit(
                    model.W_E, model.W_V[layer, head], model.W_O[layer, head], model.W_U
                )
            )
            assert ours == pytest.approx(lens_copying, rel=1e-9, abs=1e-12)
            full_qk = bridge.W_E @ bridge.QK[layer, head] @ bridge.W_E.T
            left, right = rpt.qk_circuit(model.W_E, model.W_Q[layer, head], model.W_K[layer, head])
            torch.testing.assert_close(full_qk.AB, left @ right, rtol=1e-10, atol=1e-10)
    lens_k = bridge.all_composition_scores("K").scores[0, :, 1, :]
    ours = rpt.k_composition_scores(model.W_V[0], model.W_O[0], model.W_Q[1], model.W_K[1])
    torch.testing.assert_close(ours, lens_k.to(ours.dtype), rtol=1e-9, atol=1e-12)

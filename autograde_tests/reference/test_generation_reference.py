"""Lesson 10's text generation against PyTorch's own and against brute force: the next-token
distribution against torch.softmax and torch.topk, sampling against torch.multinomial's
frequencies, beam search against greedy decoding (beam 1), exhaustive search (a beam wide enough
to keep everything) and a plain re-statement of the search fairseq and Hugging Face run (k live
hypotheses, finished ones replaced), NumPy against PyTorch, the KV-cached generator against the
uncached one, and rotary position embedding against lesson 7's rotation matrices."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.pt import lm

from .tolerances import TOLERANCES


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny matrices: a second thread only waits for the first, and on a busy 2-core machine the
    two wait on each other at every operation (training here ran 25x slower with 2 threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _dtypes(device):
    return [torch.float32] if device.type == "mps" else [torch.float32, torch.float64]


# ---- temperature and top-k -----------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (3, 11), (2, 4, 5)], ids=str)
def test_next_token_distribution_is_a_tempered_softmax_over_the_top_k(device, shape):
    for dtype in _dtypes(device):
        g = torch.Generator().manual_seed(len(shape))
        logits = (2 * torch.randn(shape, generator=g, dtype=dtype)).to(device)
        vocab = shape[-1]
        for temperature, top_k in itertools.product(
            (0.3, 1.0, 2.5), (None, 1, 3, vocab, vocab + 4)
        ):
            got = rpt.next_token_distribution(logits, temperature, top_k)
            scaled = logits / temperature
            if top_k is not None and top_k < vocab:
                top = scaled.topk(top_k, dim=-1)
                kept = torch.full_like(scaled, -torch.inf).scatter(-1, top.indices, top.values)
                scaled = kept
            torch.testing.assert_close(got, torch.softmax(scaled, -1), **TOLERANCES[dtype])
            np.testing.assert_allclose(
                rnp.next_token_distribution(logits.cpu().numpy(), temperature, top_k),
                got.cpu().numpy(),
                **TOLERANCES[dtype],
            )


def test_next_token_distribution_edge_cases():
    logits = torch.tensor([1.0, 3.0, 3.0, -2.0])
    assert (rpt.next_token_distribution(logits, top_k=1) > 0).tolist() == [False, True, True, False]
    assert torch.equal(
        rpt.next_token_distribution(logits * 1e4).isfinite(), torch.ones(4, dtype=bool)
    )
    cold = rpt.next_token_distribution(torch.tensor([0.0, 1.0, 0.5]), temperature=1e-4)
    torch.testing.assert_close(cold, torch.tensor([0.0, 1.0, 0.0]))
    for backend, x in ((rpt, logits), (rnp, logits.numpy())):
        with pytest.raises(ValueError, match="temperature"):
            backend.next_token_distribution(x, temperature=0.0)
        with pytest.raises(ValueError, match="top_k"):
            backend.next_token_distribution(x, top_k=0)


def test_sampling_frequencies_follow_the_distribution(device):
    """torch.multinomial (the library's sample_next) and the NumPy sampler, 40,000 draws each:
    every frequency within 4.5 standard deviations of its probability; tokens outside the top k
    never drawn."""
    logits = torch.tensor([[1.5, 0.2, -0.7, 2.0, 0.9, -3.0]], device=device).expand(40_000, 6)
    generator = torch.Generator(device=device).manual_seed(0)
    for temperature, top_k in ((1.0, None), (0.6, 3), (2.0, 5)):
        probs = rpt.next_token_distribution(logits[0], temperature, top_k).cpu().double()
        torch_draws = rpt.sample_next(logits, temperature, top_k, generator).cpu()
        np_draws = rnp.sample_next(
            logits.cpu().numpy(), temperature, top_k, np.random.default_rng(1)
        )
        for draws in (torch_draws.numpy(), np_draws):
            counts = np.bincount(draws, minlength=6) / len(draws)
            sigma = np.sqrt(probs.numpy() * (1 - probs.numpy()) / len(draws))
            assert (np.abs(counts - probs.numpy()) <= 4.5 * sigma + 1e-12).all(), (counts, probs)
            assert (counts[probs.numpy() == 0] == 0).all()


# ---- beam search ---------------------------------------------------------------------------------


def _trigram(vocab, seed, device=None):
    """log_prob_fn of a random model whose next token depends on the last two tokens."""
    g = torch.Generator().manual_seed(seed)
    table = torch.log_softmax(
        2 * torch.randn(vocab, vocab, vocab, generator=g, dtype=torch.float64), -1
    )

    def log_prob_fn(seqs):
        last_two = seqs[:, -2:] if seqs.shape[1] > 1 else torch.cat([seqs, seqs], dim=1)
        return table[last_two[:, 0].cpu(), last_two[:, 1].cpu()].to(device or seqs.device)

    return log_prob_fn


def _greedy(log_prob_fn, prompt, max_new, eos):
    seqs = prompt[None]
    for _ in range(max_new):
        token = log_prob_fn(seqs).argmax(-1)
        seqs = torch.cat([seqs, token[:, None]], 1)
        if token.item() == eos:
            break
    return seqs[0, len(prompt) :]


def _brute_force(log_prob_fn, prompt, max_new, eos, vocab, alpha):
    """The best of every sequence of at most max_new tokens that ends at its first eos (or is
    max_new long without one), by log P / lp."""
    best = (-math.inf, None)
    for length in range(1, max_new + 1):
        for tail in itertools.product(range(vocab), repeat=length):
            if eos in tail[:-1] or (tail[-1] != eos and length < max_new):
                continue
            seq = torch.cat([prompt, torch.tensor(tail)])
            logp = sum(
                log_prob_fn(seq[None, : len(prompt) + i])[0, t].item() for i, t in enumerate(tail)
            )
            score = logp / rnp.length_penalty(length, alpha)
            best = max(best, (score, tail), key=lambda item: item[0])
    return best


def test_length_penalty_is_wu_et_al():
    assert rnp.length_penalty(1, 0.6) == 1.0 and rnp.length_penalty(9, 0.0) == 1.0
    assert rnp.length_penalty(10, 0.6) == pytest.approx((15 / 6) ** 0.6)
    assert rpt.length_penalty is rnp.length_penalty


def test_beam_of_one_without_length_penalty_is_greedy_decoding(device):
    """alpha = 0: nothing after greedy's end can beat it (log P only falls). With a length penalty
    the search goes on extending the best unfinished hypothesis, and may find a longer winner."""
    for seed in range(4):
        fn = _trigram(6, seed)
        prompt = torch.tensor([seed % 6, 2], device=device)
        tokens, score = rpt.beam_search(fn, prompt, beam_size=1, max_new=8, eos=0, alpha=0.0)
        assert torch.equal(tokens, _greedy(fn, prompt, 8, 0))
        assert tokens.device.type == device.type and isinstance(score, float)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_a_beam_that_keeps_everything_is_exhaustive_search(alpha):
    vocab, max_new = 3, 4  # at most 3 + 9 + 27 + 81 hypotheses: a beam of 81 keeps them all
    for seed in range(3):
        fn = _trigram(vocab, 10 + seed)
        prompt = torch.tensor([1])
        tokens, score = rpt.beam_search(fn, prompt, 81, max_new, eos=0, alpha=alpha)
        want_score, want_tokens = _brute_force(fn, prompt, max_new, 0, vocab, alpha)
        assert tuple(tokens.tolist()) == want_tokens and score == pytest.approx(want_score)


@pytest.mark.parametrize(
    "beam_size, alpha, eos", [(2, 0.6, 0), (4, 0.6, 3), (5, 0.0, 1), (3, 1.0, None)]
)
def test_numpy_and_pytorch_beam_search_agree(device, beam_size, alpha, eos):
    fn = _trigram(7, beam_size)
    np_fn = _trigram(7, beam_size, device="cpu")
    prompt = torch.tensor([4, 5, 6], device=device)
    tokens, score = rpt.beam_search(fn, prompt, beam_size, 12, eos, alpha)
    np_tokens, np_score = rnp.beam_search(
        lambda seqs: np_fn(torch.from_numpy(seqs)).numpy(),
        prompt.cpu().numpy(),
        beam_size,
        12,
        eos,
        alpha,
    )
    assert tokens.tolist() == np_tokens.tolist() and score == pytest.approx(np_score)
    if eos is None:
        assert len(tokens) == 12


def _plain_beam_search(log_prob_fn, prompt, beam_size, max_new, eos, alpha):
    """The search fairseq and Hugging Face run, restated with lists: at each step every extension
    of every live hypothesis is ranked; those among the best beam_size that end with eos finish,
    and the best beam_size that do not stay live. All max_new steps run (no early stop); the live
    ones compete at the end."""
    live, finished = [(0.0, list(prompt.tolist()))], []
    for step in range(1, max_new + 1):
        rows = log_prob_fn(torch.tensor([seq for _, seq in live])).tolist()
        ranked = sorted(
            (
                (score + lp, seq + [token])
                for (score, seq), lps in zip(live, rows)
                for token, lp in enumerate(lps)
            ),
            key=lambda item: -item[0],
        )
        ends = [item for item in ranked[:beam_size] if item[1][-1] == eos]
        finished += [(s / rnp.length_penalty(step, alpha), seq) for s, seq in ends]
        live = [item for item in ranked if item[1][-1] != eos][:beam_size]
    finished += [(s / rnp.length_penalty(max_new, alpha), seq) for s, seq in live]
    score, seq = max(finished, key=lambda item: item[0])
    return seq[len(prompt) :], score


@pytest.mark.parametrize(
    "vocab, beam_size, alpha", [(5, 2, 0.6), (7, 4, 0.6), (6, 3, 1.0), (4, 5, 0.0)]
)
def test_beam_search_is_the_search_fairseq_and_hugging_face_run(vocab, beam_size, alpha):
    """k live hypotheses at every step, however many finish; the NumPy and PyTorch versions (which
    stop as soon as no live hypothesis can win) give what the plain search gives after all steps."""
    for seed in range(6):
        fn = _trigram(vocab, 100 + seed)
        prompt = torch.tensor([seed % vocab])
        want, want_score = _plain_beam_search(fn, prompt, beam_size, 10, 0, alpha)
        tokens, score = rpt.beam_search(fn, prompt, beam_size, 10, 0, alpha)
        assert tokens.tolist() == want and score == pytest.approx(want_score)


def _tree_model(tree, vocab):
    """log_prob_fn of {tokens after a one-token prompt: {next token: probability}}."""

    def fn(seqs):
        rows = []
        for seq in seqs.tolist():
            p = torch.full((vocab,), 1e-9, dtype=torch.float64)
            for token, prob in tree.get(tuple(seq[1:]), {}).items():
                p[token] = prob
            rows.append((p / p.sum()).log())
        return torch.stack(rows)

    return fn


def test_a_finished_hypothesis_leaves_its_place_to_the_next_best():
    """Beam 2: <end> (0.26) finishes at step 1 and B (0.25), third, takes its place; B C <end>
    wins. A shrinking beam (the best beam_size extensions only) would extend A alone."""
    a, b, c, end = 1, 2, 3, 4
    tree = {(): {a: 0.49, end: 0.26, b: 0.25}, (a,): {a: 0.3, end: 0.2, c: 0.5},
            (a, a): {end: 1.0}, (a, c): {end: 1.0}, (b,): {c: 1.0}, (b, c): {end: 1.0}}  # fmt: skip
    fn = _tree_model(tree, 5)
    assert rpt.beam_search(fn, torch.tensor([0]), 2, 5, end)[0].tolist() == [b, c, end]


def test_an_end_below_the_best_beam_size_is_dropped():
    a, b, c, end = 1, 2, 3, 4
    fn = _tree_model({(): {a: 0.4, b: 0.35, end: 0.25}, (a,): {end: 0.4, c: 0.3, a: 0.3},
                      (b,): {end: 0.4, c: 0.3, b: 0.3}, (a, c): {end: 1.0}, (b, c): {end: 1.0},
                      (a, a): {end: 1.0}, (b, b): {end: 1.0}}, 5)  # fmt: skip
    assert rpt.beam_search(fn, torch.tensor([0]), 2, 5, end)[0].tolist() == [a, end]


def test_a_negative_alpha_is_refused():
    with pytest.raises(ValueError, match="alpha"):
        rpt.beam_search(_trigram(4, 0), torch.tensor([1]), 2, 3, 0, alpha=-0.5)


def test_length_penalty_changes_which_hypothesis_wins():
    """One short output of higher probability, one long one of lower: log P alone (alpha = 0)
    takes the short one; divided by lp with alpha = 0.6 the long one wins."""
    x, eos = 1, 3
    tree = {(): {x: 0.6, eos: 0.4}, (x,): {x: 0.85, eos: 0.15}, (x, x): {x: 0.85, eos: 0.15},
            (x, x, x): {x: 0.2, eos: 0.8}, (x, x, x, x): {eos: 1.0}}  # fmt: skip

    def fn(seqs):
        rows = []
        for seq in seqs.tolist():
            p = torch.full((4,), 1e-9, dtype=torch.float64)
            for token, prob in tree.get(tuple(seq[1:]), {}).items():
                p[token] = prob
            rows.append((p / p.sum()).log())
        return torch.stack(rows)

    prompt = torch.tensor([0])
    assert rpt.beam_search(fn, prompt, 2, 5, eos, alpha=0.0)[0].tolist() == [eos]
    tokens, score = rpt.beam_search(fn, prompt, 2, 5, eos, alpha=0.6)
    assert tokens.tolist() == [x, x, x, eos]
    assert score == pytest.approx(math.log(0.6 * 0.85 * 0.85 * 0.8) / (9 / 6) ** 0.6, rel=1e-6)


# ---- the generator and its KV cache --------------------------------------------------------------


def test_generating_with_the_kv_cache_gives_the_same_tokens(device):
    for dtype in _dtypes(device):
        model = lm.TransformerLM(30, 32, 4, 64, 2, True, torch.Generator().manual_seed(3))
        model = model.to(device, dtype).eval()
        prompt = torch.randint(2, 30, (3, 5), generator=torch.Generator().manual_seed(4)).to(device)
        greedy = [lm.generate(model, prompt, 12, temperature=0, use_cache=c) for c in (True, False)]
        assert torch.equal(*greedy) and greedy[0].shape == (3, 12)
        sampled = [
            lm.generate(
                model, prompt, 12, 0.9, 10, torch.Generator(device).manual_seed(5), use_cache=c
            )
            for c in (True, False)
        ]
        assert torch.equal(*sampled)
        stop = int(greedy[0][0, 3])
        stopped = lm.generate(model, prompt, 12, temperature=0, stop=stop)
        row = stopped[0].tolist()
        assert row[row.index(stop) + 1 :] == [lm.PAD] * (len(row) - row.index(stop) - 1)


def test_only_a_decoder_only_model_decodes_with_a_cache():
    model = lm.TransformerLM(10, 8, 2, 16, 1, causal=False)
    with pytest.raises(ValueError, match="decoder-only"):
        model.step(torch.tensor([[3]]), [{}], 0)


# ---- rotary position embedding -------------------------------------------------------------------


def test_rotary_embedding_is_lesson_7s_rotation_and_scores_see_offsets_only(device):
    for dtype in _dtypes(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 9, 16, generator=g, dtype=torch.float64)
        want = torch.stack(
            [x[:, pos] @ rpt.shift_matrix(pos, 16, dtype=torch.float64) for pos in range(9)], 1
        )
        got = rpt.rotary_embedding(x.to(device, dtype))
        assert got.dtype == dtype and got.device.type == device.type
        torch.testing.assert_close(got.cpu(), want.to(dtype), **TOLERANCES[dtype])
        np.testing.assert_allclose(
            rnp.rotary_embedding(x.numpy()), want.numpy(), rtol=1e-10, atol=1e-12
        )
    q, k = (
        torch.randn(16, generator=g, dtype=torch.float64),
        torch.randn(16, generator=g, dtype=torch.float64),
    )
    qs = rpt.rotary_embedding(q.expand(12, 16))  # the same query and key at every position
    ks = rpt.rotary_embedding(k.expand(12, 16))
    scores = qs @ ks.T
    for offset in range(-11, 12):  # constant along each diagonal: the offset alone matters
        diagonal = torch.diagonal(scores, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))
    shifted = rpt.rotary_embedding(q.expand(3, 16), positions=torch.tensor([5, 6, 7]))
    torch.testing.assert_close(shifted, qs[5:8])

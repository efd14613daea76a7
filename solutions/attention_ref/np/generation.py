"""Lesson 10, How text is generated -- NumPy reference: the next token from a language model's
logits, by sampling or by search.

* ``next_token_distribution``: softmax(logits / T) over the ``top_k`` largest logits only. The
  temperature T is lesson 1's: T -> 0 approaches the argmax (greedy decoding), T = 1 is the
  model's own distribution, large T approaches uniform.
* ``sample_next``: one draw from that distribution per row.
* ``beam_search``: keep the ``beam_size`` most probable partial outputs instead of one, and rank
  the finished ones by ``log P(Y) / lp(Y)`` with the length penalty of Wu et al. (2016),
  ``lp(Y) = ((5 + |Y|) / 6) ** alpha``: the search the Transformer paper used (beam 4,
  alpha = 0.6, section 6.1).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .retrieval import as_float_array, softmax

__all__ = ["next_token_distribution", "sample_next", "length_penalty", "beam_search"]


def generation_options(temperature: float, top_k: int | None, vocab_size: int) -> None:
    """ValueError for a temperature or top_k that define no distribution (shared with PyTorch)."""
    if not temperature > 0:
        raise ValueError(
            f"temperature must be positive, got {temperature!r} (for greedy decoding take the "
            "argmax of the logits: the limit T -> 0)"
        )
    if top_k is not None and not 1 <= top_k:
        raise ValueError(f"top_k must be at least 1 (or None: every token), got {top_k!r}")
    if vocab_size < 1:
        raise ValueError("the logits hold no token (their last axis is empty)")


def next_token_distribution(logits, temperature: float = 1.0, top_k: int | None = None):
    """Probabilities of the next token, ``(..., vocab)``: ``softmax(logits / temperature)`` over
    the ``top_k`` largest logits of each row (the others get probability 0; ``None``: all).

    Ties at the k-th largest logit keep every tied token.
    """
    logits = as_float_array("logits", logits)
    _checks.require_ndim("logits", logits, 1, "(..., vocab)")
    generation_options(temperature, top_k, logits.shape[-1])
    scaled = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = np.sort(scaled, axis=-1)[..., -top_k, None]  # the k-th largest of each row
        scaled = np.where(scaled >= kth, scaled, -np.inf)
    return softmax(scaled, axis=-1)


def sample_next(logits, temperature: float = 1.0, top_k: int | None = None, rng=None):
    """One token id per row of ``logits`` ``(..., vocab)``, drawn from
    ``next_token_distribution``: ``(...)`` integers. ``rng``: a ``np.random.Generator``."""
    rng = np.random.default_rng() if rng is None else rng
    probs = next_token_distribution(logits, temperature, top_k)
    cumulative = np.cumsum(probs, axis=-1)
    draws = rng.random(probs.shape[:-1] + (1,)) * cumulative[..., -1:]
    return np.minimum((cumulative <= draws).sum(axis=-1), probs.shape[-1] - 1)


def length_penalty(length: int, alpha: float = 0.6) -> float:
    """Wu et al. (2016): ``lp(Y) = (5 + |Y|) ** alpha / (5 + 1) ** alpha``; 1 for one token or
    alpha = 0, growing slower than the length for alpha < 1."""
    return ((5 + length) / 6) ** alpha


def beam_step(ranked, beam_size: int, eos) -> tuple[list, list]:
    """One step of beam search's bookkeeping, shared by the NumPy and PyTorch versions.

    ``ranked``: the step's extensions, best first, as ``(score, hypothesis, token)`` (at least the
    best ``2 * beam_size`` of them, or all). The best ``beam_size`` are this step's beam: those
    that end with ``eos`` are finished, the others stay live; each finished one is replaced by the
    next best extension that does not end with ``eos`` (twice the beam always holds enough: at
    most one extension per live hypothesis ends with ``eos``). Returns ``(finished, live)``, lists
    of the chosen ``(score, hypothesis, token)``, best first.
    """
    finished, live = [], []
    for rank, (score, row, token) in enumerate(ranked):
        if eos is not None and token == eos:
            if rank < beam_size:  # an end below the beam's best beam_size is not kept
                finished.append((score, row, token))
        elif len(live) < beam_size:
            live.append((score, row, token))
    return finished, live


def can_stop_early(best_finished: float, live_scores, max_new: int, alpha: float) -> bool:
    """True when no live hypothesis can still beat ``best_finished``: log P only falls as tokens
    are added, and ``lp`` grows with the length (alpha >= 0), so a hypothesis now at ``log P = s``
    ends with at most ``s / length_penalty(max_new, alpha)``. Stopping then changes nothing (the
    paper "terminate[s] early when possible", section 6.1)."""
    return best_finished >= max(live_scores) / length_penalty(max_new, alpha)


def check_beam_options(beam_size: int, max_new: int, alpha: float) -> None:
    _checks.require_positive("beam_size", beam_size)
    _checks.require_positive("max_new", max_new)
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0 (0: no length penalty), got {alpha!r}")


def beam_search(log_prob_fn, prompt, beam_size: int = 4, max_new: int = 20, eos=None, alpha=0.6):
    """The most probable continuation of ``prompt`` that a beam of ``beam_size`` finds.

    ``log_prob_fn(seqs)`` takes ``(n, t)`` token ids and returns ``(n, vocab)`` log-probabilities
    of the token after each row. At every step each live hypothesis is extended by every token
    and the extensions are ranked by their log-probability (summed over the new tokens); the best
    ``beam_size`` of them are the step's beam (``beam_step``): those that end with ``eos`` finish,
    scored ``log P(Y) / length_penalty(|Y|, alpha)`` (``|Y|`` the new tokens, ``eos`` included),
    and leave the beam, which is topped up with the next best extensions that do not end with
    ``eos``: ``beam_size`` hypotheses stay live however many finish, as in fairseq and Hugging
    Face Transformers. The search runs ``max_new`` steps (stopping sooner only when no live
    hypothesis can win any more: ``can_stop_early``); then the hypotheses still live compete
    too, scored with their length. Returns ``(tokens, score)``: the new tokens of the best, and
    its score. With ``alpha = 0``, ``beam_size = 1`` is greedy decoding.
    """
    check_beam_options(beam_size, max_new, alpha)
    prompt = np.asarray(prompt)
    if prompt.ndim != 1 or not np.issubdtype(prompt.dtype, np.integer) or not len(prompt):
        raise ValueError(f"prompt must be a non-empty 1-D array of token ids, got {prompt!r}")
    start = len(prompt)
    seqs, scores = prompt[None, :], np.zeros(1)
    pool = []  # (normalized score, new tokens), finished ones in the order they finished
    for step in range(1, max_new + 1):
        log_probs = as_float_array("log_prob_fn(seqs)", log_prob_fn(seqs))
        vocab = log_probs.shape[-1]
        candidates = (scores[:, None] + log_probs).reshape(-1)
        best = np.argsort(-candidates, kind="stable")[: 2 * beam_size]
        ranked = [(float(candidates[i]), int(i) // vocab, int(i) % vocab) for i in best]
        finished, live = beam_step(ranked, beam_size, eos)
        lp = length_penalty(step, alpha)
        pool += [(s / lp, np.append(seqs[row, start:], token)) for s, row, token in finished]
        if not live:
            break
        seqs = np.stack([np.append(seqs[row], token) for _, row, token in live])
        scores = np.array([s for s, _, _ in live])
        if pool and can_stop_early(max(p[0] for p in pool), scores, max_new, alpha):
            break
    else:  # all max_new steps ran: the live hypotheses compete as they are
        lp = length_penalty(max_new, alpha)
        pool += [(float(s) / lp, seq[start:]) for s, seq in zip(scores, seqs)]
    best_score, best_tokens = max(pool, key=lambda item: item[0])  # the first of equals
    return best_tokens, best_score

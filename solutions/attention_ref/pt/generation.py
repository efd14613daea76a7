"""Lesson 10, How text is generated -- PyTorch reference (the same functions as
``attention_ref.np.generation``, whose docstring explains temperature, top-k and beam search).
Every function runs on the device of its inputs."""

from __future__ import annotations

import torch

from .. import _checks
from ..np.generation import (
    beam_step,
    can_stop_early,
    check_beam_options,
    generation_options,
    length_penalty,
)
from .retrieval import as_float_tensor

__all__ = ["next_token_distribution", "sample_next", "length_penalty", "beam_search"]


def next_token_distribution(logits, temperature: float = 1.0, top_k: int | None = None):
    """``softmax(logits / temperature)`` over the ``top_k`` largest logits of each row (the others
    get probability 0; ties at the k-th largest keep every tied token): ``(..., vocab)``."""
    logits = as_float_tensor("logits", logits)
    _checks.require_ndim("logits", logits, 1, "(..., vocab)")
    generation_options(temperature, top_k, logits.shape[-1])
    scaled = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = scaled.topk(top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, -torch.inf)
    return torch.softmax(scaled, dim=-1)


def sample_next(logits, temperature: float = 1.0, top_k: int | None = None, rng=None):
    """One token id per row of ``logits`` ``(..., vocab)`` drawn from ``next_token_distribution``
    with ``torch.multinomial``: ``(...)`` long. ``rng``: a ``torch.Generator`` on the logits'
    device, or None."""
    return draw_tokens(next_token_distribution(logits, temperature, top_k), rng)


def draw_tokens(probs, rng=None) -> torch.Tensor:
    """One token id per row of the distributions ``probs`` ``(..., vocab)``, drawn with
    ``torch.multinomial``: ``(...)`` long (lesson 10's top-k and lesson 14's top-p draw alike)."""
    flat = probs.reshape(-1, probs.shape[-1]).float()  # multinomial wants float32 or float64
    return torch.multinomial(flat, 1, generator=rng).reshape(probs.shape[:-1])


def beam_search(log_prob_fn, prompt, beam_size: int = 4, max_new: int = 20, eos=None, alpha=0.6):
    """The most probable continuation of ``prompt`` that a beam of ``beam_size`` finds, ranked by
    ``log P(Y) / length_penalty(|Y|, alpha)``: ``(new tokens, score)``. The search is the NumPy
    twin's: ``beam_size`` hypotheses stay live however many finish (see ``beam_step``).

    ``log_prob_fn(seqs)``: ``(n, t)`` long on the prompt's device -> ``(n, vocab)``
    log-probabilities of the next token.
    """
    check_beam_options(beam_size, max_new, alpha)
    if not isinstance(prompt, torch.Tensor) or prompt.ndim != 1 or prompt.is_floating_point():
        raise ValueError(f"prompt must be a 1-D tensor of token ids, got {prompt!r}")
    if not len(prompt):
        raise ValueError("prompt is empty: give the model at least one token to continue")
    start = len(prompt)
    seqs = prompt[None, :].long()
    scores = torch.zeros(1, dtype=torch.float64)  # the bookkeeping on the CPU, in float64
    pool = []  # (normalized score, new tokens), finished ones in the order they finished
    for step in range(1, max_new + 1):
        log_probs = as_float_tensor("log_prob_fn(seqs)", log_prob_fn(seqs))
        log_probs = log_probs.detach().to("cpu", torch.float64)
        vocab = log_probs.shape[-1]
        candidates = (scores[:, None] + log_probs).reshape(-1)
        top, best = candidates.topk(min(2 * beam_size, candidates.numel()))
        ranked = [(s, i // vocab, i % vocab) for s, i in zip(top.tolist(), best.tolist())]
        finished, live = beam_step(ranked, beam_size, eos)
        lp = length_penalty(step, alpha)
        for s, row, token in finished:
            pool.append((s / lp, torch.cat([seqs[row, start:], seqs.new_tensor([token])])))
        if not live:
            break
        rows = torch.tensor([row for _, row, _ in live], device=seqs.device)
        tokens = torch.tensor([token for _, _, token in live], device=seqs.device)
        seqs = torch.cat([seqs[rows], tokens[:, None]], dim=1)
        scores = torch.tensor([s for s, _, _ in live], dtype=torch.float64)
        if pool and can_stop_early(max(p[0] for p in pool), scores.tolist(), max_new, alpha):
            break
    else:  # all max_new steps ran: the live hypotheses compete as they are
        lp = length_penalty(max_new, alpha)
        pool += [(s / lp, seq[start:]) for s, seq in zip(scores.tolist(), seqs)]
    best_score, best_tokens = max(pool, key=lambda item: item[0])  # the first of equals
    return best_tokens, best_score

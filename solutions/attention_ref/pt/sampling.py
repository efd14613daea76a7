"""Lesson 14, Sampling and streaming a reply -- PyTorch reference.

Lesson 10 drew the next token from ``softmax(logits / temperature)`` over the ``top_k`` best.
Chat models are served with **top-p** (nucleus) sampling instead (Holtzman et al., 2020): keep
the smallest set of the most probable tokens whose probabilities sum to at least ``top_p``, drop
the rest, renormalise, draw. Qwen3's model card recommends temperature 0.7 and top-p 0.8 without
thinking. ``top_p_distribution`` computes the distribution (the reference tests compare the kept
tokens with ``transformers``' ``TopPLogitsWarper``); ``sample_top_p`` draws from it.

``stream_reply`` generates a reply token by token with a KV cache, from a ``forward`` like
``model_forward``, and yields each token as it is chosen, until a stop token (``<|im_end|>`` for
ChatML, the model's ``eos_token_id``) or ``max_new`` tokens: a chat interface prints each piece
of text as it comes (``decode_stream`` turns the tokens into those pieces).
"""

from __future__ import annotations

import torch

from .generation import draw_tokens, next_token_distribution
from .open_model import new_caches

__all__ = ["top_p_distribution", "sample_top_p", "stream_reply", "decode_stream"]


def top_p_distribution(logits, temperature: float = 1.0, top_p: float = 1.0) -> torch.Tensor:
    """``softmax(logits / temperature)`` over the smallest set of the most probable tokens whose
    probabilities add up to at least ``top_p`` (the most probable one always kept), renormalised:
    ``(..., vocab)``."""
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    probs = next_token_distribution(logits, temperature)
    if top_p == 1:
        return probs  # every token (a cumulative sum can round to 1 before the last)
    ordered, order = probs.sort(dim=-1, descending=True)
    before = ordered.cumsum(dim=-1) - ordered  # the mass of the tokens more probable than each
    keep_sorted = before < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def sample_top_p(logits, temperature: float = 1.0, top_p: float = 1.0, rng=None) -> torch.Tensor:
    """One token id per row of ``logits`` ``(..., vocab)`` drawn from ``top_p_distribution``."""
    return draw_tokens(top_p_distribution(logits, temperature, top_p), rng)


def stream_reply(forward, params, spec, prompt_ids, max_new: int, stop_ids=(), temperature=1.0,
                 top_p: float = 1.0, rng=None):  # fmt: skip
    """Yield the reply's token ids (ints) one at a time: the prompt ``(n,)`` in one call of
    ``forward(params, spec, tokens, caches, start)``, then one call per token; temperature 0 is
    greedy; stops before a token of ``stop_ids`` or after ``max_new`` tokens."""
    caches, prompt = new_caches(spec), torch.as_tensor(prompt_ids)[None]
    logits = forward(params, spec, prompt, caches, 0)[0, -1]
    for position in range(prompt.shape[1], prompt.shape[1] + max_new):
        if temperature == 0:
            token = int(logits.argmax())
        else:
            token = int(sample_top_p(logits.float(), temperature, top_p, rng))
        if token in stop_ids:
            return
        yield token
        next_token = torch.tensor([[token]], device=prompt.device)
        logits = forward(params, spec, next_token, caches, position)[0, -1]


def decode_stream(decode, tokens):
    """Yield the text of ``tokens`` piece by piece as they come: each time, the part of
    ``decode(tokens so far)`` not yet yielded (a piece can wait for the token that completes it)."""
    seen, text = [], ""
    for token in tokens:
        seen.append(token)
        whole = decode(seen)
        if whole.startswith(text) and not whole.endswith("\ufffd"):
            yield whole[len(text) :]
            text = whole

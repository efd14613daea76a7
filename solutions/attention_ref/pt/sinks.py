"""Lesson 14, Attention with learned sink logits -- PyTorch reference.

gpt-oss (OpenAI, 2025, model card section 2.1) gives every head a learned logit ``s`` that joins
the softmax's denominator and attends to nothing: the weight of key ``j`` is
``exp(q.k_j / sqrt(d)) / (exp(s) + sum_j' exp(q.k_j' / sqrt(d)))``, so the weights of a row sum
to less than 1, and a head with nothing worth reading can put its weight on the sink instead of
on some key. Lesson 12's attention sinks were the first tokens of the text, kept in the cache
because models learn to park weight on them (Xiao et al., 2024); a sink logit is the same idea
learned as a parameter.

Computed over blocks of keys (lesson 9's online softmax), the sink is one more logit: the running
maximum starts at ``s`` and the running sum at ``exp(s - s) = 1``, before any key. Left out of the
maximum and added at the end as ``exp(s - m)``, it overflows whenever ``s`` exceeds the largest
score by more than float32's exp can hold (about 88), and the log-sum-exp, which a kernel keeps to
merge partial results or for the backward pass, becomes infinite. Counted from the start, a query
with no key to attend to needs no special case: its weights are all 0 and its output is zeros.
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from .efficient import _finite_or_zero, _key_block, _require_boolean_mask
from .retrieval import as_float_tensor, same_dtype

__all__ = ["sink_attention"]


def _start(sinks, batch: tuple, n_q: int, work, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The running maximum and sum before any key: the sink's logit and 1, or -inf and 0."""
    shape = batch + (n_q, 1)
    if sinks is None:
        return (torch.full(shape, -torch.inf, dtype=work, device=device),
                torch.zeros(shape, dtype=work, device=device))  # fmt: skip
    sinks = as_float_tensor("sinks", sinks)
    try:
        start = torch.broadcast_to(sinks.to(work), batch + (n_q,))
    except RuntimeError:
        raise ValueError(
            f"sinks must broadcast to the scores without their key axis, {batch + (n_q,)}, "
            f"got shape {tuple(sinks.shape)}: one logit per head is (h, 1)"
        ) from None
    return start[..., None].clone(), torch.ones(shape, dtype=work, device=device)


def sink_attention(
    queries, keys, values, sinks=None, mask=None, block_size: int = 64, return_lse: bool = False
):
    """Eq. (1) with a sink logit in every softmax's denominator, over blocks of ``block_size``
    keys: queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``, values ``(..., n_k, d_v)`` (batch
    axes broadcast), ``sinks`` broadcasting to ``(..., n_q)`` (None: no sink, lesson 9's tiled
    attention), a boolean ``mask`` (True = may attend) broadcasting to ``(..., n_q, n_k)``.
    Returns ``(..., n_q, d_v)``, and with ``return_lse`` the log of each denominator
    ``(..., n_q)``, the sink included. Half precision is computed in float32."""
    queries, keys = as_float_tensor("queries", queries), as_float_tensor("keys", keys)
    values = as_float_tensor("values", values)
    same_dtype(queries=queries, keys=keys, values=values)
    _require_boolean_mask(mask)
    batch = _checks.tiled_inputs(queries, keys, values, mask, block_size)
    dtype, work = queries.dtype, torch.promote_types(queries.dtype, torch.float32)
    n_q, n_k = queries.shape[-2], keys.shape[-2]
    running_max, running_sum = _start(sinks, batch, n_q, work, queries.device)
    acc = torch.zeros(batch + (n_q, values.shape[-1]), dtype=work, device=queries.device)
    q = queries.to(work) / math.sqrt(queries.shape[-1])
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q @ keys[..., start:stop, :].to(work).transpose(-1, -2)
        if mask is not None:
            scores = scores.masked_fill(~_key_block(mask, start, stop), -torch.inf)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        shift = _finite_or_zero(new_max)
        alpha = torch.exp(running_max - shift)  # rescales what was summed under the old maximum
        weights = torch.exp(scores - shift)
        running_sum = running_sum * alpha + weights.sum(dim=-1, keepdim=True)
        acc = acc * alpha + weights @ values[..., start:stop, :].to(work)
        running_max = new_max
    out = (acc / torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)).to(dtype)
    if not return_lse:
        return out
    return out, (running_max + torch.log(running_sum))[..., 0].to(dtype)

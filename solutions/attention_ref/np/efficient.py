"""Lesson 9, Efficient attention -- NumPy reference.

Eq. (1) materializes the scores ``Q K^T``: an ``n_q x n_k`` matrix per head, memory that grows
with the square of the sequence length. The *online softmax* computes a softmax in one pass
over its inputs, keeping only a running maximum ``m`` and a running sum ``l`` of
``exp(x - m)``: when a new maximum arrives, the sum so far is rescaled by ``exp(m_old - m_new)``.
*Tiled attention* (the FlashAttention idea) applies the same bookkeeping to blocks of keys and
values, rescaling the accumulated output too, so that no more than ``n_q x block_size`` scores
exist at any time and the result equals Eq. (1).

Conventions as everywhere in the library: boolean masks, True = may attend; a query whose keys
are all masked gets a zero output (and a log-sum-exp of -inf), never NaN.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .retrieval import as_float_array


def _finite_or_zero(x: np.ndarray) -> np.ndarray:
    """``x`` with -inf (a maximum over nothing, or over masked scores only) replaced by 0, so that
    ``exp(score - shift)`` is exp(-inf) = 0 for masked scores instead of exp(-inf + inf) = NaN."""
    return np.where(np.isfinite(x), x, 0.0).astype(x.dtype, copy=False)


def online_softmax_stats(x, block_size: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Running maximum and running sum of a softmax over the last axis, in one streaming pass.

    Reads ``x`` in blocks of ``block_size`` entries (1: one entry at a time) and keeps
    ``m = max(x[:i])`` and ``l = sum(exp(x[:i] - m))``; when a block raises the maximum, the sum
    so far is rescaled by ``exp(m_old - m_new)``. Returns ``(m, l)`` of shape ``x.shape[:-1]``:
    ``softmax(x) = exp(x - m) / l``. A slice that is -inf everywhere gives ``m = -inf, l = 0``.
    """
    x = as_float_array("x", x)
    _checks.block_size(block_size)
    _checks.require_ndim("x", x, 1, "(..., n)")
    running_max = np.full(x.shape[:-1], -np.inf, dtype=x.dtype)
    running_sum = np.zeros(x.shape[:-1], dtype=x.dtype)
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start : start + block_size]
        new_max = np.maximum(running_max, block.max(axis=-1))
        shift = _finite_or_zero(new_max)
        running_sum = running_sum * np.exp(running_max - shift) + np.exp(
            block - shift[..., None]
        ).sum(axis=-1)
        running_max = new_max
    return running_max, running_sum


def online_softmax(x, block_size: int = 1) -> np.ndarray:
    """Softmax over the last axis from the statistics of :func:`online_softmax_stats`.

    Equal to ``softmax(x, axis=-1)``; an all -inf slice gives zeros, not NaN.
    """
    x = as_float_array("x", x)
    running_max, running_sum = online_softmax_stats(x, block_size)
    exps = np.exp(x - _finite_or_zero(running_max)[..., None])
    return exps / np.where(running_sum == 0, 1.0, running_sum)[..., None]


def _key_block(mask: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The columns ``start:stop`` of a mask that may broadcast along the keys (size 1 there)."""
    return mask if mask.ndim == 0 or mask.shape[-1] == 1 else mask[..., start:stop]


def tiled_attention(
    queries, keys, values, mask=None, block_size: int = 64, return_lse: bool = False
):
    """Eq. (1) computed over blocks of ``block_size`` keys and values, never the whole score matrix.

    For each block: scores ``S = Q K_b^T / sqrt(d_k)`` (``n_q x block_size``), a new running
    maximum ``m``, the factor ``alpha = exp(m_old - m_new)`` that rescales both the running sum
    ``l`` and the accumulated output ``acc``, then ``l += sum(exp(S - m))`` and
    ``acc += exp(S - m) V_b``. The output is ``acc / l``. Peak memory grows linearly in ``n_k``.

    queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``, values ``(..., n_k, d_v)``, mask
    broadcastable to ``(..., n_q, n_k)`` (True = may attend) -> output ``(..., n_q, d_v)``, and
    with ``return_lse=True`` also the log-sum-exp of each query's scores ``(..., n_q)``
    (``m + log l``; -inf for a query that may attend to nothing), which is what
    :func:`merge_attention` needs. Computed in at least float32, returned in the inputs' dtype.
    """
    queries, keys = as_float_array("queries", queries), as_float_array("keys", keys)
    values = as_float_array("values", values)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    batch = _checks.tiled_inputs(queries, keys, values, mask, block_size)
    dtype = np.result_type(queries, keys, values)
    work = np.result_type(dtype, np.float32)
    queries = queries.astype(work, copy=False)
    n_q, n_k, d_v = queries.shape[-2], keys.shape[-2], values.shape[-1]
    scale = 1.0 / np.sqrt(queries.shape[-1])

    running_max = np.full(batch + (n_q, 1), -np.inf, dtype=work)
    running_sum = np.zeros(batch + (n_q, 1), dtype=work)
    acc = np.zeros(batch + (n_q, d_v), dtype=work)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = queries @ np.swapaxes(keys[..., start:stop, :], -1, -2).astype(work, copy=False)
        scores *= scale
        if mask is not None:
            scores = np.where(_key_block(mask, start, stop), scores, -np.inf).astype(
                work, copy=False
            )
        new_max = np.maximum(running_max, scores.max(axis=-1, keepdims=True))
        shift = _finite_or_zero(new_max)
        # 0 while nothing was seen; 1 if the maximum did not move
        alpha = np.exp(running_max - shift)
        scores -= shift
        # the block's unnormalized weights, in place: no second n_q x block array
        np.exp(scores, out=scores)
        running_sum *= alpha
        running_sum += scores.sum(axis=-1, keepdims=True)
        acc *= alpha
        acc += scores @ values[..., start:stop, :].astype(work, copy=False)
        running_max = new_max
    # in place: the accumulator becomes the output
    acc /= np.where(running_sum == 0, 1.0, running_sum)
    out = acc.astype(dtype, copy=False)
    if not return_lse:
        return out
    with np.errstate(divide="ignore"):  # log(0) = -inf for a query with no key: wanted
        lse = (running_max + np.log(running_sum))[..., 0]
    return out, lse.astype(dtype, copy=False)


def merge_attention(out_a, lse_a, out_b, lse_b) -> tuple[np.ndarray, np.ndarray]:
    """Attention over keys A and B from the results over A alone and over B alone.

    ``out_a`` is attention of the queries over key set A (normalized over A), ``lse_a`` the
    log-sum-exp of those scores, likewise for B. Over A and B together the softmax's normalizer is
    ``exp(lse_a) + exp(lse_b)``, so ``lse = logaddexp(lse_a, lse_b)`` and
    ``out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b``. Returns ``(out, lse)``; queries with
    no key in either set keep a zero output and an lse of -inf. This is how the keys of one long
    sequence are split across workers (Flash-Decoding) and merged afterwards.
    """
    out_a, lse_a = as_float_array("out_a", out_a), as_float_array("lse_a", lse_a)
    out_b, lse_b = as_float_array("out_b", out_b), as_float_array("lse_b", lse_b)
    _checks.merge_inputs(out_a, lse_a, out_b, lse_b)
    lse = np.logaddexp(lse_a, lse_b)
    shift = _finite_or_zero(lse)
    weight_a, weight_b = np.exp(lse_a - shift)[..., None], np.exp(lse_b - shift)[..., None]
    return weight_a * out_a + weight_b * out_b, lse

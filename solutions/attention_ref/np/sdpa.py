"""Lesson 2, Scaled dot-product attention (Eq. 1 of the paper) -- NumPy reference.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

with the optional boolean mask of lesson 3: True = may attend. Masked scores are set to -inf
before the softmax (the paper's "masking out (setting to -inf) ... illegal connections"); a
query whose keys are all masked gets zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _batching, _checks
from .masking import masked_softmax, valid_mask
from .retrieval import as_float_array, softmax_in_place, weighted_sum


def _scale(queries, scale) -> float:
    """1 / sqrt(d_k), or the ``scale`` given instead."""
    return 1.0 / math.sqrt(queries.shape[-1]) if scale is None else float(scale)


def _scaled_keys_t(queries, keys, scale=None) -> np.ndarray:
    """K^T / sqrt(d_k) as a contiguous array. The product needs K^T as a contiguous copy anyway
    (NumPy's batched matmul is markedly slower on the transposed view); 1/sqrt(d_k) is applied to
    that (d_k, n_k) copy rather than to the (n_q, n_k) scores, one pass over the n x n matrix
    fewer, by a Python float, so float32 stays float32."""
    return np.multiply(np.swapaxes(keys, -1, -2), _scale(queries, scale), order="C")


def attention_weights(queries, keys, mask=None, *, scale=None) -> np.ndarray:
    """softmax(Q K^T / sqrt(d_k)) over the keys, masked keys excluded: ``(..., n_q, n_k)``.

    ``scale`` replaces ``1 / sqrt(d_k)`` (as in ``F.scaled_dot_product_attention``); ``scale=1``
    gives the unscaled dot products that lesson 8's ablation trains with.
    """
    queries, keys = as_float_array("queries", queries), as_float_array("keys", keys)
    _checks.scores_inputs(queries, keys)
    scores = queries @ _scaled_keys_t(queries, keys, scale)  # fresh: the softmax works in place
    return softmax_in_place(scores) if mask is None else masked_softmax(scores, mask)


def scaled_dot_product_attention(queries, keys, values, mask=None, *, scale=None) -> np.ndarray:
    """Eq. (1): softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend).

    queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``, values ``(..., n_k, d_v)``,
    mask broadcastable to ``(..., n_q, n_k)`` -> output ``(..., n_q, d_v)``. A large batch is
    computed a few heads at a time (attention_ref._batching): the same numbers, sooner.
    """
    queries = as_float_array("queries", queries)
    keys, values = as_float_array("keys", keys), as_float_array("values", values)
    _checks.keys_values_inputs(keys, values)
    batch = _batching.output_batch(queries, keys, values, mask, valid_mask)
    if not _batching.worth_splitting(batch, queries, keys):
        return weighted_sum(attention_weights(queries, keys, mask, scale=scale), values)
    mask = None if mask is None else np.asarray(mask)
    return _in_groups(queries, keys, values, mask, batch, _scale(queries, scale))


def _in_groups(queries, keys, values, mask, batch, scale: float) -> np.ndarray:
    """Eq. (1) for a group of heads at a time, each group's scores in one reused scratch array.

    Two rearrangements save passes over the scores. They are held transposed, (n_k, n_q) per head,
    so that the maximum and the sum over the keys run down the columns, which NumPy vectorizes
    across the queries, rather than along short rows. And the softmax's division is done on the
    (n_q, d_v) output rather than the weights: softmax(s) V = (exp(s - m) V) / sum(exp(s - m)).
    A query with nothing to attend to has exp(-inf) = 0 for every key and a sum of 0: divided by
    1, its output is 0.
    """
    queries_t = np.multiply(np.swapaxes(queries, -1, -2), scale)
    dtype = np.result_type(queries, keys)
    out = np.empty(batch + (queries.shape[-2], values.shape[-1]), np.result_type(dtype, values))
    scratch = None
    for index in _batching.groups(batch, queries.shape[-2] * keys.shape[-2]):
        q_t, k, v, m = (_batching.part(x, index) for x in (queries_t, keys, values, mask))
        shape = _batching.product_shape(k, q_t)  # (..., n_k, n_q)
        if scratch is None:  # the first group is the largest
            scratch = np.empty(math.prod(shape), dtype)
        scores_t = np.matmul(k, q_t, out=scratch[: math.prod(shape)].reshape(shape))
        if m is not None:  # the mask transposed too (a 1-D mask of the keys: a column)
            m_t = np.swapaxes(m, -1, -2) if m.ndim >= 2 else m.reshape(m.shape + (1,) * m.ndim)
            np.copyto(scores_t, -np.inf, where=~m_t)
        peak = np.max(scores_t, axis=-2, keepdims=True)  # over the keys: (..., 1, n_q)
        scores_t -= np.where(np.isfinite(peak), peak, 0.0)  # a query of -inf only: subtract 0
        total = np.sum(np.exp(scores_t, out=scores_t), axis=-2, keepdims=True)
        target = np.matmul(np.swapaxes(scores_t, -1, -2), v, out=out[index])
        target /= np.swapaxes(np.where(total == 0, 1.0, total), -1, -2)
    return out

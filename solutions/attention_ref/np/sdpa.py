"""Lesson 2, Scaled dot-product attention (Eq. 1 of the paper) -- NumPy reference.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

with the optional boolean mask of lesson 3: True = may attend. Masked scores are set to -inf
before the softmax (the paper's "masking out (setting to -inf) ... illegal connections"); a
query whose keys are all masked gets zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from .masking import masked_softmax
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
    mask broadcastable to ``(..., n_q, n_k)`` -> output ``(..., n_q, d_v)``. As lesson 2 writes
    it; attention_ref.np.sdpa_tuned computes the same numbers sooner for a large batch.
    """
    queries = as_float_array("queries", queries)
    keys, values = as_float_array("keys", keys), as_float_array("values", values)
    _checks.keys_values_inputs(keys, values)
    return weighted_sum(attention_weights(queries, keys, mask, scale=scale), values)

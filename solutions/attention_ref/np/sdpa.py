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
from .retrieval import as_float_array, dot_scores, softmax_in_place, weighted_sum


def attention_weights(queries, keys, mask=None, *, scale=None) -> np.ndarray:
    """softmax(Q K^T / sqrt(d_k)) over the keys, masked keys excluded: ``(..., n_q, n_k)``.

    ``scale`` replaces ``1 / sqrt(d_k)`` (as in ``F.scaled_dot_product_attention``); ``scale=1``
    gives the unscaled dot products that lesson 8's ablation trains with.
    """
    queries = as_float_array("queries", queries)
    scores = dot_scores(queries, keys)
    if scale is None:  # in place, by a Python float: float32 scores stay float32
        scores /= math.sqrt(queries.shape[-1])
    else:
        scores *= float(scale)
    return softmax_in_place(scores) if mask is None else masked_softmax(scores, mask)


def scaled_dot_product_attention(queries, keys, values, mask=None, *, scale=None) -> np.ndarray:
    """Eq. (1): softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend).

    queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``, values ``(..., n_k, d_v)``,
    mask broadcastable to ``(..., n_q, n_k)`` -> output ``(..., n_q, d_v)``.
    """
    keys, values = as_float_array("keys", keys), as_float_array("values", values)
    _checks.keys_values_inputs(keys, values)
    return weighted_sum(attention_weights(queries, keys, mask, scale=scale), values)

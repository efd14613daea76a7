"""Lesson 2, additive attention (Bahdanau et al., 2015) -- NumPy reference.

The compatibility function is "a feed-forward network with a single hidden layer":
score(q, k) = w_v . tanh(q W_q + k W_k). It costs parameters and a hidden tensor of shape
(..., n_q, n_k, d_h): the paper's "similar in theoretical complexity, but dot-product attention
is much faster and more space-efficient in practice".
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .retrieval import as_float_array, softmax, weighted_sum


def additive_scores(queries, keys, W_q, W_k, w_v) -> np.ndarray:
    """w_v . tanh(q W_q + k W_k) for every query and key: ``(..., n_q, n_k)``."""
    queries, keys = as_float_array("queries", queries), as_float_array("keys", keys)
    W_q, W_k, w_v = (as_float_array(n, a) for n, a in (("W_q", W_q), ("W_k", W_k), ("w_v", w_v)))
    _checks.additive_inputs(queries, keys, W_q, W_k, w_v)
    hidden = np.tanh((queries @ W_q)[..., :, None, :] + (keys @ W_k)[..., None, :, :])
    return hidden @ w_v


def additive_attention(queries, keys, values, W_q, W_k, w_v) -> np.ndarray:
    """softmax(additive_scores) @ values: ``(..., n_q, d_v)``."""
    keys, values = as_float_array("keys", keys), as_float_array("values", values)
    _checks.keys_values_inputs(keys, values)
    return weighted_sum(softmax(additive_scores(queries, keys, W_q, W_k, w_v), axis=-1), values)

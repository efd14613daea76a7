"""Lesson 2, additive attention (Bahdanau et al., 2015) -- PyTorch reference.

The same functions as ``attention_ref.np.additive``: score(q, k) = w_v . tanh(q W_q + k W_k).
"""

from __future__ import annotations

import torch

from .. import _checks
from .retrieval import as_float_tensor, same_dtype, softmax, weighted_sum


def additive_scores(queries, keys, W_q, W_k, w_v) -> torch.Tensor:
    """w_v . tanh(q W_q + k W_k) for every query and key: ``(..., n_q, n_k)``."""
    queries, keys = as_float_tensor("queries", queries), as_float_tensor("keys", keys)
    W_q, W_k, w_v = (as_float_tensor(n, a) for n, a in (("W_q", W_q), ("W_k", W_k), ("w_v", w_v)))
    same_dtype(queries=queries, keys=keys, W_q=W_q, W_k=W_k, w_v=w_v)
    _checks.additive_inputs(queries, keys, W_q, W_k, w_v)
    hidden = torch.tanh((queries @ W_q)[..., :, None, :] + (keys @ W_k)[..., None, :, :])
    return hidden @ w_v


def additive_attention(queries, keys, values, W_q, W_k, w_v) -> torch.Tensor:
    """softmax(additive_scores) @ values: ``(..., n_q, d_v)``."""
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    _checks.keys_values_inputs(keys, values)
    return weighted_sum(softmax(additive_scores(queries, keys, W_q, W_k, w_v), axis=-1), values)

"""Lesson 2, Scaled dot-product attention (Eq. 1 of the paper) -- PyTorch reference.

The same functions as ``attention_ref.np.sdpa``; equal to ``F.scaled_dot_product_attention``
with a boolean ``attn_mask`` (True = may attend), fully masked rows included (zeros, not NaN).
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from .masking import masked_softmax
from .retrieval import as_float_tensor, dot_scores, same_dtype, softmax, upcast, weighted_sum


def attention_weights(queries, keys, mask=None, *, scale=None) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) over the keys, masked keys excluded: ``(..., n_q, n_k)``;
    ``scale`` replaces ``1 / sqrt(d_k)``, as in ``F.scaled_dot_product_attention``."""
    queries, keys = as_float_tensor("queries", queries), as_float_tensor("keys", keys)
    same_dtype(queries=queries, keys=keys)
    dtype = queries.dtype
    queries, keys = upcast(queries, keys)
    scores = dot_scores(queries, keys)
    scores = scores / math.sqrt(queries.shape[-1]) if scale is None else scores * float(scale)
    weights = softmax(scores, axis=-1) if mask is None else masked_softmax(scores, mask)
    return weights.to(dtype)


def scaled_dot_product_attention(queries, keys, values, mask=None, *, scale=None) -> torch.Tensor:
    """Eq. (1): softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend)."""
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    queries = as_float_tensor("queries", queries)
    same_dtype(queries=queries, keys=keys, values=values)
    _checks.keys_values_inputs(keys, values)
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    return weighted_sum(attention_weights(queries, keys, mask, scale=scale), values).to(dtype)

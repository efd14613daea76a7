"""Lesson 2, Scaled dot-product attention (Eq. 1 of the paper) -- PyTorch reference.

The same functions as ``attention_ref.np.sdpa``; equal to ``F.scaled_dot_product_attention``
with a boolean ``attn_mask`` (True = may attend), fully masked rows included (zeros, not NaN).
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from .retrieval import as_float_tensor, dot_scores, softmax, upcast, weighted_sum


def as_bool_mask(mask) -> torch.Tensor:
    """The mask as a boolean tensor; anything else is a TypeError (True = may attend)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    return mask


def attention_weights(queries, keys, mask=None) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) over the keys, masked keys excluded: ``(..., n_q, n_k)``."""
    queries = as_float_tensor("queries", queries)
    dtype = queries.dtype
    queries, keys = upcast(queries, as_float_tensor("keys", keys))
    scores = dot_scores(queries, keys) / math.sqrt(queries.shape[-1])
    if mask is not None:
        mask = as_bool_mask(mask)
        _checks.mask_fits(mask, tuple(scores.shape))
        scores = scores.masked_fill(~mask, -torch.inf)
    return softmax(scores, axis=-1).to(dtype)


def scaled_dot_product_attention(queries, keys, values, mask=None) -> torch.Tensor:
    """Eq. (1): softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend)."""
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    _checks.keys_values_inputs(keys, values)
    dtype = values.dtype
    queries, keys, values = upcast(as_float_tensor("queries", queries), keys, values)
    return weighted_sum(attention_weights(queries, keys, mask), values).to(dtype)

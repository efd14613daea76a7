"""Lesson 12, Grouped-query attention (and multi-query attention) -- PyTorch reference.

The same functions as ``attention_ref.np.gqa`` (whose docstring explains them), on the device of
their inputs. ``grouped_query_attention`` equals ``F.scaled_dot_product_attention(q, k, v,
attn_mask=mask, enable_gqa=True)`` and the repeated-heads form, without making the copies.
"""

from __future__ import annotations

import torch

from .. import _checks
from .masking import valid_mask
from .retrieval import as_float_tensor
from .sdpa import scaled_dot_product_attention

__all__ = [
    "repeat_kv_heads",
    "grouped_query_attention",
    "kv_cache_bytes_per_token",
    "mean_pool_kv_heads",
]


def repeat_kv_heads(x, num_heads: int) -> torch.Tensor:
    """``x`` ``(..., g, n, d)`` -> ``(..., h, n, d)``, head ``i`` a copy of head ``i // (h / g)``
    (``repeat_interleave``)."""
    x = as_float_tensor("x", x)
    _checks.require_ndim("x", x, 3, "(..., g, n, d)")
    return x.repeat_interleave(_checks.heads_per_group(num_heads, x.shape[-3]), dim=-3)


def grouped_query_attention(queries, keys, values, mask=None) -> torch.Tensor:
    """Eq. (1) for ``h`` query heads sharing ``g`` key/value heads (query head ``i`` reads
    key/value head ``i // (h / g)``): ``(..., h, n_q, d_v)``; see the NumPy twin."""
    queries = as_float_tensor("queries", queries)
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    group, batch = _checks.grouped_inputs(queries, keys, values)
    h, n_q = queries.shape[-3], queries.shape[-2]
    q = queries.unflatten(-3, (h // group, group))
    k, v = keys.unsqueeze(-3), values.unsqueeze(-3)  # (..., g, 1, n_k, d): a view, not a copy
    if mask is not None:
        mask = valid_mask(mask, batch + (h, n_q, keys.shape[-2]))
        mask = mask.reshape(_checks.grouped_mask_shape(tuple(mask.shape), h, group))
    return scaled_dot_product_attention(q, k, v, mask).flatten(-4, -3)


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_value: int = 2
) -> int:
    """``2 * num_layers * num_kv_heads * head_dim * bytes_per_value``: see the NumPy twin."""
    from ..np.gqa import kv_cache_bytes_per_token as count

    return count(num_layers, num_kv_heads, head_dim, bytes_per_value)


def mean_pool_kv_heads(weight, bias, num_heads: int, num_kv_heads: int):
    """Each group of ``h / g`` consecutive heads of a key or value projection averaged into one:
    ``weight (d_model, h * d_k) -> (d_model, g * d_k)``, ``bias (h * d_k,) -> (g * d_k,)`` (or
    None); see the NumPy twin."""
    weight = as_float_tensor("weight", weight)
    group = _checks.heads_per_group(num_heads, num_kv_heads)
    d_k = _checks.projection_heads("weight", weight, num_heads)
    pooled = weight.unflatten(1, (num_kv_heads, group, d_k)).mean(dim=2).flatten(1)
    if bias is None:
        return pooled, None
    bias = as_float_tensor("bias", bias)
    if tuple(bias.shape) != (weight.shape[1],):
        raise ValueError(f"bias must have shape ({weight.shape[1]},), got {tuple(bias.shape)}")
    return pooled, bias.unflatten(0, (num_kv_heads, group, d_k)).mean(dim=1).flatten()

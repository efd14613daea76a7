"""Lesson 12, Grouped-query attention (and multi-query attention) -- NumPy reference.

Multi-head attention gives each of its ``h`` query heads its own key head and value head, so a KV
cache holds ``2 * h * d_k`` numbers per position and layer. Multi-query attention (MQA; Shazeer,
2019) keeps the ``h`` query heads but one key head and one value head that all of them share;
grouped-query attention (GQA; Ainslie et al., 2023) sits in between: ``g`` key/value heads, each
shared by a group of ``h / g`` consecutive query heads. Query head ``i`` reads key/value head
``i // (h / g)``, the order of ``repeat_interleave`` (and of ``F.scaled_dot_product_attention(...,
enable_gqa=True)``): with h = 4 and g = 2, query heads 0 and 1 share key head 0, not heads 0 and 2.

``grouped_query_attention`` computes this without copying the shared keys and values ``h / g``
times: the query heads are viewed as ``(g, h / g)`` and the keys broadcast over the second axis.
``repeat_kv_heads`` makes the copies (what the cache saves), for comparison.

Ainslie et al. (2023, section 2.1) turn a multi-head checkpoint into a grouped one by mean-pooling
the key and value projections of each group's heads (``mean_pool_kv_heads``), then training a
little more ("uptraining").
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .masking import valid_mask
from .retrieval import as_float_array
from .sdpa import scaled_dot_product_attention

__all__ = [
    "repeat_kv_heads",
    "grouped_query_attention",
    "kv_cache_bytes_per_token",
    "mean_pool_kv_heads",
]


def repeat_kv_heads(x, num_heads: int) -> np.ndarray:
    """``x`` ``(..., g, n, d)`` with each key/value head repeated for the ``h / g`` query heads of
    its group: ``(..., h, n, d)``, head ``i`` a copy of head ``i // (h / g)``. The memory
    grouped-query attention saves, spent."""
    x = as_float_array("x", x)
    _checks.require_ndim("x", x, 3, "(..., g, n, d)")
    return np.repeat(x, _checks.heads_per_group(num_heads, x.shape[-3]), axis=-3)


def grouped_query_attention(queries, keys, values, mask=None) -> np.ndarray:
    """Eq. (1) for ``h`` query heads sharing ``g`` key/value heads: query head ``i`` attends over
    key/value head ``i // (h / g)``.

    queries ``(..., h, n_q, d_k)``, keys ``(..., g, n_k, d_k)``, values ``(..., g, n_k, d_v)``
    (batch axes broadcast), mask boolean (True = may attend) broadcastable to ``(..., h, n_q,
    n_k)`` -> ``(..., h, n_q, d_v)``. The keys and values are never copied per query head; a query
    with nothing to attend to gets zeros. ``g = h`` is multi-head attention, ``g = 1`` MQA.
    """
    queries = as_float_array("queries", queries)
    keys, values = as_float_array("keys", keys), as_float_array("values", values)
    group, batch = _checks.grouped_inputs(queries, keys, values)
    h, n_q = queries.shape[-3], queries.shape[-2]
    q = queries.reshape(queries.shape[:-3] + (h // group, group) + queries.shape[-2:])
    k, v = keys[..., None, :, :], values[..., None, :, :]  # (..., g, 1, n_k, d): shared, not copied
    if mask is not None:
        mask = valid_mask(mask, batch + (h, n_q, keys.shape[-2]))
        mask = mask.reshape(_checks.grouped_mask_shape(mask.shape, h, group))
    out = scaled_dot_product_attention(q, k, v, mask)
    return out.reshape(out.shape[:-4] + (h,) + out.shape[-2:])


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_value: int = 2
) -> int:
    """What a KV cache holds for one more token: a key and a value of ``head_dim`` numbers for each
    of ``num_kv_heads`` heads in each of ``num_layers`` layers, ``bytes_per_value`` bytes each
    (2: float16 or bfloat16). ``2 * num_layers * num_kv_heads * head_dim * bytes_per_value``."""
    sizes = (
        _checks.positive_int(name, value)
        for name, value in (
            ("num_layers", num_layers),
            ("num_kv_heads", num_kv_heads),
            ("head_dim", head_dim),
            ("bytes_per_value", bytes_per_value),
        )
    )
    layers, heads, width, size = sizes
    return 2 * layers * heads * width * size


def mean_pool_kv_heads(weight, bias, num_heads: int, num_kv_heads: int):
    """A key (or value) projection of ``num_heads`` heads turned into one of ``num_kv_heads``, as
    Ainslie et al. (2023, section 2.1) build a GQA checkpoint from a multi-head one: each new head
    is the mean of the ``h / g`` consecutive heads of its group.

    weight ``(d_model, h * d_k)`` (the course's ``x @ W`` layout), bias ``(h * d_k,)`` or None ->
    ``(weight (d_model, g * d_k), bias (g * d_k,) or None)``.
    """
    weight = as_float_array("weight", weight)
    group = _checks.heads_per_group(num_heads, num_kv_heads)
    d_k = _checks.projection_heads("weight", weight, num_heads)
    pooled = weight.reshape(weight.shape[0], num_kv_heads, group, d_k).mean(axis=2)
    pooled = pooled.reshape(weight.shape[0], num_kv_heads * d_k)
    if bias is None:
        return pooled, None
    bias = as_float_array("bias", bias)
    if bias.shape != (weight.shape[1],):
        raise ValueError(f"bias must have shape ({weight.shape[1]},), got {bias.shape}")
    return pooled, bias.reshape(num_kv_heads, group, d_k).mean(axis=1).reshape(-1)

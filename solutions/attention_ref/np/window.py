"""Lesson 12, Sliding-window attention, the rolling KV cache and attention sinks -- NumPy
reference.

In **sliding-window attention** (Longformer, Beltagy et al., 2020, section 3.1; Mistral 7B, Jiang
et al., 2023, section 2) a query at position ``i`` attends only to the last ``window`` positions,
itself included: key ``j`` with ``i - window < j <= i``, a band below the diagonal. One layer sees
``window`` positions back; a stack of layers sees further, since each position's output already
mixes its own window: after ``L`` layers position ``i`` depends on inputs ``i - L (window - 1)`` to
``i`` (``window_reach``).

A decoder with such a window never needs keys older than ``window`` positions, so its KV cache can
be a **ring buffer** of ``window`` slots (Mistral's "rolling buffer cache"): the key and value of
position ``t`` go to slot ``t mod window``, overwriting position ``t - window``, and the query of
position ``t`` attends over every filled slot. The order of the slots does not matter: attention is
a weighted *sum* over the keys, and each key carries its position in its vector already.

**Attention sinks** (StreamingLLM, Xiao et al., 2024, section 3): large language models put much of
their attention on the first few tokens whatever they are, and a window that evicts them breaks the
model. Keeping ``num_sinks`` first positions besides the window restores it:
``sliding_window_mask(n, window, num_sinks)`` and ``sink_cache_attention``.

Conventions as everywhere in the library: boolean masks, True = may attend.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .gqa import grouped_query_attention
from .retrieval import as_float_array

__all__ = [
    "sliding_window_mask",
    "window_reach",
    "empty_rolling_cache",
    "rolling_cache_attention",
    "sink_cache_attention",
]


def sliding_window_mask(n: int, window: int, num_sinks: int = 0) -> np.ndarray:
    """``(n, n)``, True where query ``i`` may read key ``j``: ``j <= i`` and either
    ``i - window < j`` (the last ``window`` positions, the query's own included) or
    ``j < num_sinks`` (the first positions, kept as attention sinks)."""
    _checks.window_sizes(n, window, num_sinks)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (j <= i) & ((j > i - window) | (j < num_sinks))


def window_reach(n: int, window: int, num_layers: int) -> np.ndarray:
    """``(n, n)`` boolean: True where output ``i`` of ``num_layers`` stacked sliding-window
    self-attention layers can depend on input ``j``. One layer's reach is its mask; each further
    layer composes it once more (a path ``j -> m -> i`` through the layer in between): the boolean
    matrix power ``mask^L``. Position ``i`` reaches back to ``i - L (window - 1)``."""
    _checks.window_sizes(n, window)
    if (
        type(num_layers).__name__ == "bool"
        or not hasattr(num_layers, "__index__")
        or num_layers < 0
    ):
        raise ValueError(f"num_layers must be a non-negative integer, got {num_layers!r}")
    band = sliding_window_mask(n, window).astype(np.int64)
    reach = np.eye(n, dtype=np.int64)
    for _ in range(num_layers):
        reach = np.minimum(band @ reach, 1)  # 0/1 again: counts of paths would overflow
    return reach.astype(bool)


def empty_rolling_cache(
    batch, num_heads: int, window: int, d_k: int, d_v: int | None = None, *, dtype=np.float64
) -> dict:
    """A ring buffer for ``window`` positions: ``{"k": (*batch, g, window, d_k), "v": (*batch,
    g, window, d_v)}`` of zeros (``batch`` an int or a tuple, ``num_heads`` the key/value heads
    g)."""
    batch = (batch,) if isinstance(batch, (int, np.integer)) else tuple(batch)
    _checks.positive_int("window", window)
    d_v = d_k if d_v is None else d_v
    return {
        "k": np.zeros(batch + (num_heads, window, d_k), dtype),
        "v": np.zeros(batch + (num_heads, window, d_v), dtype),
    }


def rolling_cache_attention(q, k_new, v_new, cache: dict, position: int) -> np.ndarray:
    """One decoding step with a ring-buffer KV cache of ``window = cache["k"].shape[-2]`` slots.

    q ``(..., h, 1, d_k)`` is the query of position ``position`` (0, 1, 2, ...), ``k_new``
    ``(..., g, 1, d_k)`` and ``v_new`` ``(..., g, 1, d_v)`` its key and value (``g`` dividing
    ``h``). They are written *in place* into slot ``position % window`` of ``cache["k"]`` and
    ``cache["v"]`` (made by ``empty_rolling_cache``); then the query attends over the filled slots,
    which hold positions ``max(0, position - window + 1) .. position``. Returns ``(..., h, 1,
    d_v)``: what sliding-window attention with ``sliding_window_mask(n, window)`` gives at that
    position, the cache never growing.
    """
    q, k_new, v_new = (
        as_float_array(n, x) for n, x in (("q", q), ("k_new", k_new), ("v_new", v_new))
    )
    _checks.cache_step_inputs(q, k_new, v_new, cache["k"], cache["v"])
    position, window = _checks.position(position), cache["k"].shape[-2]
    slot = position % window
    cache["k"][..., slot : slot + 1, :] = k_new
    cache["v"][..., slot : slot + 1, :] = v_new
    filled = np.arange(window) <= position  # before the buffer wraps, the later slots are empty
    return grouped_query_attention(q, cache["k"], cache["v"], filled)


def sink_cache_attention(q, k_new, v_new, cache: dict, num_sinks: int, window: int) -> np.ndarray:
    """One decoding step with StreamingLLM's cache: the first ``num_sinks`` positions and the last
    ``window`` (the new one included).

    ``cache`` is a dict, empty at the first step, in which this function keeps ``cache["k"]``
    ``(..., g, t, d_k)`` and ``cache["v"]``: the new key and value are appended, then, once it holds
    more than ``num_sinks + window`` positions, the oldest position after the sinks is evicted. The
    query ``(..., h, 1, d_k)`` attends over what is kept: ``(..., h, 1, d_v)``, the row of
    ``sliding_window_mask(n, window, num_sinks)`` for this position.
    """
    q, k_new, v_new = (
        as_float_array(n, x) for n, x in (("q", q), ("k_new", k_new), ("v_new", v_new))
    )
    _checks.window_sizes(0, window, num_sinks)
    _checks.cache_step_inputs(q, k_new, v_new, cache.get("k"), cache.get("v"))
    for name, new in (("k", k_new), ("v", v_new)):
        kept = new if name not in cache else np.concatenate([cache[name], new], axis=-2)
        if kept.shape[-2] > num_sinks + window:
            kept = np.concatenate([kept[..., :num_sinks, :], kept[..., -window:, :]], axis=-2)
        cache[name] = kept
    return grouped_query_attention(q, cache["k"], cache["v"])

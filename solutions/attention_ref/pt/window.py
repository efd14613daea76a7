"""Lesson 12, Sliding-window attention, the rolling KV cache and attention sinks -- PyTorch
reference (the same functions as ``attention_ref.np.window``, whose docstring explains them).

``sliding_window_mask`` is what ``torch.nn.attention.flex_attention`` computes from the mask
function ``lambda b, h, q, k: (k <= q) & ((q - k < window) | (k < num_sinks))``; the reference
tests check the two agree, and that ``rolling_cache_attention`` and ``sink_cache_attention``,
step by step, equal ``F.scaled_dot_product_attention`` with that mask.
"""

from __future__ import annotations

import torch

from .. import _checks
from .gqa import grouped_query_attention
from .retrieval import as_float_tensor

__all__ = [
    "sliding_window_mask",
    "window_reach",
    "empty_rolling_cache",
    "rolling_cache_attention",
    "sink_cache_attention",
]


def sliding_window_mask(n: int, window: int, num_sinks: int = 0, *, device=None) -> torch.Tensor:
    """``(n, n)`` on ``device``: True where ``j <= i`` and (``i - window < j`` or
    ``j < num_sinks``)."""
    _checks.window_sizes(n, window, num_sinks)
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    return (j <= i) & ((j > i - window) | (j < num_sinks))


def window_reach(n: int, window: int, num_layers: int, *, device=None) -> torch.Tensor:
    """``(n, n)`` boolean: which inputs output ``i`` of ``num_layers`` sliding-window layers can
    depend on, the boolean matrix power ``mask^L``."""
    from ..np.window import window_reach as reach

    return torch.from_numpy(reach(n, window, num_layers)).to(device)


def empty_rolling_cache(
    batch, num_heads: int, window: int, d_k: int, d_v: int | None = None, *,
    dtype=torch.float32, device=None,
) -> dict:  # fmt: skip
    """A ring buffer of ``window`` slots: ``{"k": (*batch, g, window, d_k), "v": (*batch, g,
    window, d_v)}`` of zeros on ``device``."""
    batch = (batch,) if isinstance(batch, int) else tuple(batch)
    _checks.positive_int("window", window)
    d_v = d_k if d_v is None else d_v
    options = {"dtype": dtype, "device": device}
    return {
        "k": torch.zeros(batch + (num_heads, window, d_k), **options),
        "v": torch.zeros(batch + (num_heads, window, d_v), **options),
    }


def rolling_cache_attention(q, k_new, v_new, cache: dict, position: int) -> torch.Tensor:
    """One decoding step with a ring-buffer KV cache: the new key and value written in place into
    slot ``position % window``, then the query attends over the filled slots; ``(..., h, 1, d_v)``.
    See the NumPy twin."""
    q, k_new, v_new = (
        as_float_tensor(n, x) for n, x in (("q", q), ("k_new", k_new), ("v_new", v_new))
    )
    _checks.cache_step_inputs(q, k_new, v_new, cache["k"], cache["v"])
    position, window = _checks.position(position), cache["k"].shape[-2]
    slot = position % window
    cache["k"][..., slot : slot + 1, :] = k_new
    cache["v"][..., slot : slot + 1, :] = v_new
    filled = torch.arange(window, device=q.device) <= position
    return grouped_query_attention(q, cache["k"], cache["v"], filled)


def sink_cache_attention(q, k_new, v_new, cache: dict, num_sinks: int, window: int) -> torch.Tensor:
    """One decoding step with StreamingLLM's cache, the first ``num_sinks`` positions and the last
    ``window``: ``(..., h, 1, d_v)``. See the NumPy twin."""
    q, k_new, v_new = (
        as_float_tensor(n, x) for n, x in (("q", q), ("k_new", k_new), ("v_new", v_new))
    )
    _checks.window_sizes(0, window, num_sinks)
    _checks.cache_step_inputs(q, k_new, v_new, cache.get("k"), cache.get("v"))
    for name, new in (("k", k_new), ("v", v_new)):
        kept = new if name not in cache else torch.cat([cache[name], new], dim=-2)
        if kept.shape[-2] > num_sinks + window:
            kept = torch.cat([kept[..., :num_sinks, :], kept[..., -window:, :]], dim=-2)
        cache[name] = kept
    return grouped_query_attention(q, cache["k"], cache["v"])

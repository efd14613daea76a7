"""Lesson 13, Gated attention (Qiu et al., 2025) -- NumPy reference.

Multi-head attention (lesson 4) with one more projection: a sigmoid gate computed from the layer's
input, multiplied into each head's output *before* the heads are concatenated and projected by
``W^O``,

    head_i' = head_i * sigmoid(x W^G_i),      out = Concat(head_1', ..., head_h') W^O .

``w_g`` of shape ``(d_model, h)`` gives one gate per head and position (their "head-wise" gate);
``(d_model, h d_v)`` one per head, position and channel ("element-wise", what Qwen3-Next uses,
its gate coming out of the query projection). A gate near 0 lets a head output nothing at a
position, which the softmax alone cannot: its weights sum to 1, so a head with nothing to read
must still average some values, and trained models park that weight on the first tokens (the
attention sink, lesson 12). With the gate the head need not: Qiu et al. measured the first
token's share of attention fall from about half to a few per cent.

Placed after ``W^O`` the gate would scale the sum over heads, not each head: a different, weaker
layer (one gate cannot close one head and leave another open).
"""

from __future__ import annotations

import numpy as np

from .. import _checks_linear
from .multihead import merge_heads, split_heads
from .retrieval import as_float_array
from .sdpa import scaled_dot_product_attention

__all__ = ["sigmoid", "gated_attention"]


def sigmoid(x) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow for large ``|x|``."""
    x = as_float_array("x", x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def gated_attention(x, params, num_heads: int, mask=None, return_weights: bool = False):
    """Gated multi-head self-attention of ``x`` ``(..., n, d_model)`` -> ``(..., n, d_model)``;
    ``params``: w_q, w_k ``(d_model, h d_k)``, w_v ``(d_model, h d_v)``, w_g ``(d_model, h)`` or
    ``(d_model, h d_v)``, w_o ``(h d_v, d_model)``; ``mask`` ``(..., n, n)`` (True = may attend)
    for every head. ``return_weights``: also the attention weights ``(..., h, n, n)``."""
    x = as_float_array("x", x)
    params = {name: as_float_array(name, p) for name, p in params.items()}
    _checks_linear.gated_params(x, params, num_heads)
    q, k, v = (split_heads(x @ params[f"w_{name}"], num_heads) for name in "qkv")
    if mask is not None and np.ndim(mask) >= 2:
        mask = np.asarray(mask)[..., None, :, :]  # the same mask for every head
    heads = scaled_dot_product_attention(q, k, v, mask)  # (..., h, n, d_v)
    gate = sigmoid(x @ params["w_g"])  # (..., n, h) or (..., n, h d_v)
    if gate.shape[-1] == num_heads:
        gate = np.swapaxes(gate, -1, -2)[..., None]  # (..., h, n, 1): one number per head
    else:
        gate = split_heads(gate, num_heads)  # (..., h, n, d_v)
    out = merge_heads(heads * gate) @ params["w_o"]  # gated before W^O
    if not return_weights:
        return out
    from .sdpa import attention_weights

    return out, attention_weights(q, k, mask)

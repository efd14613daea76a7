"""Lesson 4, Multi-head attention -- NumPy reference.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Row-vector convention (the paper's x W): the h per-head projections W_i^Q (d_model, d_k) sit side
by side in one matrix ``w_q = [W_1^Q | ... | W_h^Q]`` of shape (d_model, h * d_k), so one matmul
projects for every head; a reshape then splits the heads apart, with no loop over heads.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .retrieval import as_float_array, weighted_sum
from .sdpa import attention_weights


def split_heads(x, num_heads: int) -> np.ndarray:
    """``(..., n, h * d)`` -> ``(..., h, n, d)``: columns ``i*d .. (i+1)*d`` become head i."""
    x = as_float_array("x", x)
    _checks.heads_input(x, num_heads)
    *batch, n, width = x.shape
    return np.swapaxes(x.reshape(*batch, n, num_heads, width // num_heads), -2, -3)


def merge_heads(x) -> np.ndarray:
    """``(..., h, n, d)`` -> ``(..., n, h * d)``: Concat(head_1, ..., head_h), the inverse of
    split_heads."""
    x = as_float_array("x", x)
    _checks.require_ndim("x", x, 3, "(..., h, n, d)")
    *batch, h, n, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*batch, n, h * d)


def init_params(
    d_model: int,
    num_heads: int,
    rng=None,
    d_k: int | None = None,
    d_v: int | None = None,
    bias: bool = True,
) -> dict:
    """Random parameters: ``w_q``, ``w_k`` (d_model, h d_k), ``w_v`` (d_model, h d_v), ``w_o`` (h
    d_v, d_model).

    d_k = d_v = d_model / h by default, as in the paper. Xavier-uniform weights and zero biases,
    like ``nn.MultiheadAttention``'s initialization.
    """
    rng = np.random.default_rng() if rng is None else rng
    if d_k is None or d_v is None:
        if d_model % num_heads:
            raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
    d_k = d_model // num_heads if d_k is None else d_k
    d_v = d_model // num_heads if d_v is None else d_v

    def xavier(fan_in, fan_out):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, size=(fan_in, fan_out))

    params = {
        "w_q": xavier(d_model, num_heads * d_k),
        "w_k": xavier(d_model, num_heads * d_k),
        "w_v": xavier(d_model, num_heads * d_v),
        "w_o": xavier(num_heads * d_v, d_model),
    }
    if bias:
        params |= {
            "b_q": np.zeros(num_heads * d_k),
            "b_k": np.zeros(num_heads * d_k),
            "b_v": np.zeros(num_heads * d_v),
            "b_o": np.zeros(d_model),
        }
    return params


def _project(x, params: dict, name: str):
    out = x @ params[f"w_{name}"]
    bias = params.get(f"b_{name}")
    return out if bias is None else out + bias


def multi_head_attention(
    query,
    key,
    value,
    params: dict,
    num_heads: int,
    mask=None,
    return_weights: bool = False,
    *,
    scale=None,
):
    """Multi-head attention: ``(..., n_q, d_model)`` -> ``(..., n_q, d_model)``.

    ``mask`` (True = may attend) broadcasts to ``(..., n_q, n_k)`` and is shared by every head
    (a head axis is inserted before its last two axes). With ``return_weights=True`` the result
    is ``(output, weights)``, weights ``(..., h, n_q, n_k)``: one attention matrix per head.
    """
    query, key, value = (
        as_float_array(n, x) for n, x in (("query", query), ("key", key), ("value", value))
    )
    params = {name: as_float_array(name, p) for name, p in params.items() if p is not None}
    _checks.multi_head_inputs(query, key, value, params, num_heads)
    q = split_heads(_project(query, params, "q"), num_heads)  # (..., h, n_q, d_k)
    k = split_heads(_project(key, params, "k"), num_heads)  # (..., h, n_k, d_k)
    v = split_heads(_project(value, params, "v"), num_heads)  # (..., h, n_k, d_v)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.ndim >= 2:
            mask = mask[..., None, :, :]  # the same mask for every head
    weights = attention_weights(q, k, mask, scale=scale)
    output = _project(merge_heads(weighted_sum(weights, v)), params, "o")
    return (output, weights) if return_weights else output


def parameter_count(
    d_model: int, num_heads: int, d_k: int | None = None, d_v: int | None = None, bias: bool = True
) -> int:
    """Parameters of one multi-head attention: W^Q, W^K, W^V, W^O and their biases."""
    d_k = d_model // num_heads if d_k is None else d_k
    d_v = d_model // num_heads if d_v is None else d_v
    weights = d_model * num_heads * (2 * d_k + d_v) + num_heads * d_v * d_model
    return weights + (num_heads * (2 * d_k + d_v) + d_model if bias else 0)


def multiply_adds(n_q: int, n_k: int, d_model: int, num_heads: int) -> int:
    """Multiply-adds of multi-head attention with d_k = d_v = d_model / h (biases and softmax
    aside).

    Projections n_q d_model^2 + 2 n_k d_model^2, scores and weighted sum h * 2 n_q n_k d_k, and W^O
    n_q d_model^2. h cancels out: h heads of width d_model / h cost what one full-width head costs.
    """
    d_k = d_model // num_heads
    return (n_q + 2 * n_k) * d_model**2 + num_heads * 2 * n_q * n_k * d_k + n_q * d_model**2

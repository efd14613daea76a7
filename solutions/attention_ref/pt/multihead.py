"""Lesson 4, Multi-head attention -- PyTorch reference (the same functions as
``attention_ref.np.multihead``).

``params_from_torch`` copies the weights of an ``nn.MultiheadAttention`` into this module's
row-vector layout, so that the reference can be checked against PyTorch's own implementation:
PyTorch stores ``in_proj_weight`` as (3 d_model, d_model) and computes ``x @ W.T + b``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import _checks
from ..np.multihead import multiply_adds, parameter_count  # plain arithmetic: one copy serves both
from .retrieval import as_float_tensor, same_dtype, weighted_sum
from .sdpa import attention_weights

__all__ = [
    "split_heads",
    "merge_heads",
    "init_params",
    "params_from_torch",
    "multi_head_attention",
    "parameter_count",
    "multiply_adds",
]


def split_heads(x, num_heads: int) -> torch.Tensor:
    """``(..., n, h * d)`` -> ``(..., h, n, d)``: columns ``i*d .. (i+1)*d`` become head i."""
    x = as_float_tensor("x", x)
    _checks.heads_input(x, num_heads)
    *batch, n, width = x.shape
    return x.reshape(*batch, n, num_heads, width // num_heads).transpose(-2, -3)


def merge_heads(x) -> torch.Tensor:
    """``(..., h, n, d)`` -> ``(..., n, h * d)``: Concat(head_1, ..., head_h), the inverse of
    split_heads."""
    x = as_float_tensor("x", x)
    _checks.require_ndim("x", x, 3, "(..., h, n, d)")
    *batch, h, n, d = x.shape
    return x.transpose(-2, -3).reshape(*batch, n, h * d)


def init_params(
    d_model: int,
    num_heads: int,
    rng: torch.Generator | None = None,
    d_k: int | None = None,
    d_v: int | None = None,
    bias: bool = True,
    *,
    device=None,
    dtype=torch.float32,
) -> dict:
    """Random parameters in the layout of ``attention_ref.np.init_params`` (Xavier-uniform, zero
    biases).

    ``rng`` is a ``torch.Generator`` (on the CPU: the draws do not depend on the device).
    """
    if (d_k is None or d_v is None) and d_model % num_heads:
        raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
    d_k = d_model // num_heads if d_k is None else d_k
    d_v = d_model // num_heads if d_v is None else d_v

    def xavier(fan_in, fan_out):
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        w = torch.rand(fan_in, fan_out, generator=rng, dtype=dtype) * (2 * bound) - bound
        return w.to(device)

    params = {
        "w_q": xavier(d_model, num_heads * d_k),
        "w_k": xavier(d_model, num_heads * d_k),
        "w_v": xavier(d_model, num_heads * d_v),
        "w_o": xavier(num_heads * d_v, d_model),
    }
    if bias:
        zeros = lambda n: torch.zeros(n, dtype=dtype, device=device)  # noqa: E731
        params |= {
            "b_q": zeros(num_heads * d_k),
            "b_k": zeros(num_heads * d_k),
            "b_v": zeros(num_heads * d_v),
            "b_o": zeros(d_model),
        }
    return params


def params_from_torch(mha: nn.MultiheadAttention) -> dict:
    """The weights of ``mha`` as ``{w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o}`` (x @ w layout),
    detached."""
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"expected an nn.MultiheadAttention, got {type(mha).__name__}")
    if mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError(
            "add_bias_kv and add_zero_attn append extra keys: this reference does not model them"
        )
    if mha._qkv_same_embed_dim:
        w_q, w_k, w_v = mha.in_proj_weight.detach().chunk(3, dim=0)
    else:
        w_q, w_k, w_v = (
            p.detach() for p in (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)
        )
    params = {"w_q": w_q.T, "w_k": w_k.T, "w_v": w_v.T, "w_o": mha.out_proj.weight.detach().T}
    if mha.in_proj_bias is not None:
        b_q, b_k, b_v = mha.in_proj_bias.detach().chunk(3)
        params |= {"b_q": b_q, "b_k": b_k, "b_v": b_v}
    if mha.out_proj.bias is not None:
        params["b_o"] = mha.out_proj.bias.detach()
    return params


def _project(x, params: dict, name: str) -> torch.Tensor:
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
    """Multi-head attention: ``(..., n_q, d_model)`` -> ``(..., n_q, d_model)``; see the NumPy
    twin."""
    query, key, value = (
        as_float_tensor(n, x) for n, x in (("query", query), ("key", key), ("value", value))
    )
    params = {name: as_float_tensor(name, p) for name, p in params.items() if p is not None}
    same_dtype(query=query, key=key, value=value, **params)
    _checks.multi_head_inputs(query, key, value, params, num_heads)
    q = split_heads(_project(query, params, "q"), num_heads)
    k = split_heads(_project(key, params, "k"), num_heads)
    v = split_heads(_project(value, params, "v"), num_heads)
    if mask is not None and mask.ndim >= 2:
        mask = mask.unsqueeze(-3)  # the same mask for every head
    weights = attention_weights(q, k, mask, scale=scale)
    output = _project(merge_heads(weighted_sum(weights, v)), params, "o")
    return (output, weights) if return_weights else output

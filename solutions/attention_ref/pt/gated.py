"""Lesson 13, Gated attention (Qiu et al., 2025) -- PyTorch reference: the same function as
``attention_ref.np.gated``, whose docstring explains it, device-agnostic. With q and k left
unnormalised and no rotary embedding, it is Hugging Face's ``Qwen3NextAttention`` (its
element-wise gate), which the reference tests check."""

from __future__ import annotations

import torch

from .. import _checks_linear
from .multihead import merge_heads, split_heads
from .retrieval import as_float_tensor, same_dtype
from .sdpa import attention_weights, scaled_dot_product_attention

__all__ = ["sigmoid", "gated_attention"]


def sigmoid(x) -> torch.Tensor:
    return torch.sigmoid(as_float_tensor("x", x))


def gated_attention(x, params, num_heads: int, mask=None, return_weights: bool = False):
    """Gated multi-head self-attention: ``(..., n, d_model)`` -> ``(..., n, d_model)``, the gate
    applied to each head before ``W^O``. See the NumPy twin."""
    x = as_float_tensor("x", x)
    params = {name: as_float_tensor(name, p) for name, p in params.items()}
    same_dtype(x=x, **params)
    _checks_linear.gated_params(x, params, num_heads)
    q, k, v = (split_heads(x @ params[f"w_{name}"], num_heads) for name in "qkv")
    if mask is not None and mask.ndim >= 2:
        mask = mask.unsqueeze(-3)
    heads = scaled_dot_product_attention(q, k, v, mask)
    gate = torch.sigmoid(x @ params["w_g"])
    if gate.shape[-1] == num_heads:
        gate = gate.transpose(-1, -2).unsqueeze(-1)  # (..., h, n, 1)
    else:
        gate = split_heads(gate, num_heads)  # (..., h, n, d_v)
    out = merge_heads(heads * gate) @ params["w_o"]
    return (out, attention_weights(q, k, mask)) if return_weights else out

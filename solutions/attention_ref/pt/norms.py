"""Lesson 14, RMSNorm (Zhang and Sennrich, 2019) -- PyTorch reference.

Lesson 8's LayerNorm subtracts each vector's mean, divides by its standard deviation, then scales
and shifts. RMSNorm keeps only the rescaling: ``x / sqrt(mean(x**2) + eps) * weight``, no mean
subtracted and no shift. Today's open models use it everywhere a norm sits: before attention,
before the FFN, at the top of the stack, and (QK-norm) on each head's queries and keys.

Half-precision inputs are normalised in float32 and the result returned in their dtype, as the
models' own code does (``F.rms_norm`` is PyTorch's built-in; the reference tests compare the two).
The families differ in where they round a bfloat16 input back to its dtype: Llama, Qwen3 and GLM-4
round the normalised vector first and multiply by the weight in bfloat16
(``weight * normed.to(input_dtype)``, ``round_first=True``); gpt-oss multiplies in float32 and
rounds once (``(weight * normed).to(input_dtype)``, the default). In float32 and float64 the two
are the same function.
"""

from __future__ import annotations

import torch

from .retrieval import as_float_tensor, upcast

__all__ = ["rms_norm"]


def rms_norm(x, weight, eps: float = 1e-6, round_first: bool = False) -> torch.Tensor:
    """``x`` ``(..., d)`` divided by the root mean square of its last axis, then multiplied by
    ``weight`` ``(d,)``: ``x / sqrt(mean(x**2) + eps) * weight``, in ``x``'s dtype and device.
    Half precision is normalised in float32; ``round_first``: the normalised ``x`` rounded to its
    dtype before the weight multiplies it in that dtype (Qwen3, GLM-4), else the weight applied in
    float32 and the product rounded once (gpt-oss)."""
    x, weight = as_float_tensor("x", x), as_float_tensor("weight", weight)
    if x.ndim < 1 or tuple(weight.shape) != tuple(x.shape[-1:]):
        raise ValueError(
            f"weight must have shape ({x.shape[-1] if x.ndim else '?'},), one per feature of x, "
            f"got weight {tuple(weight.shape)} for x {tuple(x.shape)}"
        )
    if not eps >= 0:
        raise ValueError(f"eps must be non-negative, got {eps!r}")
    (work,) = upcast(x)
    normed = work * torch.rsqrt(work.pow(2).mean(dim=-1, keepdim=True) + eps)
    if round_first:
        return weight.to(x.dtype) * normed.to(x.dtype)
    return (weight.to(normed.dtype) * normed).to(x.dtype)

"""Lesson 7, Positional encoding -- PyTorch reference (the same functions as
``attention_ref.np.positional``). The table is computed in float64 and then cast, so that float32
and float16 encodings are the rounded exact values at every position."""

from __future__ import annotations

import torch

from .. import _checks
from ..np.positional import BASE, _check_sizes
from .retrieval import as_float_tensor


def frequencies(d_model: int, *, device=None, dtype=torch.float64) -> torch.Tensor:
    """The angular frequencies w_i = 10000^(-2i / d_model)."""
    _check_sizes(0, d_model)
    exponents = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    return (BASE**-exponents).to(device=device, dtype=dtype)


def positional_encoding(
    n_positions: int, d_model: int, *, device=None, dtype=torch.float32
) -> torch.Tensor:
    """``(n_positions, d_model)``: row pos is PE(pos); even columns sines, odd columns cosines."""
    _check_sizes(n_positions, d_model)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * frequencies(d_model)[None, :]
    pe = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).reshape(n_positions, d_model)
    return pe.to(device=device, dtype=dtype)


def shift_matrix(k: float, d_model: int, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """``(d_model, d_model)`` M_k with PE(pos + k) = PE(pos) @ M_k (see the NumPy twin)."""
    angles = k * frequencies(d_model)
    cos, sin = torch.cos(angles), torch.sin(angles)
    # (d/2, 2, 2)
    blocks = torch.stack((torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2)
    return torch.block_diag(*blocks).to(device=device, dtype=dtype)


def add_positional_encoding(embeddings) -> torch.Tensor:
    """``embeddings`` ``(..., n, d_model)`` + PE of positions 0 .. n-1, on the embeddings'
    device."""
    x = as_float_tensor("embeddings", embeddings)
    _checks.require_ndim("embeddings", x, 2, "(..., n, d_model)")
    return x + positional_encoding(x.shape[-2], x.shape[-1], device=x.device, dtype=x.dtype)

"""Lesson 10 (optional section), Rotary position embedding -- PyTorch reference (the same function
as ``attention_ref.np.rotary``, whose docstring explains it): queries and keys turned by lesson
7's rotation M_pos, so that their scores depend on the offset between positions only."""

from __future__ import annotations

import torch

from .. import _checks
from ..np.positional import BASE
from .retrieval import as_float_tensor

__all__ = ["rotary_embedding"]


def rotary_embedding(x, positions=None, base: float = BASE) -> torch.Tensor:
    """``x`` ``(..., n, d)`` with row ``j`` turned by ``M_pos``, ``pos = positions[j]`` (default
    ``0 .. n - 1``), pair by pair; on the device of ``x``. Angles in float64, on the CPU."""
    x = as_float_tensor("x", x)
    _checks.require_ndim("x", x, 2, "(..., n, d)")
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError(
            f"the last axis of x must be even (pairs of features), got shape {tuple(x.shape)}"
        )
    if positions is None:
        positions = torch.arange(n, device=x.device)
    if tuple(positions.shape) != (n,):
        raise ValueError(
            f"positions must have shape ({n},), one per row of x, got {tuple(positions.shape)}"
        )
    exponents = torch.arange(0, d, 2, dtype=torch.float64) / d  # on the CPU: MPS has no float64
    angles = positions.cpu().to(torch.float64)[:, None] * base**-exponents  # (n, d / 2)
    cos, sin = (f(angles).to(x.device, x.dtype) for f in (torch.cos, torch.sin))
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos + odd * sin, odd * cos - even * sin), dim=-1).flatten(-2)

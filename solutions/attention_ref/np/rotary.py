"""Lesson 10 (optional section), Rotary position embedding -- NumPy reference.

Lesson 7 showed that moving k positions on turns every (sin, cos) pair of the positional encoding
by the angle k w_i: PE(pos + k) = PE(pos) @ M_k, M_k block diagonal with one 2 x 2 rotation per
pair (``shift_matrix``). Rotary position embedding (RoPE; Su et al., 2021) applies that rotation
to the queries and keys themselves instead of adding an encoding to the input: the query or key
at position ``pos`` becomes ``x @ M_pos``. Rotations keep lengths and compose, M_a M_b^T =
M_(a - b), so the score of a query at m and a key at n, ``q M_m (k M_n)^T = q M_(m - n) k^T``,
depends on the offset m - n and on the contents, never on where the pair sits.

(Su et al. rotate column vectors, by the angle -pos w_i in this row-vector layout; scores depend
on the offset either way. Some implementations pair feature i with i + d/2 instead of 2i with
2i + 1: a permutation of the features, the same idea.)
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .positional import BASE
from .retrieval import as_float_array

__all__ = ["rotary_embedding"]


def rotary_embedding(x, positions=None, base: float = BASE) -> np.ndarray:
    """``x`` ``(..., n, d)`` with row ``j`` turned by lesson 7's ``M_pos``, ``pos = positions[j]``
    (default ``0 .. n - 1``): pair ``(x[2i], x[2i+1])`` becomes
    ``(x[2i] cos + x[2i+1] sin, -x[2i] sin + x[2i+1] cos)`` of the angle ``pos * base**(-2i/d)``."""
    x = as_float_array("x", x)
    _checks.require_ndim("x", x, 2, "(..., n, d)")
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError(
            f"the last axis of x must be even (pairs of features), got shape {x.shape}"
        )
    positions = np.arange(n) if positions is None else np.asarray(positions)
    if positions.shape != (n,):
        raise ValueError(
            f"positions must have shape ({n},), one per row of x, got {positions.shape}"
        )
    angles = positions[:, None] * base ** (-np.arange(0, d, 2) / d)  # (n, d / 2)
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos + odd * sin
    out[..., 1::2] = odd * cos - even * sin
    return out

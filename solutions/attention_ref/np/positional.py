"""Lesson 7, Positional encoding -- NumPy reference.

Self-attention has no recurrence and no convolution: permute its input tokens and its outputs are
permuted the same way (permutation equivariance), so it cannot tell order by itself. The paper adds
fixed sinusoids of the same width d_model to the embeddings:

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Each pair of columns (2i, 2i+1) is a point on a circle turning at the angular frequency
w_i = 10000^(-2i / d_model), so PE(pos + k) is PE(pos) rotated pair by pair: a fixed linear map
that depends on k only (``shift_matrix``).
"""

from __future__ import annotations

import numpy as np

from .. import _checks

BASE = 10000.0  # the paper's wavelength base: wavelengths from 2 pi to 10000 * 2 pi


def _check_sizes(n_positions: int, d_model: int) -> None:
    if not isinstance(n_positions, (int, np.integer)) or n_positions < 0:
        raise ValueError(f"n_positions must be a non-negative integer, got {n_positions!r}")
    if not isinstance(d_model, (int, np.integer)) or d_model < 2 or d_model % 2:
        raise ValueError(
            f"d_model must be a positive even integer (sin/cos pairs), got {d_model!r}"
        )


def frequencies(d_model: int) -> np.ndarray:
    """The angular frequencies w_i = 10000^(-2i / d_model), i = 0 .. d_model/2 - 1."""
    _check_sizes(0, d_model)
    return BASE ** (-np.arange(0, d_model, 2) / d_model)


def positional_encoding(n_positions: int, d_model: int) -> np.ndarray:
    """``(n_positions, d_model)``: row pos is PE(pos); even columns sines, odd columns cosines."""
    _check_sizes(n_positions, d_model)
    angles = np.arange(n_positions)[:, None] * frequencies(d_model)[None, :]  # (n, d_model / 2)
    pe = np.empty((n_positions, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def shift_matrix(k: float, d_model: int) -> np.ndarray:
    """``(d_model, d_model)`` matrix M_k with PE(pos + k) = PE(pos) @ M_k for every pos.

    Block diagonal: the block of pair i is the rotation [[cos k w_i, -sin k w_i], [sin k w_i, cos k
    w_i]], because sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin
    b.
    """
    angles = k * frequencies(d_model)
    m = np.zeros((d_model, d_model))
    even, odd = np.arange(0, d_model, 2), np.arange(1, d_model, 2)
    m[even, even] = np.cos(angles)
    m[even, odd] = -np.sin(angles)
    m[odd, even] = np.sin(angles)
    m[odd, odd] = np.cos(angles)
    return m


def add_positional_encoding(embeddings) -> np.ndarray:
    """``embeddings`` ``(..., n, d_model)`` + PE of positions 0 .. n-1 (same width, so they add)."""
    x = np.asarray(embeddings)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"embeddings must hold floating-point numbers, got dtype {x.dtype}")
    _checks.require_ndim("embeddings", x, 2, "(..., n, d_model)")
    return x + positional_encoding(x.shape[-2], x.shape[-1]).astype(x.dtype)

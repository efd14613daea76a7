"""Lesson 3, Masking -- NumPy reference.

Boolean masks, True = may attend (F.scaled_dot_product_attention's convention). Masking means
setting the scores of illegal connections to -inf before the softmax (the paper's "masking out
(setting to -inf) all values in the input of the softmax which correspond to illegal
connections"), so that they get exactly zero weight.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .retrieval import as_float_array, softmax_in_place


def causal_mask(n_q: int, n_k: int | None = None) -> np.ndarray:
    """``(n_q, n_k)``, True where key j <= query i: no position sees its future.

    Aligned at the top left, like ``is_causal=True`` in F.scaled_dot_product_attention: query i
    may attend to keys 0..i, whatever n_k is.
    """
    n_k = n_q if n_k is None else n_k
    if n_q < 0 or n_k < 0:
        raise ValueError(f"mask sizes must be non-negative, got n_q={n_q}, n_k={n_k}")
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def padding_mask(lengths, n_k: int) -> np.ndarray:
    """``(batch, 1, n_k)``, True for the first ``lengths[b]`` keys of sequence b (the real tokens).

    The middle axis of size 1 lets the mask broadcast over the queries of scores
    ``(batch, n_q, n_k)``; for heads, ``(batch, h, n_q, n_k)``, insert one more: ``mask[:, None]``.
    A ``(batch, n_k)`` mask would be broadcast against the *queries* instead: the classic bug.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(
            f"lengths must be a 1-D array of integers, got shape {lengths.shape} {lengths.dtype}"
        )
    if np.any(lengths < 0) or np.any(lengths > n_k):
        raise ValueError(f"lengths must lie in [0, n_k = {n_k}], got {lengths.tolist()}")
    return (np.arange(n_k)[None, :] < lengths[:, None])[:, None, :]


def to_key_padding_mask(mask) -> np.ndarray:
    """nn.MultiheadAttention's ``key_padding_mask`` from a padding mask: ``(batch, n_k)``, True =
    IGNORE.

    nn.MultiheadAttention's boolean masks mean the opposite of this course's (and of
    F.scaled_dot_product_attention's): True marks a key to *leave out*.
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim == 3 and mask.shape[1] == 1:
        mask = mask[:, 0, :]
    if mask.ndim != 2:
        raise ValueError(
            f"expected a padding mask (batch, 1, n_k) or (batch, n_k), got shape {mask.shape}"
        )
    return ~mask


def masked_softmax(scores, mask) -> np.ndarray:
    """Softmax over the last axis with masked scores (mask False) excluded.

    The mask broadcasts against the scores. A row whose keys are all masked gets zero weights
    rather than NaN.
    """
    scores = as_float_array("scores", scores)
    mask = valid_mask(mask, scores.shape)
    return softmax_in_place(np.where(mask, scores, -np.inf), axis=-1)  # np.where made a new array


def valid_mask(mask, scores_shape) -> np.ndarray:
    """``mask`` as a boolean array that broadcasts to scores of ``scores_shape``; a TypeError for
    any other dtype, a ValueError naming both shapes where it does not fit."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    _checks.mask_fits(mask, tuple(scores_shape), "(..., n_q, n_k)")
    return mask

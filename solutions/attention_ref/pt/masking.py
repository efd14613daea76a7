"""Lesson 3, Masking -- PyTorch reference (the same functions as ``attention_ref.np.masking``).

Masks are created on ``device`` (default: the CPU); the others run where their inputs live.
"""

from __future__ import annotations

import torch

from .. import _checks
from .retrieval import as_float_tensor, softmax_in_place


def causal_mask(n_q: int, n_k: int | None = None, *, device=None) -> torch.Tensor:
    """``(n_q, n_k)``, True where key j <= query i; top-left aligned like ``is_causal=True``."""
    n_k = n_q if n_k is None else n_k
    if n_q < 0 or n_k < 0:
        raise ValueError(f"mask sizes must be non-negative, got n_q={n_q}, n_k={n_k}")
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, n_k: int) -> torch.Tensor:
    """``(batch, 1, n_k)``, True for the real tokens; on the device of ``lengths``."""
    if not isinstance(lengths, torch.Tensor) or lengths.ndim != 1 or lengths.is_floating_point():
        raise ValueError(f"lengths must be a 1-D integer tensor, got {lengths!r}")
    if bool((lengths < 0).any()) or bool((lengths > n_k).any()):
        raise ValueError(f"lengths must lie in [0, n_k = {n_k}], got {lengths.tolist()}")
    return (torch.arange(n_k, device=lengths.device)[None, :] < lengths[:, None])[:, None, :]


def to_key_padding_mask(mask) -> torch.Tensor:
    """nn.MultiheadAttention's ``key_padding_mask``: ``(batch, n_k)``, True = IGNORE this key."""
    if mask.ndim == 3 and mask.shape[1] == 1:
        mask = mask[:, 0, :]
    if mask.ndim != 2:
        raise ValueError(
            "expected a padding mask (batch, 1, n_k) or (batch, n_k), got shape "
            f"{tuple(mask.shape)}"
        )
    return ~mask.bool()


def masked_softmax(scores, mask) -> torch.Tensor:
    """Softmax over the last axis with masked scores excluded; fully masked rows give zeros."""
    return softmax_in_place(masked_scores(scores, mask), axis=-1)  # masked_scores made a new tensor


def masked_scores(scores, mask) -> torch.Tensor:
    """The scores with -inf where ``mask`` is False (a new tensor): what the softmax then sees."""
    scores = as_float_tensor("scores", scores)
    return scores.masked_fill(~valid_mask(mask, scores.shape), -torch.inf)


def valid_mask(mask, scores_shape) -> torch.Tensor:
    """``mask``, checked: a boolean tensor (TypeError otherwise) that broadcasts to scores of
    ``scores_shape`` (a ValueError naming both shapes otherwise)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(
            "mask must be a boolean tensor (True = may attend), got "
            f"{getattr(mask, 'dtype', type(mask))}"
        )
    _checks.mask_fits(mask, tuple(scores_shape), "(..., n_q, n_k)")
    return mask

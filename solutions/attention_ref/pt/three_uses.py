"""Lesson 5, The three uses of attention -- PyTorch reference (the same functions as
``attention_ref.np.three_uses``); each runs on the device of its inputs."""

from __future__ import annotations

import torch

from .. import _checks
from .masking import causal_mask, padding_mask
from .multihead import multi_head_attention


def combine_masks(*masks):
    """Logical AND of boolean masks that broadcast together (True = may attend); ``None`` is
    skipped."""
    present = [m for m in masks if m is not None]
    for m in present:
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
            raise TypeError(
                "masks must be boolean tensors (True = may attend), got "
                f"{getattr(m, 'dtype', type(m))}"
            )
    if not present:
        return None
    try:
        shape = torch.broadcast_tensors(*present)[
            0
        ].shape  # torch.broadcast_shapes: ~2 s on first use
    except RuntimeError:
        raise ValueError(
            "masks do not broadcast together: shapes "
            + ", ".join(str(tuple(m.shape)) for m in present)
        ) from None
    out = torch.ones(shape, dtype=torch.bool, device=present[0].device)
    for m in present:
        out = out & m
    return out


def encoder_self_attention(
    x, params: dict, num_heads: int, src_mask=None, return_weights: bool = False, *, scale=None
):
    """Q = K = V = x, the encoder's sequence ``(..., n_src, d_model)``; ``src_mask`` hides padding
    keys."""
    return multi_head_attention(x, x, x, params, num_heads, src_mask, return_weights, scale=scale)


def decoder_self_attention(
    y, params: dict, num_heads: int, tgt_mask=None, return_weights: bool = False, *, scale=None
):
    """Q = K = V = y ``(..., n_tgt, d_model)``, the causal mask always on, combined with
    ``tgt_mask``."""
    if not isinstance(y, torch.Tensor) or y.ndim < 2:
        raise ValueError(
            f"y must be a tensor of shape (..., n_tgt, d_model), got {getattr(y, 'shape', type(y))}"
        )
    mask = combine_masks(causal_mask(y.shape[-2], device=y.device), tgt_mask)
    return multi_head_attention(y, y, y, params, num_heads, mask, return_weights, scale=scale)


def encoder_decoder_attention(
    y,
    memory,
    params: dict,
    num_heads: int,
    memory_mask=None,
    return_weights: bool = False,
    *,
    scale=None,
):
    """Queries from the decoder ``y``; keys and values from the encoder's output ``memory``."""
    return multi_head_attention(
        y, memory, memory, params, num_heads, memory_mask, return_weights, scale=scale
    )


def transformer_masks(src_lengths, tgt_lengths, n_src: int, n_tgt: int):
    """``(src_mask, tgt_mask, memory_mask)`` for a batch, on the device of the lengths; see the
    NumPy twin.

    Shapes ``(batch, n_src, n_src)``, ``(batch, n_tgt, n_tgt)`` (causal AND the target's padding)
    and ``(batch, n_tgt, n_src)`` (the source's padding); True = may attend.
    """
    for name, lengths in (("src_lengths", src_lengths), ("tgt_lengths", tgt_lengths)):
        if not isinstance(lengths, torch.Tensor):
            raise ValueError(f"{name} must be a 1-D integer tensor, got {type(lengths).__name__}")
    _checks.sequence_lengths(src_lengths, tgt_lengths)
    src_keys = padding_mask(src_lengths, n_src)
    tgt_keys = padding_mask(tgt_lengths, n_tgt)
    batch = src_lengths.shape[0]
    src_mask = src_keys.expand(batch, n_src, n_src).clone()
    tgt_mask = combine_masks(causal_mask(n_tgt, device=tgt_lengths.device), tgt_keys)
    memory_mask = src_keys.expand(batch, n_tgt, n_src).clone()
    return src_mask, tgt_mask, memory_mask

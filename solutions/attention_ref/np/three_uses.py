"""Lesson 5, The three uses of attention in the Transformer -- NumPy reference.

One multi-head attention (lesson 4), wired three ways (the paper's section 3.2.3):

* encoder self-attention: queries, keys and values all come from the encoder's previous layer;
  a padding mask hides the source's padding keys (scores ``n_src x n_src``);
* masked decoder self-attention: the same with the decoder's sequence, plus the causal mask, so
  that no position sees its future (scores ``n_tgt x n_tgt``, lower triangular);
* encoder-decoder (cross) attention: queries from the decoder, keys and values from the encoder's
  output, the "memory"; only the source's padding is hidden (scores ``n_tgt x n_src``).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .masking import causal_mask, padding_mask
from .multihead import multi_head_attention


def combine_masks(*masks):
    """Logical AND of boolean masks that broadcast together (True = may attend); ``None`` is
    skipped.

    Returns ``None`` when every mask is ``None`` (attend everywhere).
    """
    present = [np.asarray(m) for m in masks if m is not None]
    for m in present:
        if m.dtype != np.bool_:
            raise TypeError(f"masks must be boolean (True = may attend), got dtype {m.dtype}")
    if not present:
        return None
    try:
        shape = np.broadcast_shapes(*(m.shape for m in present))
    except ValueError:
        raise ValueError(
            "masks do not broadcast together: shapes " + ", ".join(str(m.shape) for m in present)
        ) from None
    out = np.ones(shape, dtype=bool)
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
    """Q = K = V = y, the decoder's sequence ``(..., n_tgt, d_model)``, with the causal mask always
    on.

    ``tgt_mask`` (e.g. the target's padding mask) is combined with the causal mask, never replaces
    it.
    """
    y = np.asarray(y)
    if y.ndim < 2:
        raise ValueError(f"y must have shape (..., n_tgt, d_model), got shape {y.shape}")
    mask = combine_masks(causal_mask(y.shape[-2]), tgt_mask)
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
    """Queries from the decoder ``y`` ``(..., n_tgt, d_model)``; keys and values from the encoder's
    output ``memory`` ``(..., n_src, d_model)``. ``memory_mask`` hides the source's padding keys."""
    return multi_head_attention(
        y, memory, memory, params, num_heads, memory_mask, return_weights, scale=scale
    )


def transformer_masks(src_lengths, tgt_lengths, n_src: int, n_tgt: int):
    """The masks of the three attentions of a batch of (source, target) pairs, from their lengths.

    Returns ``(src_mask, tgt_mask, memory_mask)``, each with the full shape of its attention
    matrix (True = may attend), ready for the three functions above:

    * ``src_mask`` ``(batch, n_src, n_src)``: encoder self-attention, the source's padding hidden;
    * ``tgt_mask`` ``(batch, n_tgt, n_tgt)``: decoder self-attention, causal AND the target's
      padding;
    * ``memory_mask`` ``(batch, n_tgt, n_src)``: cross-attention, the *source's* padding hidden.

    Padding hides keys, never queries: a padding position's own row is computed (and ignored later).
    """
    src_lengths, tgt_lengths = np.asarray(src_lengths), np.asarray(tgt_lengths)
    _checks.sequence_lengths(src_lengths, tgt_lengths)
    src_keys = padding_mask(src_lengths, n_src)  # (batch, 1, n_src)
    tgt_keys = padding_mask(tgt_lengths, n_tgt)  # (batch, 1, n_tgt)
    batch = src_lengths.shape[0]
    src_mask = np.broadcast_to(src_keys, (batch, n_src, n_src)).copy()
    tgt_mask = combine_masks(causal_mask(n_tgt), tgt_keys)
    memory_mask = np.broadcast_to(src_keys, (batch, n_tgt, n_src)).copy()
    return src_mask, tgt_mask, memory_mask

"""Lesson 2, Scaled dot-product attention (Eq. 1 of the paper) -- PyTorch reference.

The same functions as ``attention_ref.np.sdpa``; equal to ``F.scaled_dot_product_attention``
with a boolean ``attn_mask`` (True = may attend), fully masked rows included (zeros, not NaN).
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from .masking import masked_scores
from .retrieval import (
    as_float_tensor,
    dot_scores,
    same_dtype,
    softmax_in_place,
    upcast,
    weighted_sum,
)


def _scale(queries, scale) -> float:
    """1 / sqrt(d_k), or the ``scale`` given instead (as in ``F.scaled_dot_product_attention``)."""
    return 1.0 / math.sqrt(queries.shape[-1]) if scale is None else float(scale)


def _scores(queries, keys, mask, scale=None) -> torch.Tensor:
    """Q K^T / sqrt(d_k), masked: a fresh tensor. 1/sqrt(d_k) scales the (n_q, d_k) queries rather
    than the (n_q, n_k) scores, one pass over the n x n matrix fewer."""
    scores = dot_scores(queries * _scale(queries, scale), keys)
    return scores if mask is None else masked_scores(scores, mask)


def attention_weights(queries, keys, mask=None, *, scale=None) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) over the keys, masked keys excluded: ``(..., n_q, n_k)``;
    ``scale`` replaces ``1 / sqrt(d_k)``, as in ``F.scaled_dot_product_attention``."""
    queries, keys = as_float_tensor("queries", queries), as_float_tensor("keys", keys)
    same_dtype(queries=queries, keys=keys)
    dtype = queries.dtype
    queries, keys = upcast(queries, keys)
    return softmax_in_place(_scores(queries, keys, mask, scale), axis=-1).to(dtype)


def scaled_dot_product_attention(queries, keys, values, mask=None, *, scale=None) -> torch.Tensor:
    """Eq. (1): softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend).

    As lesson 2 writes it; attention_ref.pt.sdpa_tuned computes the same numbers sooner for a
    large batch on the CPU.
    """
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    queries = as_float_tensor("queries", queries)
    same_dtype(queries=queries, keys=keys, values=values)
    _checks.keys_values_inputs(keys, values)
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    weights = softmax_in_place(_scores(queries, keys, mask, scale), axis=-1)
    return weighted_sum(weights, values).to(dtype)

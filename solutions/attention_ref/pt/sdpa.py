"""Lesson 2, Scaled dot-product attention (Eq. 1 of the paper) -- PyTorch reference.

The same functions as ``attention_ref.np.sdpa``; equal to ``F.scaled_dot_product_attention``
with a boolean ``attn_mask`` (True = may attend), fully masked rows included (zeros, not NaN).
"""

from __future__ import annotations

import math

import torch

from .. import _batching, _checks
from .masking import masked_scores, valid_mask
from .retrieval import (
    as_float_tensor,
    dot_scores,
    same_dtype,
    softmax_in_place,
    softmax_parts,
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

    On the CPU, without autograd, a large batch is computed a few heads at a time
    (attention_ref._batching): the same numbers, sooner.
    """
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    queries = as_float_tensor("queries", queries)
    same_dtype(queries=queries, keys=keys, values=values)
    _checks.keys_values_inputs(keys, values)
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (queries, keys, values))
    batch = _batching.output_batch(queries, keys, values, mask, valid_mask)
    if queries.device.type == "cpu" and not grad:
        if _batching.worth_splitting(batch, queries, keys):
            return _in_groups(queries, keys, values, mask, batch, scale).to(dtype)
    scores = _scores(queries, keys, mask, scale)
    if grad:  # autograd keeps what it needs: the weights as they are
        return weighted_sum(softmax_in_place(scores, axis=-1), values).to(dtype)
    # The weights in place of the scores; a query with nothing to attend to has NaN weights and so
    # a NaN output row, set to zeros: (n_q, d_v) numbers rather than (n_q, n_k) weights
    weights, nothing = softmax_parts(scores, -1, in_place=True)
    return weighted_sum(weights, values).masked_fill_(nothing, 0.0).to(dtype)


def _in_groups(queries, keys, values, mask, batch, scale=None) -> torch.Tensor:
    """Eq. (1) for a group of heads at a time, each group's scores in one reused scratch tensor."""
    keys_t = keys.transpose(-1, -2)
    queries = queries * _scale(queries, scale)
    options = {"dtype": queries.dtype, "device": queries.device}
    out = torch.empty(batch + (queries.shape[-2], values.shape[-1]), **options)
    scratch = None
    for index in _batching.groups(batch, queries.shape[-2] * keys.shape[-2]):
        q, k_t, v, m = (_batching.part(x, index) for x in (queries, keys_t, values, mask))
        shape = _batching.product_shape(q, k_t)
        if scratch is None:  # the first group is the largest
            scratch = torch.empty(math.prod(shape), **options)
        scores = torch.matmul(q, k_t, out=scratch[: math.prod(shape)].view(shape))
        if m is not None:
            scores.masked_fill_(~m, -torch.inf)
        weights, nothing = softmax_parts(scores, -1, in_place=True)
        torch.matmul(weights, v, out=out[index]).masked_fill_(nothing, 0.0)
    return out

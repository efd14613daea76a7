"""Lesson 2's Eq. (1) for a large batch, tuned for speed: what `make bench` times.

The reference, attention_ref.pt.sdpa, computes Eq. (1) as lesson 2 writes it, and the lessons'
hidden tests compare learners with it. This computes the same numbers (a test holds them equal)
sooner: on the CPU without autograd, a group of heads at a time (attention_ref._batching), each
group's scores in one scratch tensor that stays in the core's cache; without autograd anywhere,
the weights written over the scores and the rows of a query with nothing to attend to set to
zero in the (n_q, d_v) output rather than the (n_q, n_k) weights. The function has the
reference's name, so that a notebook that calls it for its own ``scaled_dot_product_attention``
is caught as calling the reference.
"""

from __future__ import annotations

import math

import torch

from .. import _batching, _checks
from .masking import valid_mask
from .retrieval import as_float_tensor, same_dtype, softmax_parts, upcast, weighted_sum
from .sdpa import _scale, _scores
from .sdpa import scaled_dot_product_attention as reference


def scaled_dot_product_attention(queries, keys, values, mask=None, *, scale=None) -> torch.Tensor:
    """attention_ref.pt.scaled_dot_product_attention, sooner without autograd."""
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    queries = as_float_tensor("queries", queries)
    same_dtype(queries=queries, keys=keys, values=values)
    _checks.keys_values_inputs(keys, values)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (queries, keys, values)):
        return reference(queries, keys, values, mask, scale=scale)  # autograd keeps the weights
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    batch = _batching.output_batch(queries, keys, values, mask, valid_mask)
    if queries.device.type == "cpu" and _batching.worth_splitting(batch, queries, keys):
        return _in_groups(queries, keys, values, mask, batch, scale).to(dtype)
    # The weights in place of the scores; a query with nothing to attend to has NaN weights and so
    # a NaN output row, set to zeros: (n_q, d_v) numbers rather than (n_q, n_k) weights
    weights, nothing = softmax_parts(_scores(queries, keys, mask, scale), -1, in_place=True)
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

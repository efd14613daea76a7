"""Lesson 13, DeepSeek Sparse Attention's lightning indexer and top-k selection -- PyTorch
reference: the same functions as ``attention_ref.np.sparse``, whose docstring explains them,
device-agnostic. ``sparse_attention`` gathers the selected keys through expanded views: no copy
of the keys per query is ever made before the gather."""

from __future__ import annotations

import math

import torch

from .. import _checks_linear
from .retrieval import as_float_tensor, same_dtype, upcast

__all__ = ["indexer_scores", "top_k_indices", "top_k_mask", "sparse_attention"]


def indexer_scores(index_queries, index_keys, head_weights) -> torch.Tensor:
    """``I_ts = sum_j w_tj ReLU(q^I_tj . k^I_s)``: ``(..., n_q, n_k)``. See the NumPy twin."""
    index_queries, index_keys, head_weights = (
        as_float_tensor(n, x)
        for n, x in (("index_queries", index_queries), ("index_keys", index_keys),
                     ("head_weights", head_weights))
    )  # fmt: skip
    _checks_linear.indexer_inputs(index_queries, index_keys, head_weights)
    per_head = torch.relu(index_queries @ index_keys.transpose(-1, -2).unsqueeze(-3))
    return (head_weights.unsqueeze(-1) * per_head).sum(dim=-3)


def top_k_indices(scores, top_k: int, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(indices, valid)``, ``(..., n_q, min(top_k, n_k))``, best first; ``valid`` False where
    a slot holds a forbidden key. See the NumPy twin."""
    scores = as_float_tensor("scores", scores)
    top_k = _checks_linear.top_k_inputs(scores, top_k, mask)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    k = min(top_k, scores.shape[-1])
    indices = scores.topk(k, dim=-1).indices
    if mask is None:
        return indices, torch.ones_like(indices, dtype=torch.bool)
    return indices, mask.expand(scores.shape).gather(-1, indices)


def top_k_mask(scores, top_k: int, mask=None) -> torch.Tensor:
    """The selection as a boolean mask ``(..., n_q, n_k)``. See the NumPy twin."""
    indices, valid = top_k_indices(scores, top_k, mask)
    shape = indices.shape[:-1] + (scores.shape[-1],)
    return torch.zeros(shape, dtype=torch.bool, device=scores.device).scatter(-1, indices, valid)


def _gather_rows(x, indices, batch):
    """``x[..., indices[..., q, i], :]``: ``(..., n_k, d)`` and ``(..., n_q, k)`` -> ``(...,
    n_q, k, d)``, through expanded views of ``x`` (no copy per query before the gather)."""
    n_q, k = indices.shape[-2:]
    rows = x.unsqueeze(-3).expand(*batch, n_q, *x.shape[-2:])
    return rows.gather(-2, indices.unsqueeze(-1).expand(*batch, n_q, k, x.shape[-1]))


def sparse_attention(queries, keys, values, indices, valid=None, *, scale=None) -> torch.Tensor:
    """Eq. (1) over each query's selected keys only: ``(..., n_q, d_v)``. See the NumPy twin."""
    queries, keys, values = (
        as_float_tensor(n, x) for n, x in (("queries", queries), ("keys", keys), ("values", values))
    )
    same_dtype(queries=queries, keys=keys, values=values)
    valid = torch.ones_like(indices, dtype=torch.bool) if valid is None else valid
    _checks_linear.sparse_inputs(queries, keys, values, indices, valid)
    batch = torch.broadcast_shapes(
        queries.shape[:-2], keys.shape[:-2], values.shape[:-2], indices.shape[:-2], valid.shape[:-2]
    )
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    indices, valid = (
        indices.expand(*batch, *indices.shape[-2:]),
        valid.expand(*batch, *indices.shape[-2:]),
    )
    picked_k, picked_v = _gather_rows(keys, indices, batch), _gather_rows(values, indices, batch)
    scale = 1.0 / math.sqrt(queries.shape[-1]) if scale is None else scale
    scores = (queries.unsqueeze(-2) @ picked_k.transpose(-1, -2)).squeeze(-2) * scale
    weights = torch.softmax(scores.masked_fill(~valid, float("-inf")), dim=-1)
    weights = weights.nan_to_num(0.0)  # a query with no valid key: a row of -inf, zeros
    return (weights.unsqueeze(-2) @ picked_v).squeeze(-2).to(dtype)

"""Lesson 13, Learned sparse attention: DeepSeek Sparse Attention's lightning indexer and top-k
selection (DeepSeek-AI, 2025, DeepSeek-V3.2, section 2.1) -- NumPy reference.

A small **lightning indexer** scores every earlier token ``s`` for the query token ``t``,

    I_ts = sum_j w_tj ReLU(q^I_tj . k^I_s)      (h_I indexer heads j, one indexer key per token),

and each query then attends, with the model's full attention, to its ``top_k`` best-scored
tokens only: ``u_t = Attn(h_t, {c_s : I_ts in Top-k(I_t,:)})``. The indexer still reads every
earlier token, but with few narrow heads (in FP8 in DeepSeek-V3.2); the attention itself reads
``top_k`` tokens whatever the length of the text (2,048 in DeepSeek-V3.2).

A mask (True = may attend, the causal mask in a decoder) is respected: a key the mask forbids is
never selected, and a query allowed fewer than ``top_k`` keys selects all of them.
``sparse_attention`` gathers the selected keys and values and attends over them only: the same
numbers as dense attention whose mask is the selection (``top_k_mask``).
"""

from __future__ import annotations

import numpy as np

from .. import _checks_linear
from .retrieval import as_float_array

__all__ = ["indexer_scores", "top_k_indices", "top_k_mask", "sparse_attention"]


def indexer_scores(index_queries, index_keys, head_weights) -> np.ndarray:
    """``I_ts = sum_j w_tj ReLU(q^I_tj . k^I_s)``: index_queries ``(..., h_I, n_q, d_I)``,
    index_keys ``(..., n_k, d_I)`` (shared by the indexer heads), head_weights ``(..., h_I,
    n_q)`` -> ``(..., n_q, n_k)``. No scale and no mask: the selection applies the mask."""
    index_queries, index_keys, head_weights = (
        as_float_array(n, x)
        for n, x in (("index_queries", index_queries), ("index_keys", index_keys),
                     ("head_weights", head_weights))
    )  # fmt: skip
    _checks_linear.indexer_inputs(index_queries, index_keys, head_weights)
    per_head = np.maximum(index_queries @ np.swapaxes(index_keys, -1, -2)[..., None, :, :], 0.0)
    return (head_weights[..., :, :, None] * per_head).sum(axis=-3)


def top_k_indices(scores, top_k: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """The ``min(top_k, n_k)`` best-scored keys of each query: ``(indices, valid)``, both ``(...,
    n_q, k)``, best first. ``valid`` is False where a query had fewer allowed keys than ``k``:
    those slots hold forbidden keys and must be ignored."""
    scores = as_float_array("scores", scores)
    top_k = _checks_linear.top_k_inputs(scores, top_k, mask)
    shape = scores.shape if mask is None else np.broadcast_shapes(scores.shape, np.shape(mask))
    allowed = np.broadcast_to(True if mask is None else np.asarray(mask, bool), shape)
    masked = np.where(allowed, scores, -np.inf)  # a forbidden key ranks below every allowed one
    k = min(top_k, scores.shape[-1])
    indices = np.argsort(-masked, axis=-1, kind="stable")[..., :k]
    valid = np.take_along_axis(allowed, indices, axis=-1)
    return indices, valid


def top_k_mask(scores, top_k: int, mask=None) -> np.ndarray:
    """The selection as a boolean mask ``(..., n_q, n_k)``: True at each query's selected,
    allowed keys (at most ``top_k``), for dense attention restricted to them."""
    indices, valid = top_k_indices(scores, top_k, mask)
    selected = np.zeros(indices.shape[:-1] + np.shape(scores)[-1:], bool)
    np.put_along_axis(selected, indices, valid, axis=-1)
    return selected


def sparse_attention(queries, keys, values, indices, valid=None, *, scale=None) -> np.ndarray:
    """Eq. (1) over each query's selected keys only: queries ``(..., n_q, d_k)``, keys ``(...,
    n_k, d_k)``, values ``(..., n_k, d_v)``, indices and valid ``(..., n_q, k)`` (batch axes
    broadcast, e.g. one selection ``(..., 1, n_q, k)`` for every head) -> ``(..., n_q, d_v)``.
    Gathers ``n_q x k`` keys, never the ``n_q x n_k`` scores; a query with no valid key gets
    zeros."""
    queries, keys, values = (
        as_float_array(n, x) for n, x in (("queries", queries), ("keys", keys), ("values", values))
    )
    indices = np.asarray(indices)
    valid = np.ones(indices.shape, bool) if valid is None else np.asarray(valid, bool)
    _checks_linear.sparse_inputs(queries, keys, values, indices, valid)
    picked_k = np.take_along_axis(
        keys[..., None, :, :], indices[..., None], axis=-2
    )  # (..., n_q, k, d_k)
    picked_v = np.take_along_axis(values[..., None, :, :], indices[..., None], axis=-2)
    scale = 1.0 / np.sqrt(queries.shape[-1]) if scale is None else scale
    scores = np.einsum("...qd,...qkd->...qk", queries, picked_k) * scale
    scores = np.where(valid, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(
        scores - np.where(np.isfinite(top), top, 0.0)
    )  # exp(-inf) = 0: nothing left -> zeros
    total = weights.sum(axis=-1, keepdims=True)
    weights = weights / np.where(total > 0, total, 1.0)
    return np.einsum("...qk,...qkd->...qd", weights, picked_v)

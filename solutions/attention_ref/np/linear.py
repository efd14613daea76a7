"""Lesson 13, Linear attention (Katharopoulos et al., 2020, section 3) -- NumPy reference.

Eq. (1) weighs value j by ``exp(q_i . k_j / sqrt(d_k))``, normalised over the keys. Replace that
similarity by a dot product of features, ``phi(q_i) . phi(k_j)`` with ``phi(x) = elu(x) + 1 > 0``
(their Eq. 7), and the output of query i,

    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j),

can be regrouped by associativity: ``phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j
phi(k_j))``. Causal, the two sums run over ``j <= i`` and grow by one term per position: a
recurrence over a ``d_f x d_v`` matrix ``S`` and a ``d_f`` vector ``z`` (their Eq. 10-12),

    S_i = S_{i-1} + phi(k_i) v_i^T,   z_i = z_{i-1} + phi(k_i),
    out_i = phi(q_i)^T S_i / phi(q_i)^T z_i,

the same numbers as the masked ``n x n`` form, at a cost per token and a memory that do not grow
with the text. ``linear_attention`` is the parallel (masked) form, ``linear_attention_recurrent``
the recurrence; the state it returns continues the recurrence (decoding one token at a time).
"""

from __future__ import annotations

import numpy as np

from .. import _checks_linear
from .retrieval import as_float_array

__all__ = ["elu_feature_map", "linear_attention", "linear_attention_recurrent"]


def elu_feature_map(x) -> np.ndarray:
    """``elu(x) + 1``: ``x + 1`` for ``x > 0``, ``exp(x)`` otherwise; positive everywhere, so
    every similarity ``phi(q) . phi(k)`` is positive, like ``exp(q . k)``."""
    x = as_float_array("x", x)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(queries, keys, values, causal: bool = True, feature_map=None):
    """The parallel form: ``(M * phi(Q) phi(K)^T) V``, each row divided by its sum, ``M`` lesson
    3's causal mask (query i reads keys 0..i, top-left aligned) or all ones: ``(..., n_q, d_v)``.
    ``n x n`` numbers, like Eq. (1): what the recurrence avoids."""
    queries, keys, values = (
        as_float_array(n, x) for n, x in (("queries", queries), ("keys", keys), ("values", values))
    )
    _checks_linear.require_ndim("queries", queries, 2, "(..., n_q, d_k)")
    _checks_linear.require_ndim("values", values, 2, "(..., n_k, d_v)")
    _checks_linear.require_same_size("d_k", "queries", queries, -1, "keys", keys, -1)
    _checks_linear.require_same_size("n_k", "keys", keys, -2, "values", values, -2)
    feature_map = elu_feature_map if feature_map is None else feature_map
    similarity = feature_map(queries) @ np.swapaxes(feature_map(keys), -1, -2)
    if causal:
        similarity = np.tril(similarity)  # keys j > i get no weight
    return (similarity @ values) / similarity.sum(axis=-1, keepdims=True)


def linear_attention_recurrent(queries, keys, values, state=None, feature_map=None):
    """The causal recurrence, one position at a time: ``(out (..., n, d_v), (S, z))``.

    ``state`` is ``(S (..., d_f, d_v), z (..., d_f))`` from an earlier call (None: zeros), so a
    sequence fed in pieces, or one token at a time, gives what it gives whole. Position t's key
    and value enter the state *before* its query reads it: the query sees its own position, as
    the causal mask lets it. ``feature_map``: ``elu_feature_map`` when None."""
    queries, keys, values = (
        as_float_array(n, x) for n, x in (("queries", queries), ("keys", keys), ("values", values))
    )
    batch = _checks_linear.sequence_inputs(queries, keys, values)
    _checks_linear.linear_state(state, keys, values)
    feature_map = elu_feature_map if feature_map is None else feature_map
    phi_q, phi_k = feature_map(queries), feature_map(keys)
    dtype = np.result_type(phi_q, phi_k, values)
    if state is None:
        s = np.zeros(batch + (phi_k.shape[-1], values.shape[-1]), dtype)
        z = np.zeros(batch + (phi_k.shape[-1],), dtype)
    else:
        s, z = (np.array(part, dtype=dtype) for part in state)  # copies: the caller's stay
    out = np.empty(np.broadcast_shapes(batch, s.shape[:-2]) + values.shape[-2:], dtype)
    for t in range(keys.shape[-2]):
        s = s + phi_k[..., t, :, None] * values[..., t, None, :]  # write phi(k_t) v_t^T
        z = z + phi_k[..., t, :]
        numerator = np.einsum("...f,...fv->...v", phi_q[..., t, :], s)
        out[..., t, :] = numerator / np.einsum("...f,...f->...", phi_q[..., t, :], z)[..., None]
    return out, (s, z)

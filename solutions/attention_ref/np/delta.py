"""Lesson 13, The delta rule and the gated delta rule -- NumPy reference.

Linear attention only ever *adds* to its state, ``S += k v^T``: reading key ``k_i`` back gives
``v_i`` plus every other value weighted by its key's overlap with ``k_i``, and a ``d_k``-wide
state cannot hold more than ``d_k`` keys apart. The **delta rule** (Schlag et al., 2021,
section 4.2; Widrow and Hoff's rule as a fast-weight update) first reads what the state holds for
``k_t`` and writes only the difference, with a strength ``beta_t`` in ``[0, 1]``:

    S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T

(with ``beta_t = 1`` and ``|k_t| = 1``, the value stored under ``k_t`` is replaced).

The **gated delta rule** (Gated DeltaNet, Yang, Kautz and Hatamizadeh, 2025) also
forgets: the whole state decays by ``alpha_t = exp(log_decay_t)`` in ``[0, 1]`` first (0: a log
decay of ``-inf``, the state forgotten),

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,      out_t = S_t^T q_t .

``S`` is ``d_k x d_v`` (rows indexed by the key's features), as in Hugging Face's Qwen3-Next
(``torch_recurrent_gated_delta_rule``). Unlike it, nothing here normalises or scales the queries
and keys: a model does that before (Qwen3-Next: L2-normalised q and k, q times ``1/sqrt(d_k)``).

**Chunkwise.** The recurrence is one small step per token. Training computes it a chunk of ``C``
positions at a time with matrix products (Yang et al., 2024, section 3; Yang et al.,
2025). Inside a chunk entered with state ``S_0``, write ``gamma_t = alpha_1 ... alpha_t``
and ``u_t = beta_t (v_t - alpha_t S_{t-1}^T k_t)``, what step t adds; then ``S_t = gamma_t S_0 +
sum_{i<=t} (gamma_t / gamma_i) k_i u_i^T``, and the ``u`` solve one unit lower-triangular system,
with ``A_ti = beta_t (gamma_t / gamma_i) k_t . k_i`` for ``i < t`` (0 elsewhere),

    (I + A) U = diag(beta) (V - diag(gamma) K S_0),

so ``U = T (V - diag(gamma) K S_0)`` with ``T = (I + A)^{-1} diag(beta)``: the UT transform of the
WY representation (``ut_transform``). The chunk's outputs and its last state follow:

    O = diag(gamma) Q S_0 + (Q K^T * Gamma) U,     S_C = gamma_C S_0 + (K * gamma_C / gamma)^T U,

``Gamma_ti = gamma_t / gamma_i`` for ``i <= t``, 0 above the diagonal. ``gated_delta_rule_chunked``
equals ``gated_delta_rule_recurrent`` for every chunk size, a last partial chunk included.
"""

from __future__ import annotations

import numpy as np

from .. import _checks_linear
from .retrieval import as_float_array

__all__ = ["gated_delta_rule_recurrent", "ut_transform", "gated_delta_rule_chunked"]


def _inputs(queries, keys, values, beta, log_decay, initial_state):
    """The inputs as float arrays broadcast to one batch shape, log_decay 0 when None, and the
    state (zeros when None)."""
    arrays = [("queries", queries), ("keys", keys), ("values", values), ("beta", beta)]
    queries, keys, values, beta = (as_float_array(n, x) for n, x in arrays)
    log_decay = None if log_decay is None else as_float_array("log_decay", log_decay)
    state = None if initial_state is None else as_float_array("initial_state", initial_state)
    batch = _checks_linear.delta_inputs(queries, keys, values, beta, log_decay, state)
    if state is not None:
        batch = np.broadcast_shapes(batch, state.shape[:-2])
    n, (d_k, d_v) = keys.shape[-2], (keys.shape[-1], values.shape[-1])
    dtype = np.result_type(queries, keys, values, beta, *([] if state is None else [state]))
    q, k = (np.broadcast_to(x, batch + (n, d_k)).astype(dtype) for x in (queries, keys))
    v = np.broadcast_to(values, batch + (n, d_v)).astype(dtype)
    b = np.broadcast_to(beta, batch + (n,)).astype(dtype)
    g = (
        np.zeros(batch + (n,), dtype)
        if log_decay is None
        else np.broadcast_to(log_decay, batch + (n,))
    )
    s = (
        np.zeros(batch + (d_k, d_v), dtype)
        if state is None
        else np.broadcast_to(state, batch + (d_k, d_v))
    )
    return q, k, v, b, g.astype(dtype), s.astype(dtype)


def gated_delta_rule_recurrent(queries, keys, values, beta, log_decay=None, initial_state=None):
    """The gated delta rule one position at a time: ``(out (..., n, d_v), state (..., d_k, d_v))``.

    queries, keys ``(..., n, d_k)``; values ``(..., n, d_v)``; beta ``(..., n)``, the write
    strength; log_decay ``(..., n)``, ``log alpha_t <= 0`` (None: no decay, the plain delta rule);
    initial_state ``(..., d_k, d_v)`` (None: zeros). Batch axes broadcast. At each position: decay,
    read what the decayed state holds for ``k_t``, write ``beta_t`` of the difference, then read
    the output with ``q_t``."""
    q, k, v, b, g, s = _inputs(queries, keys, values, beta, log_decay, initial_state)
    out = np.empty(v.shape, v.dtype)
    for t in range(k.shape[-2]):
        s = s * np.exp(g[..., t])[..., None, None]  # forget: the old state decays first
        recalled = np.einsum("...k,...kv->...v", k[..., t, :], s)  # what S holds for k_t
        delta = b[..., t, None] * (v[..., t, :] - recalled)
        s = s + k[..., t, :, None] * delta[..., None, :]
        out[..., t, :] = np.einsum("...k,...kv->...v", q[..., t, :], s)
    return out, s


def _decay_matrix(log_decay) -> np.ndarray:
    """``Gamma_ti = gamma_t / gamma_i`` for ``i <= t`` and 0 above the diagonal, from the log
    decays of one chunk ``(..., C)``: ``exp(b_t - b_i)`` with ``b`` their running sum."""
    b = np.cumsum(log_decay, axis=-1)
    diff = b[..., :, None] - b[..., None, :]
    lower = np.tril(np.ones(diff.shape[-2:], dtype=bool))
    return np.exp(np.where(lower, diff, -np.inf))  # -inf above: exp gives 0, never an overflow


def ut_transform(keys, beta, log_decay=None) -> np.ndarray:
    """The UT transform of one chunk: ``T = (I + A)^{-1} diag(beta)``, ``(..., C, C)``, with
    ``A_ti = beta_t (gamma_t / gamma_i) k_t . k_i`` for ``i < t`` (strictly lower triangular).
    ``T V`` are the values the chunk's positions write, before the entering state's share is
    taken out (module docstring)."""
    keys, beta = as_float_array("keys", keys), as_float_array("beta", beta)
    log_decay = (
        np.zeros(beta.shape) if log_decay is None else as_float_array("log_decay", log_decay)
    )
    _checks_linear.ut_inputs(keys, beta, log_decay)
    c = keys.shape[-2]
    gram = keys @ np.swapaxes(keys, -1, -2) * _decay_matrix(log_decay)
    a = np.tril(beta[..., :, None] * gram, k=-1)
    eye = np.eye(c, dtype=a.dtype)
    return np.linalg.solve(
        eye + a, eye * beta[..., None, :]
    )  # unit lower triangular: always solvable


def _chunk(q, k, v, b, g, s):
    """One chunk entered with state ``s``: its outputs and the state it leaves."""
    cum = np.cumsum(g, axis=-1)
    gamma = np.exp(cum)  # gamma_t: the decay from the chunk's start through position t
    u = ut_transform(k, b, g) @ (v - gamma[..., None] * (k @ s))
    scores = np.tril(q @ np.swapaxes(k, -1, -2)) * _decay_matrix(g)
    out = gamma[..., None] * (q @ s) + scores @ u
    to_end = np.exp(cum[..., -1:] - cum)  # gamma_C / gamma_i: what decays after position i
    s = np.exp(cum[..., -1])[..., None, None] * s + np.swapaxes(k * to_end[..., None], -1, -2) @ u
    return out, s


def gated_delta_rule_chunked(
    queries, keys, values, beta, log_decay=None, chunk_size: int = 64, initial_state=None
):
    """The gated delta rule a chunk of ``chunk_size`` positions at a time (the last chunk may be
    shorter): the same ``(out, state)`` as ``gated_delta_rule_recurrent``, from matrix products
    inside each chunk and the state handed from one chunk to the next."""
    chunk_size = _checks_linear.chunk_size(chunk_size)
    q, k, v, b, g, s = _inputs(queries, keys, values, beta, log_decay, initial_state)
    outs = []
    for start in range(0, k.shape[-2], chunk_size):
        part = slice(start, start + chunk_size)
        out, s = _chunk(
            q[..., part, :], k[..., part, :], v[..., part, :], b[..., part], g[..., part], s
        )
        outs.append(out)
    return (np.concatenate(outs, axis=-2) if outs else v.copy()), s

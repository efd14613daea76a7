"""Lesson 13, The delta rule and the gated delta rule -- PyTorch reference: the same functions as
``attention_ref.np.delta``, whose docstring derives the chunkwise form, device-agnostic.

Computed in float32 at least (float64 stays float64), as Hugging Face's Qwen3-Next does
(``torch_chunk_gated_delta_rule``, which the reference tests compare with); the output comes back
in the inputs' dtype, the state in the computing dtype. The UT transform solves its unit
lower-triangular system with ``torch.linalg.solve_triangular``.

Two forms beyond the NumPy twin's:

* ``gated_delta_rule_batched_chunks``: the chunkwise form as fast kernels organise it (Yang et
  al., 2024, section 3; flash-linear-attention's ``chunk_gated_delta_rule``). What a chunk needs
  that does not depend on the state entering it -- its UT transform ``T``, ``W = T diag(gamma) K``
  and ``T V`` -- is computed for **every chunk at once**, in batched products; only the hand-off
  of the state from chunk to chunk is sequential (``n / C`` small steps), and each chunk's
  outputs follow from the state that entered it. The text is padded to whole chunks with
  positions that write nothing (``beta = 0``) and forget nothing (``log_decay = 0``), as
  ``transformers`` pads it.
* ``kimi_delta_rule_recurrent``: Kimi Delta Attention's rule (Kimi Team, 2025), the gated delta
  rule with a decay **per key channel**: first ``S <- Diag(alpha_t) S`` (row c of S, key
  feature c, decays by ``alpha_tc``), then the delta rule's read and write, ``S_t = (I - beta_t
  k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T``; ``log_decay`` is ``(..., n, d_k)``."""

from __future__ import annotations

import torch

from .. import _checks_linear
from .retrieval import as_float_tensor

__all__ = [
    "gated_delta_rule_recurrent",
    "ut_transform",
    "gated_delta_rule_chunked",
    "gated_delta_rule_batched_chunks",
    "kimi_delta_rule_recurrent",
]


def _work_dtype(*tensors) -> torch.dtype:
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return torch.promote_types(dtype, torch.float32)


def _inputs(queries, keys, values, beta, log_decay, initial_state):
    """The inputs broadcast to one batch shape in the computing dtype, log_decay 0 when None,
    the state zeros when None; and the dtype of the output."""
    named = [("queries", queries), ("keys", keys), ("values", values), ("beta", beta)]
    queries, keys, values, beta = (as_float_tensor(n, x) for n, x in named)
    log_decay = None if log_decay is None else as_float_tensor("log_decay", log_decay)
    state = None if initial_state is None else as_float_tensor("initial_state", initial_state)
    batch = _checks_linear.delta_inputs(queries, keys, values, beta, log_decay, state)
    if state is not None:
        batch = torch.broadcast_shapes(batch, state.shape[:-2])
    out_dtype = values.dtype
    work = _work_dtype(queries, keys, values, beta, *([] if state is None else [state]))
    n, d_k, d_v = keys.shape[-2], keys.shape[-1], values.shape[-1]
    q, k = (x.to(work).expand(*batch, n, d_k) for x in (queries, keys))
    v, b = values.to(work).expand(*batch, n, d_v), beta.to(work).expand(*batch, n)
    g = v.new_zeros(*batch, n) if log_decay is None else log_decay.to(work).expand(*batch, n)
    s = v.new_zeros(*batch, d_k, d_v) if state is None else state.to(work).expand(*batch, d_k, d_v)
    return q, k, v, b, g, s, out_dtype


def gated_delta_rule_recurrent(queries, keys, values, beta, log_decay=None, initial_state=None):
    """The gated delta rule one position at a time: ``(out (..., n, d_v), state (..., d_k,
    d_v))``. See the NumPy twin."""
    q, k, v, b, g, s, out_dtype = _inputs(queries, keys, values, beta, log_decay, initial_state)
    steps = []
    for t in range(k.shape[-2]):
        s = s * g[..., t, None, None].exp()  # forget first
        recalled = (k[..., t, None, :] @ s).squeeze(-2)  # what S holds for k_t
        delta = b[..., t, None] * (v[..., t, :] - recalled)
        s = s + k[..., t, :, None] * delta[..., None, :]
        steps.append((q[..., t, None, :] @ s).squeeze(-2))
    out = torch.stack(steps, dim=-2) if steps else v.clone()
    return out.to(out_dtype), s


def _decay_matrix(log_decay) -> torch.Tensor:
    """``gamma_t / gamma_i`` for ``i <= t``, 0 above the diagonal: ``(..., C, C)``."""
    b = log_decay.cumsum(dim=-1)
    diff = b[..., :, None] - b[..., None, :]
    upper = torch.ones(diff.shape[-2:], dtype=torch.bool, device=diff.device).triu(1)
    return diff.masked_fill(upper, float("-inf")).exp()


def ut_transform(keys, beta, log_decay=None) -> torch.Tensor:
    """``T = (I + A)^{-1} diag(beta)`` of one chunk, ``(..., C, C)``, ``A_ti = beta_t (gamma_t /
    gamma_i) k_t . k_i`` for ``i < t``. See the NumPy twin."""
    keys, beta = as_float_tensor("keys", keys), as_float_tensor("beta", beta)
    log_decay = (
        torch.zeros_like(beta) if log_decay is None else as_float_tensor("log_decay", log_decay)
    )
    _checks_linear.ut_inputs(keys, beta, log_decay)
    work = _work_dtype(keys, beta, log_decay)
    keys, beta, log_decay = keys.to(work), beta.to(work), log_decay.to(work)
    gram = keys @ keys.transpose(-1, -2) * _decay_matrix(log_decay)
    a = (beta[..., :, None] * gram).tril(-1)
    eye = torch.eye(keys.shape[-2], dtype=work, device=keys.device)
    return torch.linalg.solve_triangular(
        eye + a, torch.diag_embed(beta), upper=False, unitriangular=True
    )


def _chunk(q, k, v, b, g, s):
    """One chunk entered with state ``s``: its outputs and the state it leaves."""
    cum = g.cumsum(dim=-1)
    gamma = cum.exp()
    u = ut_transform(k, b, g) @ (v - gamma[..., None] * (k @ s))
    scores = (q @ k.transpose(-1, -2)).tril() * _decay_matrix(g)
    out = gamma[..., None] * (q @ s) + scores @ u
    to_end = (cum[..., -1:] - cum).exp()
    s = cum[..., -1, None, None].exp() * s + (k * to_end[..., None]).transpose(-1, -2) @ u
    return out, s


def gated_delta_rule_chunked(
    queries, keys, values, beta, log_decay=None, chunk_size: int = 64, initial_state=None
):
    """The chunkwise-parallel gated delta rule: the same ``(out, state)`` as
    ``gated_delta_rule_recurrent``, for every ``chunk_size``. See the NumPy twin."""
    chunk_size = _checks_linear.chunk_size(chunk_size)
    q, k, v, b, g, s, out_dtype = _inputs(queries, keys, values, beta, log_decay, initial_state)
    outs = []
    for start in range(0, k.shape[-2], chunk_size):
        part = slice(start, start + chunk_size)
        out, s = _chunk(
            q[..., part, :], k[..., part, :], v[..., part, :], b[..., part], g[..., part], s
        )
        outs.append(out)
    out = torch.cat(outs, dim=-2) if outs else v.clone()
    return out.to(out_dtype), s


def _padded(q, k, v, b, g, chunk_size):
    """The inputs padded to whole chunks (padding writes nothing and forgets nothing) and split
    into them: ``(..., chunks, C, d)`` and ``(..., chunks, C)``."""
    pad = -k.shape[-2] % chunk_size
    q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    b, g = (torch.nn.functional.pad(x, (0, pad)) for x in (b, g))
    split = [x.unflatten(-2, (-1, chunk_size)) for x in (q, k, v)]
    return (*split, *(x.unflatten(-1, (-1, chunk_size)) for x in (b, g)))


def gated_delta_rule_batched_chunks(
    queries, keys, values, beta, log_decay=None, chunk_size: int = 64, initial_state=None
):
    """The chunkwise gated delta rule with every chunk's own work batched (module docstring):
    the same ``(out, state)`` as ``gated_delta_rule_recurrent``, for every ``chunk_size``."""
    chunk_size = _checks_linear.chunk_size(chunk_size)
    q, k, v, b, g, s, out_dtype = _inputs(queries, keys, values, beta, log_decay, initial_state)
    n = k.shape[-2]
    if n == 0:
        return v.clone().to(out_dtype), s
    q, k, v, b, g = _padded(q, k, v, b, g, chunk_size)
    cum = g.cumsum(dim=-1)  # (..., chunks, C): log gamma within each chunk
    gamma = cum.exp()
    t = ut_transform(k, b, g)  # every chunk's T at once
    w, tv = t @ (gamma[..., None] * k), t @ v  # U = T V - W S_0 for the state S_0 entering
    scores = (q @ k.transpose(-1, -2)).tril() * _decay_matrix(g)
    to_end = (cum[..., -1:] - cum).exp()[..., None] * k  # K * gamma_C / gamma
    outs = []
    for c in range(k.shape[-3]):  # the only sequential part: n / C state hand-offs
        u = tv[..., c, :, :] - w[..., c, :, :] @ s
        outs.append(gamma[..., c, :, None] * (q[..., c, :, :] @ s) + scores[..., c, :, :] @ u)
        s = gamma[..., c, -1, None, None] * s + to_end[..., c, :, :].transpose(-1, -2) @ u
    return torch.cat(outs, dim=-2)[..., :n, :].to(out_dtype), s


def kimi_delta_rule_recurrent(queries, keys, values, beta, log_decay, initial_state=None):
    """Kimi Delta Attention one position at a time: as ``gated_delta_rule_recurrent`` with
    ``log_decay`` ``(..., n, d_k)``, one decay per key channel: ``(out, state)``."""
    log_decay = as_float_tensor("log_decay", log_decay)
    if log_decay.ndim < 2 or log_decay.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"log_decay holds one decay per position and key channel, (..., n, d_k) with d_k = "
            f"{keys.shape[-1]}, got {tuple(log_decay.shape)}"
        )
    q, k, v, b, _, s, out_dtype = _inputs(queries, keys, values, beta, None, initial_state)
    g = log_decay.to(k.dtype).expand(*k.shape)
    steps = []
    for t in range(k.shape[-2]):
        s = s * g[..., t, :, None].exp()  # row c (key feature c) decays by alpha_tc
        recalled = (k[..., t, None, :] @ s).squeeze(-2)
        s = s + k[..., t, :, None] * (b[..., t, None] * (v[..., t, :] - recalled))[..., None, :]
        steps.append((q[..., t, None, :] @ s).squeeze(-2))
    out = torch.stack(steps, dim=-2) if steps else v.clone()
    return out.to(out_dtype), s

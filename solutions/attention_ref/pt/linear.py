"""Lesson 13, Linear attention (Katharopoulos et al., 2020) -- PyTorch reference: the same
functions as ``attention_ref.np.linear``, whose docstring explains them, device-agnostic. Half
precision is computed in float32 (the running sums lose digits fast in float16) and returned in
the inputs' dtype."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import _checks_linear
from .retrieval import as_float_tensor, same_dtype, upcast

__all__ = ["elu_feature_map", "linear_attention", "linear_attention_recurrent"]


def elu_feature_map(x) -> torch.Tensor:
    """``elu(x) + 1``, positive everywhere (Katharopoulos et al., 2020, Eq. 7)."""
    return F.elu(as_float_tensor("x", x)) + 1


def linear_attention(queries, keys, values, causal: bool = True, feature_map=None):
    """The parallel form, ``(M * phi(Q) phi(K)^T) V`` normalised by the rows' sums: ``(..., n_q,
    d_v)``. See the NumPy twin."""
    queries, keys, values = (
        as_float_tensor(n, x) for n, x in (("queries", queries), ("keys", keys), ("values", values))
    )
    same_dtype(queries=queries, keys=keys, values=values)
    _checks_linear.require_ndim("queries", queries, 2, "(..., n_q, d_k)")
    _checks_linear.require_ndim("values", values, 2, "(..., n_k, d_v)")
    _checks_linear.require_same_size("d_k", "queries", queries, -1, "keys", keys, -1)
    _checks_linear.require_same_size("n_k", "keys", keys, -2, "values", values, -2)
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    feature_map = elu_feature_map if feature_map is None else feature_map
    similarity = feature_map(queries) @ feature_map(keys).transpose(-1, -2)
    if causal:
        similarity = similarity.tril()
    return ((similarity @ values) / similarity.sum(dim=-1, keepdim=True)).to(dtype)


def linear_attention_recurrent(queries, keys, values, state=None, feature_map=None):
    """The causal recurrence: ``(out (..., n, d_v), (S (..., d_f, d_v), z (..., d_f)))``, the
    state in the computing dtype (float32 for half inputs). See the NumPy twin."""
    queries, keys, values = (
        as_float_tensor(n, x) for n, x in (("queries", queries), ("keys", keys), ("values", values))
    )
    same_dtype(queries=queries, keys=keys, values=values)
    batch = _checks_linear.sequence_inputs(queries, keys, values)
    _checks_linear.linear_state(state, keys, values)
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    feature_map = elu_feature_map if feature_map is None else feature_map
    phi_q, phi_k = feature_map(queries), feature_map(keys)
    if state is None:
        s = values.new_zeros(batch + (phi_k.shape[-1], values.shape[-1]))
        z = values.new_zeros(batch + (phi_k.shape[-1],))
    else:
        s, z = (part.to(values.dtype) for part in state)
    steps = []
    for t in range(keys.shape[-2]):
        s = s + phi_k[..., t, :, None] * values[..., t, None, :]  # write phi(k_t) v_t^T, then read
        z = z + phi_k[..., t, :]
        numerator = (phi_q[..., t, None, :] @ s).squeeze(-2)
        steps.append(numerator / (phi_q[..., t, :] * z).sum(dim=-1, keepdim=True))
    out = torch.stack(steps, dim=-2) if steps else values.new_empty(batch + values.shape[-2:])
    return out.to(dtype), (s, z)

"""Property tests (hypothesis) of lesson 9's tiled attention, with the corner cases of
test_numerical_properties.py (no keys, one key, empty batches, logits up to +-1e4, every float
dtype, fully masked rows) and any block size: it is Eq. (1), evaluated by
F.scaled_dot_product_attention in float64, with zeros for queries that may attend to nothing, and
never NaN or inf."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import attention_ref.np as rnp
import attention_ref.pt as rpt

from .test_numerical_properties import SETTINGS, _inputs, _truth, problems
from .tolerances import TOLERANCES


@SETTINGS
@given(p=problems(), block_size=st.sampled_from([1, 2, 3, 5, 64]))
def test_tiled_attention_is_eq1_for_any_block_size(device, p, block_size):
    q, k, v, mask = _inputs(p, device)
    out, lse = rpt.tiled_attention(q, k, v, mask=mask, block_size=block_size, return_lse=True)
    assert out.dtype == p["dtype"] and out.device == q.device
    assert torch.isfinite(out).all(), p
    torch.testing.assert_close(out, _truth(q, k, v, mask).to(p["dtype"]), **TOLERANCES[p["dtype"]])
    scores = q.double() @ k.double().transpose(-1, -2) / p["d_k"] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf)
    want_lse = (
        torch.logsumexp(scores, dim=-1)
        if p["n_k"]
        else torch.full(scores.shape[:-1], -torch.inf, dtype=torch.float64, device=scores.device)
    )
    tol = max(1e-3, TOLERANCES[p["dtype"]]["rtol"])  # the lse is returned in the inputs' dtype
    torch.testing.assert_close(lse.double(), want_lse, rtol=tol, atol=tol)


@SETTINGS
@given(p=problems(), block_size=st.sampled_from([1, 3, 64]))
def test_numpy_tiled_attention_agrees(p, block_size):
    if p["dtype"] not in (torch.float64, torch.float32):
        return  # NumPy has no bfloat16, and the course computes half precision in PyTorch
    q, k, v, mask = _inputs(p, "cpu")
    np_mask = None if mask is None else mask.numpy()
    out = rnp.tiled_attention(q.numpy(), k.numpy(), v.numpy(), mask=np_mask, block_size=block_size)
    assert np.isfinite(out).all() and out.dtype == q.numpy().dtype
    np.testing.assert_allclose(out, _truth(q, k, v, mask).numpy(), **TOLERANCES[p["dtype"]])

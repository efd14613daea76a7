"""Linear attention (lesson 13; Katharopoulos et al., 2020) against PyTorch: the parallel form
against its definition written out with ``F.elu`` and a loop over the queries, the recurrence
against the parallel form (whole, in pieces and one token at a time, through the state it
returns), NumPy against PyTorch, dtypes x devices, on PyTorch's meta device; the recurrence's
memory does not grow with the text; bad input refused with the shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.profiling import peak_memory
from attention_ref.testing import expect_device_agnostic

from .test_sdpa_reference import _randn
from .tolerances import FLOAT_DTYPES, TOLERANCES

SHAPES = [((), 1, 1, 1), ((2,), 7, 4, 3), ((2, 3), 9, 8, 5), ((1,), 16, 2, 6)]  # batch, n, d_k, d_v


def _written_out(q, k, v, causal):
    """out_i = sum_j sim(q_i, k_j) v_j / sum_j sim(q_i, k_j), sim = (elu(q) + 1) . (elu(k) + 1),
    over j <= i when causal: one query at a time, in float64."""
    q, k, v = (x.double() for x in (q, k, v))
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    rows = []
    for i in range(q.shape[-2]):
        upto = i + 1 if causal else k.shape[-2]
        sim = (phi_q[..., i : i + 1, :] * phi_k[..., :upto, :]).sum(-1)  # (..., upto)
        rows.append((sim[..., None] * v[..., :upto, :]).sum(-2) / sim.sum(-1, keepdim=True))
    return torch.stack(rows, dim=-2)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("batch, n, d_k, d_v", SHAPES, ids=str)
def test_linear_attention_is_its_definition(device, dtype, batch, n, d_k, d_v):
    q, k = (_randn(batch + (n, d_k), dtype, device, seed=s) for s in (1, 2))
    v = _randn(batch + (n, d_v), dtype, device, seed=3)
    for causal in (True, False):
        got = rpt.linear_attention(q, k, v, causal=causal)
        assert got.dtype == dtype and got.device == q.device
        want = _written_out(q, k, v, causal).to(dtype)
        torch.testing.assert_close(got, want, **TOLERANCES[dtype])
        if dtype in (torch.float32, torch.float64):
            np_got = rnp.linear_attention(*(x.cpu().numpy() for x in (q, k, v)), causal=causal)
            np.testing.assert_allclose(np_got, want.cpu().numpy(), **TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("batch, n, d_k, d_v", SHAPES, ids=str)
def test_the_recurrence_equals_the_masked_parallel_form(device, dtype, batch, n, d_k, d_v):
    q, k = (_randn(batch + (n, d_k), dtype, device, seed=s) for s in (4, 5))
    v = _randn(batch + (n, d_v), dtype, device, seed=6)
    parallel = rpt.linear_attention(q, k, v)
    whole, (s, z) = rpt.linear_attention_recurrent(q, k, v)
    assert whole.dtype == dtype and whole.device == q.device
    assert s.shape == batch + (d_k, d_v) and z.shape == batch + (d_k,)
    torch.testing.assert_close(whole, parallel, **TOLERANCES[dtype])
    state, steps = None, []
    for t in range(n):  # one token at a time, the state handed on: decoding
        out, state = rpt.linear_attention_recurrent(
            q[..., t : t + 1, :], k[..., t : t + 1, :], v[..., t : t + 1, :], state
        )
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=-2), parallel, **TOLERANCES[dtype])
    if dtype in (torch.float32, torch.float64):
        np_q, np_k, np_v = (x.cpu().numpy() for x in (q, k, v))
        cut = n // 2  # in two pieces
        first, np_state = rnp.linear_attention_recurrent(
            np_q[..., :cut, :], np_k[..., :cut, :], np_v[..., :cut, :]
        )
        rest, _ = rnp.linear_attention_recurrent(
            np_q[..., cut:, :], np_k[..., cut:, :], np_v[..., cut:, :], np_state
        )
        np.testing.assert_allclose(
            np.concatenate([first, rest], axis=-2), parallel.cpu().numpy(), **TOLERANCES[dtype]
        )


def test_the_state_holds_the_sums_of_the_keys_and_values():
    """S = sum_j phi(k_j) v_j^T and z = sum_j phi(k_j): the whole memory of the text."""
    g = torch.Generator().manual_seed(7)
    q, k, v = (
        torch.randn(5, 3, generator=g),
        torch.randn(5, 3, generator=g),
        torch.randn(5, 2, generator=g),
    )
    _, (s, z) = rpt.linear_attention_recurrent(q, k, v)
    phi_k = F.elu(k) + 1
    torch.testing.assert_close(s, phi_k.T @ v)
    torch.testing.assert_close(z, phi_k.sum(0))


def test_the_recurrence_keeps_no_n_by_n_matrix():
    """The parallel form holds the n x n similarities; the recurrence a d_k x d_v state."""
    r = np.random.default_rng(8)
    q, k, v = r.normal(size=(1024, 8)), r.normal(size=(1024, 8)), r.normal(size=(1024, 8))
    _, parallel_peak = peak_memory(rnp.linear_attention, q, k, v)
    _, recurrent_peak = peak_memory(rnp.linear_attention_recurrent, q, k, v)
    assert parallel_peak > 1024 * 1024 * 8  # the similarities, float64
    assert recurrent_peak < 8 * q.nbytes, (recurrent_peak, q.nbytes)  # features, outputs: O(n d)


def test_linear_attention_is_device_agnostic(device):
    q, k, v = (torch.randn(2, 6, 4, device=device) for _ in range(3))
    out = expect_device_agnostic(rpt.linear_attention, q, k, v, what="linear_attention")
    assert out is not None and out.shape == (2, 6, 4)
    result = expect_device_agnostic(rpt.linear_attention_recurrent, q, k, v, what="recurrent")
    assert result is not None and result[0].shape == (2, 6, 4) and result[1][0].shape == (2, 4, 4)


def _t(*shape):
    return torch.ones(shape)


BAD_INPUTS = [
    ("d_k differs", lambda: rpt.linear_attention(_t(3, 4), _t(3, 5), _t(3, 2)), "d_k"),
    ("n_k of keys and values", lambda: rpt.linear_attention(_t(3, 4), _t(3, 4), _t(2, 2)), "n_k"),
    (
        "n of q and k",
        lambda: rnp.linear_attention_recurrent(np.ones((3, 4)), np.ones((2, 4)), np.ones((2, 2))),
        "sequence length",
    ),
    (
        "a state of the wrong width",
        lambda: rpt.linear_attention_recurrent(_t(3, 4), _t(3, 4), _t(3, 2), (_t(4, 3), _t(4))),
        "state",
    ),
    (
        "a state that is not a pair",
        lambda: rpt.linear_attention_recurrent(_t(3, 4), _t(3, 4), _t(3, 2), _t(4, 2)),
        "pair",
    ),
]


@pytest.mark.parametrize("what, bad, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_linear_inputs_are_refused_with_the_shapes(what, bad, match):
    with pytest.raises(ValueError, match=match):
        bad()

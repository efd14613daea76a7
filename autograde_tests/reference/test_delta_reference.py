"""The delta rule and the gated delta rule (lesson 13) against Hugging Face's own: the recurrent
and the chunkwise forms against ``torch_recurrent_gated_delta_rule`` and
``torch_chunk_gated_delta_rule`` of ``transformers``' Qwen3-Next (their layout, their scaled
queries, an initial state, grouped key heads); the chunked form equal to the recurrence for every
chunk size, a last partial chunk included; NumPy against PyTorch; the UT transform against the
inverse it stands for; what the rule does to the state (an association overwritten, a state
forgotten), dtypes x devices, on PyTorch's meta device; bad input refused with the shapes.
``transformers`` is not needed elsewhere: on a bare GPU machine without it, its comparisons skip
with the reason."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic

from .test_sdpa_reference import _randn

DELTA_TOLERANCES = {
    torch.float32: dict(rtol=2e-5, atol=2e-5),
    torch.float64: dict(rtol=1e-9, atol=1e-10),
}


def _delta_inputs(batch, n, d_k, d_v, dtype, device, seed, decay=True):
    """Unit keys and queries, beta in (0, 1), log decays in (-1, 0): the ranges a model feeds."""
    gen = torch.Generator().manual_seed(seed)
    q, k = (
        F.normalize(torch.randn(batch + (n, d_k), generator=gen, dtype=torch.float64), dim=-1)
        for _ in range(2)
    )
    v = torch.randn(batch + (n, d_v), generator=gen, dtype=torch.float64)
    beta = torch.rand(batch + (n,), generator=gen, dtype=torch.float64)
    g = -torch.rand(batch + (n,), generator=gen, dtype=torch.float64) if decay else None
    move = lambda x: None if x is None else x.to(dtype=dtype, device=device)  # noqa: E731
    return tuple(move(x) for x in (q, k, v, beta, g))


def _hugging_face():
    qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    # without flash-linear-attention it says, once, that it runs its PyTorch reference: what we test
    logging.getLogger("transformers").setLevel(logging.ERROR)
    return qwen3_next.torch_recurrent_gated_delta_rule, qwen3_next.torch_chunk_gated_delta_rule


def _their_layout(x):
    """(batch, heads, n, ...) -> Hugging Face's (batch, n, heads, ...)."""
    return x.transpose(1, 2).contiguous()


@pytest.mark.parametrize("chunk_size", [1, 4, 16, 64])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "initial state"])
def test_both_forms_equal_transformers_qwen3_next(device, chunk_size, with_state):
    recurrent, chunked = _hugging_face()
    q, k, v, beta, g = _delta_inputs((2, 3), 37, 8, 6, torch.float32, device, seed=1)
    state = _randn((2, 3, 8, 6), torch.float32, device, seed=2) if with_state else None
    args = [_their_layout(x) for x in (q, k, v, g, beta)]  # theirs: (q, k, v, g, beta)
    theirs, their_state = chunked(
        *args, chunk_size=chunk_size, initial_state=state, output_final_state=True
    )
    their_steps, their_last = recurrent(*args, initial_state=state, output_final_state=True)
    q_scaled = q * q.shape[-1] ** -0.5  # they scale the queries; the course leaves it to the model
    for name, fn in (
        ("recurrent", rpt.gated_delta_rule_recurrent),
        ("chunked", rpt.gated_delta_rule_chunked),
    ):
        extra = {"chunk_size": chunk_size} if name == "chunked" else {}
        out, last = fn(q_scaled, k, v, beta, g, initial_state=state, **extra)
        assert out.device == q.device and out.dtype == torch.float32
        torch.testing.assert_close(
            out, _their_layout(theirs), **DELTA_TOLERANCES[torch.float32], msg=name
        )
        torch.testing.assert_close(
            out, _their_layout(their_steps), **DELTA_TOLERANCES[torch.float32], msg=name
        )
        torch.testing.assert_close(last, their_state, **DELTA_TOLERANCES[torch.float32], msg=name)
        torch.testing.assert_close(last, their_last, **DELTA_TOLERANCES[torch.float32], msg=name)


def test_grouped_key_heads_as_transformers_shares_them():
    """Qwen3-Next has 16 query/key heads for 32 value heads: each key head serves two
    consecutive value heads (repeat_interleave), which the course's broadcasting expresses."""
    recurrent, _ = _hugging_face()
    q, k, _, _, _ = _delta_inputs((1, 2), 9, 4, 3, torch.float32, "cpu", seed=3)
    _, _, v, beta, g = _delta_inputs((1, 4), 9, 4, 3, torch.float32, "cpu", seed=4)
    theirs, _ = recurrent(*(_their_layout(x) for x in (q, k, v, g, beta)))
    mine, _ = rpt.gated_delta_rule_recurrent(
        (q * 0.5).repeat_interleave(2, dim=1), k.repeat_interleave(2, dim=1), v, beta, g
    )
    torch.testing.assert_close(mine, _their_layout(theirs), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("decay", [True, False], ids=["gated", "plain delta rule"])
def test_chunked_equals_recurrent_for_every_chunk_size(device, dtype, decay):
    n = 13
    q, k, v, beta, g = _delta_inputs((2,), n, 5, 3, dtype, device, seed=5, decay=decay)
    state = _randn((2, 5, 3), dtype, device, seed=6)
    want, want_state = rpt.gated_delta_rule_recurrent(q, k, v, beta, g, initial_state=state)
    for chunk_size in range(1, n + 3):  # n + 1, n + 2: one chunk, shorter than its size
        got, got_state = rpt.gated_delta_rule_chunked(q, k, v, beta, g, chunk_size, state)
        torch.testing.assert_close(got, want, **DELTA_TOLERANCES[dtype], msg=f"chunk {chunk_size}")
        torch.testing.assert_close(
            got_state, want_state, **DELTA_TOLERANCES[dtype], msg=f"chunk {chunk_size}"
        )
    np_in = [None if x is None else x.cpu().numpy() for x in (q, k, v, beta, g, state)]
    np_want, np_state = rnp.gated_delta_rule_recurrent(*np_in)
    np.testing.assert_allclose(np_want, want.cpu().numpy(), rtol=1e-5, atol=1e-6)
    for chunk_size in (1, 3, 5, n):
        np_got, np_got_state = rnp.gated_delta_rule_chunked(*np_in[:5], chunk_size, np_in[5])
        np.testing.assert_allclose(np_got, np_want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np_got_state, np_state, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_batched_chunks_equal_the_recurrence_for_every_chunk_size(device, dtype):
    """Every chunk's own work batched, the state handed on sequentially (padding to whole chunks
    writes and forgets nothing): the recurrence's outputs and last state, from zeros or a state."""
    n = 13
    q, k, v, beta, g = _delta_inputs((2, 2), n, 5, 3, dtype, device, seed=15)
    state = _randn((2, 2, 5, 3), dtype, device, seed=16)
    for initial in (None, state):
        want, want_state = rpt.gated_delta_rule_recurrent(q, k, v, beta, g, initial_state=initial)
        for chunk_size in (1, 2, 4, 5, n, n + 3):
            got, got_state = rpt.gated_delta_rule_batched_chunks(
                q, k, v, beta, g, chunk_size, initial_state=initial
            )
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want, **DELTA_TOLERANCES[dtype])
            torch.testing.assert_close(got_state, want_state, **DELTA_TOLERANCES[dtype])
    nothing = [x[..., :0, :] for x in (q, k, v)] + [x[..., :0] for x in (beta, g)]
    empty, empty_state = rpt.gated_delta_rule_batched_chunks(*nothing)
    assert empty.shape == (2, 2, 0, 3) and (empty_state == 0).all()


def test_kimi_delta_rule_is_the_gated_rule_with_a_decay_per_channel(device):
    """One decay per key channel: equal to the gated delta rule when every channel decays alike,
    to a loop over the transition (I - beta k k^T) Diag(alpha) written out otherwise."""
    q, k, v, beta, g = _delta_inputs((2,), 7, 4, 3, torch.float64, device, seed=17)
    alike, alike_state = rpt.kimi_delta_rule_recurrent(q, k, v, beta, g[..., None].expand(2, 7, 4))
    want, want_state = rpt.gated_delta_rule_recurrent(q, k, v, beta, g)
    torch.testing.assert_close(alike, want)
    torch.testing.assert_close(alike_state, want_state)
    per_channel = -torch.rand(
        2, 7, 4, generator=torch.Generator().manual_seed(18), dtype=torch.float64
    )
    per_channel = per_channel.to(device)
    got, got_state = rpt.kimi_delta_rule_recurrent(q, k, v, beta, per_channel)
    s = torch.zeros(2, 4, 3, dtype=torch.float64, device=device)
    eye = torch.eye(4, dtype=torch.float64, device=device)
    for t in range(7):
        kt = k[:, t, :, None]
        transition = (eye - beta[:, t, None, None] * kt @ kt.transpose(-1, -2)) @ torch.diag_embed(
            per_channel[:, t].exp()
        )
        s = transition @ s + beta[:, t, None, None] * kt @ v[:, t, None, :]
        torch.testing.assert_close(got[:, t], (q[:, t, None, :] @ s).squeeze(-2))
    torch.testing.assert_close(got_state, s)
    with pytest.raises(ValueError, match="key channel"):
        rpt.kimi_delta_rule_recurrent(q, k, v, beta, g)


def test_half_precision_is_computed_in_float32(device):
    q, k, v, beta, g = _delta_inputs((2,), 11, 4, 4, torch.float32, device, seed=7)
    want, _ = rpt.gated_delta_rule_recurrent(q, k, v, beta, g)
    for dtype in (torch.float16, torch.bfloat16):
        got, state = rpt.gated_delta_rule_chunked(
            *(x.to(dtype) for x in (q, k, v, beta, g)), chunk_size=4
        )
        assert got.dtype == dtype and state.dtype == torch.float32
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


def test_beta_one_overwrites_one_association_and_keeps_the_others():
    """Orthonormal keys: the delta rule with beta = 1 replaces the value stored under a key that
    comes again, and reading another key gives its own value back, untouched."""
    keys = torch.eye(4, dtype=torch.float64)[[0, 1, 2, 1]]  # key 1 written twice
    values = torch.arange(8, dtype=torch.float64).reshape(4, 2)
    _, state = rpt.gated_delta_rule_recurrent(
        keys, keys, values, torch.ones(4, dtype=torch.float64)
    )
    torch.testing.assert_close(state[1], values[3])  # overwritten by the second write
    torch.testing.assert_close(state[[0, 2]], values[[0, 2]])
    _, added = rpt.linear_attention_recurrent(keys, keys, values, feature_map=lambda x: x)
    torch.testing.assert_close(added[0][1], values[1] + values[3])  # linear attention adds them


def test_a_log_decay_of_minus_infinity_forgets_everything_before():
    q, k, v, beta, g = _delta_inputs((), 8, 4, 3, torch.float64, "cpu", seed=8)
    g = g.clone()
    g[5] = float("-inf")
    out, _ = rpt.gated_delta_rule_recurrent(q, k, v, beta, g)
    fresh, _ = rpt.gated_delta_rule_recurrent(q[5:], k[5:], v[5:], beta[5:])
    torch.testing.assert_close(out[5], fresh[0])


@pytest.mark.parametrize("chunk", [1, 2, 6])
def test_the_ut_transform_is_the_inverse_it_stands_for(device, chunk):
    _, k, _, beta, g = _delta_inputs((3,), chunk, 4, 2, torch.float64, device, seed=9)
    gamma = g.cumsum(-1).exp()
    a = torch.zeros(3, chunk, chunk, dtype=torch.float64, device=device)
    for t in range(chunk):
        for i in range(t):
            a[:, t, i] = beta[:, t] * gamma[:, t] / gamma[:, i] * (k[:, t] * k[:, i]).sum(-1)
    want = torch.linalg.inv(
        torch.eye(chunk, dtype=torch.float64, device=device) + a
    ) @ torch.diag_embed(beta)
    torch.testing.assert_close(rpt.ut_transform(k, beta, g), want)
    np.testing.assert_allclose(
        rnp.ut_transform(*(x.cpu().numpy() for x in (k, beta, g))), want.cpu().numpy()
    )


def test_the_delta_rules_are_device_agnostic(device):
    q, k, v, beta, g = _delta_inputs((2,), 9, 4, 3, torch.float32, device, seed=10)
    for name, fn, args in (
        ("recurrent", rpt.gated_delta_rule_recurrent, (q, k, v, beta, g)),
        ("chunked", rpt.gated_delta_rule_chunked, (q, k, v, beta, g, 4)),
    ):
        result = expect_device_agnostic(fn, *args, what=name)
        assert result is not None and result[0].shape == (2, 9, 3) and result[1].shape == (2, 4, 3)
    ut = expect_device_agnostic(rpt.ut_transform, k, beta, g, what="ut_transform")
    assert ut is not None and ut.shape == (2, 9, 9)


def _t(*shape):
    return torch.ones(shape)


BAD_INPUTS = [
    (
        "beta of another length",
        lambda: rpt.gated_delta_rule_recurrent(_t(3, 4), _t(3, 4), _t(3, 2), _t(4)),
        "beta",
    ),
    (
        "log_decay of another length",
        lambda: rpt.gated_delta_rule_chunked(_t(3, 4), _t(3, 4), _t(3, 2), _t(3), _t(2)),
        "log_decay",
    ),
    (
        "a state (d_v, d_k)",
        lambda: rnp.gated_delta_rule_recurrent(
            np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 2)), np.ones(3), None, np.ones((2, 4))
        ),
        "initial_state",
    ),
    (
        "chunk size 0",
        lambda: rpt.gated_delta_rule_chunked(_t(3, 4), _t(3, 4), _t(3, 2), _t(3), None, 0),
        "chunk_size",
    ),
    (
        "queries of another width",
        lambda: rnp.gated_delta_rule_chunked(
            np.ones((3, 5)), np.ones((3, 4)), np.ones((3, 2)), np.ones(3)
        ),
        "d_k",
    ),
    (
        "batches that do not broadcast",
        lambda: rpt.gated_delta_rule_recurrent(_t(2, 3, 4), _t(3, 3, 4), _t(3, 3, 2), _t(3)),
        "broadcast",
    ),
]


@pytest.mark.parametrize("what, bad, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_delta_inputs_are_refused_with_the_shapes(what, bad, match):
    with pytest.raises(ValueError, match=match):
        bad()

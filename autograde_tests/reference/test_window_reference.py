"""Sliding windows, the rolling cache and attention sinks (lesson 12) against PyTorch: the mask
against the one ``flex_attention`` derives from the same rule, and ``flex_attention`` with its
block mask against attention with the library's mask; the ring-buffer cache and the sink cache,
step by step, against ``F.scaled_dot_product_attention`` over the whole sequence (dtypes x devices,
grouped heads included, on PyTorch's meta device); the reach of stacked windows against the reach
measured by changing one input at a time (lesson 5's method)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic

from .test_sdpa_reference import _randn
from .tolerances import FLOAT_DTYPES, TOLERANCES

WINDOWS = [(1, 1, 0), (9, 3, 0), (12, 4, 2), (10, 12, 0), (16, 5, 1), (7, 2, 7)]  # n, window, sinks


def _written_out(n, window, sinks):
    return np.array(
        [[j <= i and (i - window < j or j < sinks) for j in range(n)] for i in range(n)]
    )


@pytest.mark.parametrize("n, window, sinks", WINDOWS)
def test_sliding_window_mask_is_the_band_and_the_sinks(n, window, sinks):
    want = _written_out(n, window, sinks)
    np.testing.assert_array_equal(rnp.sliding_window_mask(n, window, sinks), want)
    np.testing.assert_array_equal(rpt.sliding_window_mask(n, window, sinks).numpy(), want)
    if window >= n and not sinks:
        np.testing.assert_array_equal(want, rnp.causal_mask(n))


def _rule(window, sinks):
    def allowed(batch, head, q_idx, kv_idx):
        return (kv_idx <= q_idx) & ((q_idx - kv_idx < window) | (kv_idx < sinks))

    return allowed


@pytest.mark.parametrize("window, sinks", [(64, 0), (100, 4), (1, 0)])
def test_flex_attention_with_its_block_mask_equals_the_windowed_mask(device, window, sinks):
    """PyTorch's flex_attention (eager off a GPU: PyTorch warns that it is not compiled) with the
    block mask of the same rule computes attention with the library's mask: the whole sequence at
    once, and step by step through the library's caches (grouped heads included)."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    n = 256
    rule = _rule(window, sinks)
    mask = rpt.sliding_window_mask(n, window, sinks, device=device)
    dense = flex.create_mask(rule, None, None, n, n, device=device.type)[0, 0]
    assert torch.equal(dense, mask)
    q = _randn((1, 4, n, 16), torch.float32, device, seed=1)
    k, v = (_randn((1, 2, n, 16), torch.float32, device, seed=s) for s in (2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex_attention called without torch.compile()
        blocks = flex.create_block_mask(rule, None, None, n, n, device=device.type)
        flexed = flex.flex_attention(q, k, v, block_mask=blocks, enable_gqa=True)
    torch.testing.assert_close(
        flexed,
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
        rtol=1e-5,
        atol=1e-5,
    )
    if window >= 64:  # the blocks past the window are never computed
        assert blocks.sparsity() > 0
    steps = _decode(q[..., :40, :], k[..., :40, :], v[..., :40, :], window, sinks)
    torch.testing.assert_close(steps, flexed[..., :40, :], rtol=1e-5, atol=1e-5)


def _decode(q, k, v, window, sinks):
    """The sequence fed one position at a time through the library's cache for (window, sinks)."""
    cache = (
        {}
        if sinks
        else rpt.empty_rolling_cache(
            q.shape[0], k.shape[1], window, k.shape[-1], v.shape[-1], dtype=q.dtype, device=q.device
        )
    )
    steps = []
    for t in range(q.shape[-2]):
        one = [x[..., t : t + 1, :] for x in (q, k, v)]
        if sinks:
            steps.append(rpt.sink_cache_attention(*one, cache, sinks, window))
        else:
            steps.append(rpt.rolling_cache_attention(*one, cache, t))
    return torch.cat(steps, dim=-2)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("n, window, sinks", WINDOWS)
@pytest.mark.parametrize("heads", [(3, 3), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
def test_caches_step_by_step_equal_attention_over_the_whole_sequence(
    device, dtype, n, window, sinks, heads
):
    h, g = heads
    q = _randn((2, h, n, 8), dtype, device, seed=4)
    k, v = (_randn((2, g, n, w), dtype, device, seed=s) for s, w in ((5, 8), (6, 3)))
    mask = rpt.sliding_window_mask(n, window, sinks, device=device)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    got = _decode(q, k, v, window, sinks)
    assert got.dtype == dtype and got.device == q.device
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    if dtype in (torch.float32, torch.float64):
        np_q, np_k, np_v = (x.cpu().numpy() for x in (q, k, v))
        cache = {} if sinks else rnp.empty_rolling_cache(2, g, window, 8, 3, dtype=np_q.dtype)
        steps = []
        for t in range(n):
            one = [x[..., t : t + 1, :] for x in (np_q, np_k, np_v)]
            step = (
                rnp.sink_cache_attention(*one, cache, sinks, window)
                if sinks
                else rnp.rolling_cache_attention(*one, cache, t)
            )
            steps.append(step)
        np.testing.assert_allclose(
            np.concatenate(steps, axis=-2), want.cpu().numpy(), **TOLERANCES[dtype]
        )


def test_the_ring_buffer_is_written_in_place_and_never_grows(device):
    cache = rpt.empty_rolling_cache(1, 2, 4, 8, 8, device=device)
    pointers = cache["k"].data_ptr(), cache["v"].data_ptr()
    x = torch.randn(1, 2, 11, 8, device=device)
    for t in range(11):
        rpt.rolling_cache_attention(
            x[..., t : t + 1, :], x[..., t : t + 1, :], x[..., t : t + 1, :], cache, t
        )
    assert (cache["k"].data_ptr(), cache["v"].data_ptr()) == pointers and cache["k"].shape[-2] == 4
    slots = [p % 4 for p in range(7, 11)]  # positions 7 .. 10 hold the four slots
    torch.testing.assert_close(cache["k"][..., slots, :], x[..., 7:11, :])


def test_the_sink_cache_keeps_the_first_and_the_last(device):
    x = torch.randn(1, 1, 12, 4, device=device)
    cache = {}
    for t in range(12):
        rpt.sink_cache_attention(
            x[..., t : t + 1, :], x[..., t : t + 1, :], x[..., t : t + 1, :], cache, 2, 3
        )
    torch.testing.assert_close(cache["k"], x[..., [0, 1, 9, 10, 11], :])


def test_the_caches_are_device_agnostic(device):
    q = torch.randn(2, 4, 1, 8, device=device)
    kv = torch.randn(2, 2, 1, 8, device=device)
    ring = rpt.empty_rolling_cache(2, 2, 5, 8, device=device)
    out = expect_device_agnostic(rpt.rolling_cache_attention, q, kv, kv, ring, 7, what="rolling")
    assert out is not None and out.shape == (2, 4, 1, 8)
    sinks = {
        "k": torch.randn(2, 2, 6, 8, device=device),
        "v": torch.randn(2, 2, 6, 8, device=device),
    }
    out = expect_device_agnostic(rpt.sink_cache_attention, q, kv, kv, sinks, 2, 4, what="sinks")
    assert out is not None and out.shape == (2, 4, 1, 8)
    mask = expect_device_agnostic(
        rpt.sliding_window_mask, 5, 2, what="mask", device=torch.device("meta")
    )
    assert mask is not None and mask.device.type == "meta"


def _measured_reach(n, window, layers, seed=0):
    """Lesson 5's method: which outputs of stacked windowed self-attention layers (with residual
    connections) move when one input moves."""
    r = np.random.default_rng(seed)
    params = [rnp.init_params(8, 2, r) for _ in range(layers)]
    mask = rnp.sliding_window_mask(n, window)

    def stack(x):
        for p in params:
            x = x + rnp.multi_head_attention(x, x, x, p, 2, mask)
        return x

    inputs = r.normal(size=(n, 8))
    before = stack(inputs)
    reach = np.zeros((n, n), dtype=bool)
    for j in range(n):
        changed = inputs.copy()
        changed[j] += 1.0
        reach[:, j] = ~np.isclose(stack(changed), before, atol=1e-12).all(axis=1)
    return reach


@pytest.mark.parametrize(
    "n, window, layers", [(10, 3, 1), (12, 3, 2), (14, 4, 3), (8, 1, 4), (9, 9, 2)]
)
def test_window_reach_is_the_measured_reach(n, window, layers):
    want = _measured_reach(n, window, layers)
    np.testing.assert_array_equal(rnp.window_reach(n, window, layers), want)
    np.testing.assert_array_equal(rpt.window_reach(n, window, layers).numpy(), want)


def test_window_reach_grows_by_the_window_less_one_per_layer():
    for layers in range(0, 6):
        reach = rnp.window_reach(60, 5, layers)
        assert int(np.argmax(reach[59])) == max(0, 59 - layers * 4)
    assert rnp.window_reach(300, 20, 40).sum() == 300 * 301 // 2  # 0/1 entries: no overflow


def _step(cache_heads, new_positions, position=0):
    """A rolling-cache step with a query of 2 heads, k and v of ``new_positions`` positions, and
    a cache of ``cache_heads`` heads."""
    new = torch.ones(1, 2, new_positions, 4)
    cache = rpt.empty_rolling_cache(1, cache_heads, 3, 4)
    return rpt.rolling_cache_attention(torch.ones(1, 2, 1, 4), new, new, cache, position)


BAD = [
    ("window 0", lambda: rnp.sliding_window_mask(5, 0), "window"),
    ("n -1", lambda: rpt.sliding_window_mask(-1, 3), "n must"),
    ("sinks -1", lambda: rnp.sliding_window_mask(5, 2, -1), "num_sinks"),
    ("layers -1", lambda: rnp.window_reach(5, 2, -1), "num_layers"),
    ("2 new positions", lambda: _step(2, 2), "one new position"),
    ("3-head cache", lambda: _step(3, 1), "the cache holds"),
    ("position -1", lambda: _step(2, 1, -1), "position"),
]


@pytest.mark.parametrize("what, bad, match", BAD, ids=[b[0] for b in BAD])
def test_bad_window_inputs_are_refused(what, bad, match):
    with pytest.raises(ValueError, match=match):
        bad()

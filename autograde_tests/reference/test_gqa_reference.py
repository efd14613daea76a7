"""Grouped-query attention (lesson 12) against PyTorch: ``grouped_query_attention`` against
``F.scaled_dot_product_attention(..., enable_gqa=True)`` and against the repeated-heads form
(shapes x dtypes x devices x masks, fully masked rows included), without copies of the shared heads
(memory measured), on PyTorch's meta device; the KV bytes per token against the bytes of real
tensors; mean-pooling heads against a loop, and against attention itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.profiling import peak_memory
from attention_ref.testing import expect_device_agnostic, record_torch

from .test_sdpa_reference import _randn, _reference_sdpa
from .tolerances import FLOAT_DTYPES, TOLERANCES

GROUPED_SHAPES = [  # batch of the queries, batch of the keys, h, g, n_q, n_k
    ((), (), 1, 1, 1, 1),
    ((2,), (2,), 8, 2, 5, 7),
    ((3, 1), (1, 2), 6, 3, 4, 4),
    ((2,), (), 4, 1, 3, 9),  # multi-query attention, the keys broadcast over the batch
    ((1,), (1,), 4, 4, 6, 6),  # g = h: multi-head attention
]


def _grouped_masks(batch, h, n_q, n_k, device):
    gen = torch.Generator().manual_seed(3)
    yield "none", None
    yield "causal", torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q).to(device)
    per_head = torch.rand(batch + (h, n_q, n_k), generator=gen) > 0.3
    per_head[..., 0, :] = False  # a query with nothing to attend to, in every head
    yield "per head, a fully masked query", per_head.to(device)
    yield "one for all heads", (torch.rand(batch + (1, n_q, n_k), generator=gen) > 0.3).to(device)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", GROUPED_SHAPES, ids=str)
def test_grouped_query_attention_matches_torch(device, dtype, shape):
    batch_q, batch_k, h, g, n_q, n_k = shape
    q = _randn(batch_q + (h, n_q, 8), dtype, device, seed=1)
    k, v = (_randn(batch_k + (g, n_k, w), dtype, device, seed=s) for s, w in ((2, 8), (3, 5)))
    batch = tuple(torch.broadcast_shapes(batch_q, batch_k))
    for name, mask in _grouped_masks(batch, h, n_q, n_k, device):
        got = rpt.grouped_query_attention(q, k, v, mask)
        assert got.dtype == dtype and got.device == q.device, name
        repeated = _reference_sdpa(q, rpt.repeat_kv_heads(k, h), rpt.repeat_kv_heads(v, h), mask)
        torch.testing.assert_close(got, repeated, **TOLERANCES[dtype], msg=lambda m: f"{name}: {m}")
        if mask is None or bool(mask.any(dim=-1).all()):  # F.sdpa gives NaN for a masked query
            want = F.scaled_dot_product_attention(
                q,
                k.expand(batch + k.shape[-3:]),
                v.expand(batch + v.shape[-3:]),
                attn_mask=mask,
                enable_gqa=True,
            )
            torch.testing.assert_close(got, want, **TOLERANCES[dtype], msg=lambda m: f"{name}: {m}")
        if dtype in (torch.float32, torch.float64):
            np_mask = None if mask is None else mask.cpu().numpy()
            np_got = rnp.grouped_query_attention(*(t.cpu().numpy() for t in (q, k, v)), np_mask)
            np.testing.assert_allclose(np_got, repeated.cpu().numpy(), **TOLERANCES[dtype])


def test_query_heads_share_consecutively(device):
    """Query head i reads key/value head i // (h / g): with g = 2 of h = 4, heads 0 and 1 see
    only key/value head 0, whose values are all 1, and heads 2 and 3 only head 1's, all -1."""
    q = torch.randn(4, 3, 2, device=device)
    k = torch.randn(2, 5, 2, device=device)
    v = torch.stack([torch.ones(5, 1), -torch.ones(5, 1)]).to(device)
    out = rpt.grouped_query_attention(q, k, v)
    torch.testing.assert_close(out[:2], torch.ones(2, 3, 1, device=device))
    torch.testing.assert_close(out[2:], -torch.ones(2, 3, 1, device=device))
    assert rnp.repeat_kv_heads(np.arange(2.0).reshape(2, 1, 1), 4).ravel().tolist() == [0, 0, 1, 1]


def test_grouped_attention_copies_no_heads():
    """One decoding step of MQA over a long cache holds far less than the h copies of the keys
    that the repeated form makes, in NumPy (tracemalloc) and in PyTorch (its results' storage)."""
    q, k = np.random.default_rng(0).normal(size=(8, 1, 64)), np.ones((1, 4096, 64))
    _, peak = peak_memory(rnp.grouped_query_attention, q, k, k)
    assert peak < 2 * k.nbytes, f"{peak} bytes held; the keys alone take {k.nbytes}, copied 8 times"
    tq, tk = torch.randn(1, 8, 1, 32), torch.randn(1, 1, 2048, 32)
    _, ran = record_torch(rpt.grouped_query_attention, tq, tk, tk)
    assert ran.largest_bytes < 2 * tk.numel() * 4, ran.largest_bytes


def test_grouped_attention_is_device_agnostic(device):
    q, k = torch.randn(2, 6, 3, 4, device=device), torch.randn(2, 2, 5, 4, device=device)
    mask = torch.ones(3, 5, dtype=torch.bool, device=device).tril(2)
    out = expect_device_agnostic(rpt.grouped_query_attention, q, k, k, mask, what="gqa")
    assert out is not None and out.shape == (2, 6, 3, 4)
    pooled = expect_device_agnostic(
        rpt.mean_pool_kv_heads,
        torch.randn(8, 12, device=device),
        torch.randn(12, device=device),
        6,
        2,
        what="mean_pool_kv_heads",
    )
    assert pooled is not None and pooled[0].shape == (8, 4) and pooled[1].shape == (4,)


def _t(*shape):
    return torch.ones(shape)


def _a(*shape):
    return np.ones(shape)


gqa_pt, gqa_np = rpt.grouped_query_attention, rnp.grouped_query_attention
BAD_INPUTS = [
    ("6 query heads over 4", lambda: gqa_pt(_t(6, 2, 4), _t(4, 3, 4), _t(4, 3, 4)), "multiple"),
    ("d_k differs", lambda: gqa_pt(_t(4, 2, 4), _t(2, 3, 5), _t(2, 3, 4)), "d_k"),
    ("heads of k and v", lambda: gqa_pt(_t(4, 2, 4), _t(2, 3, 4), _t(1, 3, 4)), "key/value heads"),
    ("3-head mask", lambda: gqa_np(_a(4, 2, 4), _a(2, 3, 4), _a(2, 3, 4), _a(3, 2, 3) > 0), "mask"),
    ("repeat 3 heads to 4", lambda: rnp.repeat_kv_heads(_a(3, 2, 2), 4), "multiple"),
    ("10 columns in 4 heads", lambda: rnp.mean_pool_kv_heads(_a(4, 10), None, 4, 2), "num_heads"),
    ("2.5 bytes", lambda: rnp.kv_cache_bytes_per_token(32, 8, 128, 2.5), "bytes_per_value"),
    ("no layers", lambda: rpt.kv_cache_bytes_per_token(0, 8, 128), "num_layers"),
]


@pytest.mark.parametrize("what, bad, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_grouped_inputs_are_refused_with_the_shapes(what, bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_kv_bytes_per_token_are_the_bytes_of_the_cached_tensors():
    """A key and a value per key/value head and layer, made on the meta device (shapes only)."""
    sizes = [(32, 8, 128, torch.float16), (60, 128, 128, torch.bfloat16), (6, 8, 64, torch.float32)]
    for layers, heads, width, dtype in sizes + [(2, 1, 12, torch.float64)]:
        one_token = torch.empty(layers, 2, heads, 1, width, dtype=dtype, device="meta")
        size = one_token.element_size()
        assert rnp.kv_cache_bytes_per_token(layers, heads, width, size) == one_token.numel() * size
        assert rpt.kv_cache_bytes_per_token(layers, heads, width, size) == one_token.numel() * size
    assert rnp.kv_cache_bytes_per_token(32, 8, 128) == 131_072  # Mistral 7B, float16: 128 KiB


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("h, g", [(1, 1), (4, 2), (6, 3), (8, 1), (4, 4)])
def test_mean_pool_averages_consecutive_heads(device, dtype, h, g):
    w, b = _randn((10, h * 3), dtype, device, seed=4), _randn((h * 3,), dtype, device, seed=5)
    pw, pb = rpt.mean_pool_kv_heads(w, b, h, g)
    assert pw.shape == (10, g * 3) and pb.shape == (g * 3,) and pw.device == w.device
    r = h // g
    for j in range(g):
        torch.testing.assert_close(
            pw[:, 3 * j : 3 * j + 3], w.reshape(10, h, 3)[:, j * r : (j + 1) * r].mean(1)
        )
        torch.testing.assert_close(
            pb[3 * j : 3 * j + 3], b.reshape(h, 3)[j * r : (j + 1) * r].mean(0)
        )
    np_w, np_b = rnp.mean_pool_kv_heads(w.cpu().numpy(), b.cpu().numpy(), h, g)
    np.testing.assert_allclose(np_w, pw.cpu().numpy(), **TOLERANCES[dtype])
    np.testing.assert_allclose(np_b, pb.cpu().numpy(), **TOLERANCES[dtype])
    assert rpt.mean_pool_kv_heads(w, None, h, g)[1] is None


def test_pooling_heads_that_agree_changes_no_attention(device):
    """Heads equal within each group: GQA with the pooled projections is multi-head attention."""
    x = torch.randn(2, 5, 12, device=device)
    w_q = torch.randn(12, 24, device=device)
    w_k = torch.randn(12, 2, 1, 6, device=device).expand(12, 2, 2, 6).reshape(12, 24)
    q, k = rpt.split_heads(x @ w_q, 4), rpt.split_heads(x @ w_k, 4)
    pooled, _ = rpt.mean_pool_kv_heads(w_k, None, 4, 2)
    k_pooled = rpt.split_heads(x @ pooled, 2)
    torch.testing.assert_close(
        rpt.grouped_query_attention(q, k_pooled, k_pooled),
        F.scaled_dot_product_attention(q, k, k),
        rtol=1e-5,
        atol=1e-5,
    )

"""Efficient attention (lesson 9) against PyTorch built-ins: the online softmax against
torch.softmax, tiled attention against F.scaled_dot_product_attention (shapes x dtypes x devices x
masks x block sizes, fully masked rows included), the merge of partial results, and the peak
memory that makes tiling worth it. Inputs stay small: these tests run in a second or two."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.profiling import best_time, count_multiply_adds, median_time, peak_memory

from .test_sdpa_reference import SHAPES, _masks, _randn, _reference_sdpa
from .tolerances import FLOAT_DTYPES, TOLERANCES


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("block_size", [1, 3, 64])
def test_online_softmax_matches_torch_softmax(device, dtype, block_size):
    x = 30 * _randn((4, 3, 11), dtype, device, seed=1)  # large logits: the maximum matters
    x[0, 0] = -torch.inf  # a row with nothing to attend to
    x[1, 1, 5:] = -torch.inf
    got = rpt.online_softmax(x, block_size)
    wide = x.double()
    want = torch.nan_to_num(torch.softmax(wide, dim=-1)).to(dtype)
    assert got.dtype == dtype and got.device == x.device
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    assert (got[0, 0] == 0).all()
    running_max, running_sum = rpt.online_softmax_stats(x, block_size)
    assert (
        running_max.dtype
        == running_sum.dtype
        == (dtype if dtype == torch.float64 else torch.float32)
    )
    torch.testing.assert_close(running_max.double(), wide.amax(dim=-1))
    shift = torch.where(torch.isfinite(running_max), running_max, 0).double()
    torch.testing.assert_close(
        running_sum.double(), torch.exp(wide - shift[..., None]).sum(-1), rtol=1e-5, atol=1e-6
    )
    assert running_sum[0, 0] == 0
    if dtype in (torch.float32, torch.float64):
        np_x = x.cpu().numpy()
        np.testing.assert_allclose(
            rnp.online_softmax(np_x, block_size), want.cpu().numpy(), **TOLERANCES[dtype]
        )
        np_max, np_sum = rnp.online_softmax_stats(np_x, block_size)
        np.testing.assert_allclose(np_max, running_max.cpu().numpy())
        np.testing.assert_allclose(np_sum, running_sum.cpu().numpy(), rtol=1e-5)


def test_online_softmax_survives_huge_logits(device):
    x = torch.tensor([[1e4, -1e4, 1e4 - 1.0, 0.0]], device=device)
    torch.testing.assert_close(rpt.online_softmax(x), torch.softmax(x, dim=-1))
    np.testing.assert_allclose(
        rnp.online_softmax(x.cpu().numpy()), torch.softmax(x, -1).cpu().numpy(), rtol=1e-6
    )


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("block_size", [1, 4, 64])
def test_tiled_attention_matches_torch(device, dtype, shapes, block_size):
    q, k, v = (_randn(s, dtype, device, seed=i) for i, s in enumerate(shapes))
    batch = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]))
    for name, mask in _masks(q.shape[-2], k.shape[-2], batch, device):
        got = rpt.tiled_attention(q, k, v, mask=mask, block_size=block_size)
        want = _reference_sdpa(q, k, v, mask)
        assert got.dtype == dtype and got.device == q.device, name
        torch.testing.assert_close(
            got, want, **TOLERANCES[dtype], msg=lambda m: f"mask {name}: {m}"
        )
        if dtype in (torch.float32, torch.float64):
            np_mask = None if mask is None else mask.cpu().numpy()
            np_out = rnp.tiled_attention(
                *(t.cpu().numpy() for t in (q, k, v)), mask=np_mask, block_size=block_size
            )
            assert np_out.dtype == q.cpu().numpy().dtype
            np.testing.assert_allclose(
                np_out, want.cpu().numpy(), **TOLERANCES[dtype], err_msg=name
            )


def test_fully_masked_rows_and_masks_that_broadcast_along_the_keys(device):
    q, k, v = (_randn((2, 5, 8), torch.float32, device, seed=i) for i in range(3))
    per_query = torch.tensor([True, False, True, True, False], device=device)[:, None]  # (n_q, 1)
    got = rpt.tiled_attention(q, k, v, per_query, block_size=2)
    assert torch.isfinite(got).all() and (got[:, 1] == 0).all() and (got[:, 4] == 0).all()
    torch.testing.assert_close(got, _reference_sdpa(q, k, v, per_query.expand(5, 5)))
    np_got = rnp.tiled_attention(
        *(t.cpu().numpy() for t in (q, k, v)), per_query.cpu().numpy(), block_size=2
    )
    np.testing.assert_allclose(np_got, got.cpu().numpy(), rtol=1e-5, atol=1e-6)
    # a block that is fully masked for a row *after* that row has seen keys leaves it unchanged
    mask = torch.ones(5, 8, dtype=torch.bool, device=device)
    mask[:, 2:6] = False
    torch.testing.assert_close(
        rpt.tiled_attention(
            q, torch.cat([k, k[:, :3]], 1), torch.cat([v, v[:, :3]], 1), mask, block_size=2
        ),
        _reference_sdpa(q, torch.cat([k, k[:, :3]], 1), torch.cat([v, v[:, :3]], 1), mask),
    )


def test_log_sum_exp_and_merging_partial_results(device):
    q, k, v = (
        _randn(s, torch.float64, device, seed=i)
        for i, s in enumerate([(3, 4, 8), (3, 9, 8), (3, 9, 6)])
    )
    mask = torch.rand(3, 4, 9, generator=torch.Generator().manual_seed(3)).to(device) > 0.4
    mask[0, 1] = False  # a query with no key at all
    mask[1, 2, :5] = False  # a query with no key in the first part
    out, lse = rpt.tiled_attention(q, k, v, mask, block_size=2, return_lse=True)
    scores = (q @ k.transpose(-1, -2) / 8**0.5).masked_fill(~mask, -torch.inf)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1))
    assert lse[0, 1] == -torch.inf
    for split in (0, 5, 9):
        part_a = rpt.tiled_attention(
            q, k[:, :split], v[:, :split], mask[..., :split], 3, return_lse=True
        )
        part_b = rpt.tiled_attention(
            q, k[:, split:], v[:, split:], mask[..., split:], 3, return_lse=True
        )
        merged, merged_lse = rpt.merge_attention(*part_a, *part_b)
        torch.testing.assert_close(merged, _reference_sdpa(q, k, v, mask), msg=f"split at {split}")
        torch.testing.assert_close(merged_lse, lse)
        np_parts = [tuple(t.cpu().numpy() for t in part) for part in (part_a, part_b)]
        np_merged, np_lse = rnp.merge_attention(*np_parts[0], *np_parts[1])
        np.testing.assert_allclose(np_merged, merged.cpu().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.isfinite(np_lse), torch.isfinite(lse).cpu().numpy())
    np_out, np_lse = rnp.tiled_attention(
        q.cpu().numpy(),
        k.cpu().numpy(),
        v.cpu().numpy(),
        mask.cpu().numpy(),
        block_size=4,
        return_lse=True,
    )
    np.testing.assert_allclose(np_lse, lse.cpu().numpy())


def test_gradients_match_the_built_in(device):
    q = _randn((2, 6, 8), torch.float64, device, seed=1).requires_grad_()
    k = _randn((2, 7, 8), torch.float64, device, seed=2).requires_grad_()
    v = _randn((2, 7, 4), torch.float64, device, seed=3).requires_grad_()
    mask = torch.ones(6, 7, dtype=torch.bool, device=device).tril()
    grads = torch.autograd.grad(
        rpt.tiled_attention(q, k, v, mask, block_size=3).square().sum(), (q, k, v)
    )
    want = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).square().sum(), (q, k, v)
    )
    for got, expected in zip(grads, want):
        torch.testing.assert_close(got, expected)


def test_tiled_peak_memory_grows_linearly_and_naive_quadratically():
    rng = np.random.default_rng(0)
    peaks = {}
    for n in (256, 512, 1024):
        q, k, v = (rng.standard_normal((1, n, 64), dtype=np.float32) for _ in range(3))
        out, naive = peak_memory(rnp.scaled_dot_product_attention, q, k, v)
        tiled_out, tiled = peak_memory(rnp.tiled_attention, q, k, v, block_size=64)
        np.testing.assert_allclose(tiled_out, out, rtol=1e-5, atol=1e-5)
        assert naive >= n * n * 4, "the naive attention holds at least the n x n float32 scores"
        assert tiled <= 2 * 3 * q.nbytes, (
            f"n = {n}: tiled attention held {tiled} bytes, inputs are {3 * q.nbytes}"
        )
        peaks[n] = naive, tiled
    assert peaks[1024][0] > 3.5 * peaks[512][0]  # doubling n quadruples the naive peak ...
    assert peaks[1024][1] < 2.5 * peaks[512][1]  # ... and about doubles the tiled one


def test_numpy_eq1_keeps_float32_and_holds_two_score_matrices_at_most():
    """Lesson 2's NumPy attention is what lesson 9 and `make bench` measure as "naive": float32 in,
    float32 out, and its n x n scores the only large array (the softmax works on them in place)."""
    q = np.random.default_rng(1).standard_normal((512, 64), dtype=np.float32)
    out, peak = peak_memory(rnp.scaled_dot_product_attention, q, q, q)
    assert out.dtype == np.float32 and rnp.attention_weights(q, q).dtype == np.float32
    assert rnp.softmax(q).dtype == np.float32
    assert peak <= 1.2 * 512 * 512 * 4, f"{peak} bytes for 512 x 512 float32 scores"
    x = q.copy()
    rnp.softmax(x)
    np.testing.assert_array_equal(x, q)  # the public softmax leaves its input alone


def test_profiling_helpers(device):
    x = np.ones((64, 64), dtype=np.float32)
    result, peak = peak_memory(np.matmul, x, x)
    assert result.shape == (64, 64) and peak >= result.nbytes
    assert best_time(np.matmul, x, x, repeat=2) > 0
    t = torch.ones(64, 64, device=device)
    if device.type == "cuda":
        _, peak = peak_memory(torch.matmul, t, t)
        assert peak >= 64 * 64 * 4
    elif device.type == "cpu":
        with pytest.raises(ValueError, match="NumPy"):
            peak_memory(torch.matmul, t, t)
    assert best_time(torch.matmul, t, t, repeat=2) > 0
    assert median_time(torch.matmul, t, t, repeat=3) > 0
    a, b = torch.ones(3, 4, 5, device=device), torch.ones(5, 6, device=device)
    out, macs = count_multiply_adds(
        lambda: (a @ b, torch.nn.functional.linear(a, b.T), torch.bmm(a, a.transpose(1, 2)))
    )
    assert macs == 3 * 4 * 6 * 5 + 3 * 4 * 6 * 5 + 3 * 4 * 4 * 5


def test_median_time_warms_up_then_takes_the_median_of_its_runs(monkeypatch):
    import attention_ref.profiling as profiling

    clock = iter([0.0, 5.0, 10.0, 11.0, 20.0, 22.0, 30.0, 39.0])  # warm-up 5 s; runs 1, 2, 9 s
    monkeypatch.setattr(profiling.time, "perf_counter", lambda: next(clock, 39.0))
    calls = []
    assert median_time(calls.append, "x", repeat=3, warmup=1) == 2.0
    assert calls == ["x"] * 4


def test_bad_input_is_named():
    q = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match="block_size"):
        rnp.tiled_attention(q, q, q, block_size=0)
    with pytest.raises(ValueError, match="block_size"):
        rpt.tiled_attention(
            torch.ones(2, 3, 4), torch.ones(2, 3, 4), torch.ones(2, 3, 4), block_size=2.0
        )
    with pytest.raises(ValueError, match="block_size"):
        rnp.online_softmax(np.ones(3), block_size=-1)
    with pytest.raises(TypeError, match="boolean"):
        rnp.tiled_attention(q, q, q, mask=np.ones((3, 3)))
    with pytest.raises(TypeError, match="boolean"):
        rpt.tiled_attention(
            torch.ones(3, 4), torch.ones(3, 4), torch.ones(3, 4), mask=torch.ones(3, 3)
        )
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        rnp.tiled_attention(q, q, q, mask=np.ones((4, 3), dtype=bool))
    with pytest.raises(ValueError, match="n_k"):
        rnp.tiled_attention(q, q, np.ones((2, 5, 4)))
    with pytest.raises(ValueError, match="d_k"):
        rpt.tiled_attention(torch.ones(3, 4), torch.ones(3, 5), torch.ones(3, 5))
    with pytest.raises(ValueError, match="out_b"):
        rnp.merge_attention(np.ones((3, 4)), np.ones(3), np.ones((2, 4)), np.ones(2))
    with pytest.raises(ValueError, match="lse_b"):
        rpt.merge_attention(torch.ones(3, 4), torch.ones(3), torch.ones(3, 4), torch.ones(3, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_products_stay_close_at_ordinary_logits(device, dtype):
    """half_products=True (the GPU speed recipe) rounds the scores to half precision: fine for
    logits of a few units, which is what a trained model's attention sees."""
    q, k, v = (_randn((2, 4, 33, 16), dtype, device, seed=i) for i in range(3))
    got = rpt.tiled_attention(q, k, v, block_size=8, half_products=True)
    assert got.dtype == dtype
    torch.testing.assert_close(
        got.float(), _reference_sdpa(q, k, v, None).float(), rtol=2e-2, atol=2e-2
    )


def test_mixed_dtypes_are_refused_by_name():
    with pytest.raises(TypeError, match="keys float64"):
        rpt.tiled_attention(
            torch.ones(2, 4), torch.ones(3, 4, dtype=torch.float64), torch.ones(3, 4)
        )
    with pytest.raises(TypeError, match="lse_a"):
        rpt.merge_attention(
            torch.ones(3, 4), torch.ones(3, dtype=torch.float64), torch.ones(3, 4), torch.ones(3)
        )

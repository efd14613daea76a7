"""Lesson 11's Triton kernels (attention_ref.flash) against F.scaled_dot_product_attention and
torch.logsumexp: shapes x block sizes x dtypes, causal and not, lengths that no block size divides.

On a machine without a CUDA GPU the kernels run in Triton's interpreter on the CPU (the module sets
TRITON_INTERPRET=1 before it imports Triton); on a GPU machine they are compiled and run there.
Where Triton is not installed (it has wheels for Linux only) every test here is skipped, with the
module's reason. Inputs stay small: the interpreter runs each program one after the other."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attention_ref.flash as flash

pytestmark = pytest.mark.skipif(flash.UNAVAILABLE is not None, reason=str(flash.UNAVAILABLE))

DEVICE = flash.kernel_device()
# tl.dot of float32 runs in TF32 on a GPU's tensor cores (10 bits of mantissa); exact elsewhere.
TF32 = DEVICE.type == "cuda"
TOL = {
    torch.float32: dict(rtol=5e-3, atol=5e-3) if TF32 else dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
}
SHAPES = [  # (batch, n_q, n_k, d)
    ((1,), 16, 16, 16),
    ((2, 3), 37, 37, 32),  # no block size divides n
    ((2,), 5, 50, 16),  # fewer queries than keys
    ((1, 2), 64, 24, 64),
]


def _inputs(batch, n_q, n_k, d, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, n_q, d, generator=g) * scale
    k, v = (torch.randn(*batch, n_k, d, generator=g) for _ in range(2))
    return tuple(x.to(DEVICE, dtype) for x in (q, k, v))


def _lse(q, k, causal=False):
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~allowed, -torch.inf)
    return torch.logsumexp(scores, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("cols", [1, 5, 64, 300])
def test_softmax_kernel_matches_torch_softmax(dtype, cols):
    g = torch.Generator().manual_seed(cols)
    x = (torch.randn(3, 4, cols, generator=g) * 20).to(DEVICE, dtype)
    x[0, 0, 0] = 1e4 if dtype == torch.float32 else 6e4  # no overflow
    got = flash.softmax(x)
    assert got.shape == x.shape and got.dtype == dtype and got.device == x.device
    torch.testing.assert_close(got, torch.softmax(x.float(), dim=-1).to(dtype), **TOL[dtype])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("blocks", [(16, 16), (16, 32), (32, 16)], ids=str)
def test_kernel_matches_sdpa_and_logsumexp(shape, causal, blocks):
    q, k, v = _inputs(*shape, scale=3.0)  # scores of a few units: the running maximum moves
    kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
    out, lse = flash.attention(q, k, v, kernel, block_q=blocks[0], block_k=blocks[1])
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.shape == want.shape and out.dtype == q.dtype and out.device == q.device
    torch.testing.assert_close(out, want, **TOL[torch.float32])
    assert lse.shape == q.shape[:-1] and lse.dtype == torch.float32
    torch.testing.assert_close(lse.double(), _lse(q, k, causal), **TOL[torch.float32])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_float16_inputs_give_float16_outputs(causal):
    q, k, v = _inputs((2,), 40, 40, 32, dtype=torch.float16, seed=1)
    kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
    out, _ = flash.attention(q, k, v, kernel)
    assert out.dtype == torch.float16
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), want, **TOL[torch.float16])


def test_huge_scores_do_not_overflow():
    q, k, v = _inputs((1,), 32, 48, 16, seed=2, scale=300.0)  # scores in the thousands
    out, lse = flash.attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL[torch.float32])
    assert torch.isfinite(lse).all()
    huge = dict(rtol=5e-3, atol=1e-2) if TF32 else dict(rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(lse.double(), _lse(q, k), **huge)


def test_causal_kernel_skips_the_blocks_above_the_diagonal():
    read = flash.key_blocks_read(flash.causal_attention_kernel, 64, 64)
    assert torch.equal(read, torch.ones(4, 4, dtype=torch.bool).tril()), read
    assert flash.key_blocks_read(flash.attention_kernel, 64, 64).all()
    wide = flash.key_blocks_read(flash.causal_attention_kernel, 64, 64, block_q=32, block_k=16)
    assert wide.tolist() == [[True, True, False, False], [True, True, True, True]]


def test_bad_inputs_name_their_shapes():
    q, k, v = _inputs((2,), 8, 8, 16)
    with pytest.raises(ValueError, match=r"\(2, 8, 16\)"):
        flash.attention(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="head dimension 12"):
        flash.attention(q[..., :12], k[..., :12], v[..., :12])


def test_the_module_says_where_kernels_run():
    assert flash.describe().startswith(f"Triton {flash.triton.__version__}")
    assert flash.INTERPRETED == (DEVICE.type == "cpu")

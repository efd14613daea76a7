"""Multi-head latent attention (lesson 12) against PyTorch: ``mla_attention`` against
``F.scaled_dot_product_attention`` on keys and values built from the definition (DeepSeek-V2,
section 2.1), and against multi-head attention where MLA reduces to it; the decoding step with the
absorbed projections against the whole sequence (dtypes x devices, NumPy and PyTorch, on PyTorch's
meta device), caching the latent and the rotary key only, never up-projecting the cache."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic, record_torch

from .tolerances import TOLERANCES

SIZES = [  # d_model, h, d_h, d_c, d_r
    (8, 1, 4, 3, 2),
    (16, 4, 6, 5, 4),
    (24, 3, 8, 24, 0),
    (12, 6, 2, 2, 2),
]


def _params(sizes, dtype, device, seed):
    d_model, h, d_h, d_c, d_r = sizes
    gen = torch.Generator().manual_seed(seed)
    return rpt.init_mla_params(d_model, h, d_h, d_c, d_r, gen, dtype=dtype, device=device)


def _by_definition(x, p, h):
    """MLA written out with PyTorch's own attention: keys and values up-projected per head, the
    shared rotary key copied to every head, F.scaled_dot_product_attention causal."""
    n, d_h = x.shape[-2], p["w_q"].shape[1] // h
    d_r = p["w_kr"].shape[1]
    latent = x @ p["w_dkv"]
    split = lambda t: t.unflatten(-1, (h, -1)).transpose(-2, -3)  # noqa: E731
    positions = torch.arange(n)
    rope_key = rpt.rotary_embedding(x @ p["w_kr"], positions).unsqueeze(-3)
    q = torch.cat([split(x @ p["w_q"]), rpt.rotary_embedding(split(x @ p["w_qr"]), positions)], -1)
    k = torch.cat([split(latent @ p["w_uk"]), rope_key.expand(*q.shape[:-2], n, d_r)], -1)
    heads = F.scaled_dot_product_attention(
        q, k, split(latent @ p["w_uv"]), is_causal=True, scale=1 / math.sqrt(d_h + d_r)
    )
    return heads.transpose(-2, -3).flatten(-2) @ p["w_o"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_mla_attention_matches_the_definition_in_torch(device, dtype, sizes):
    p = _params(sizes, dtype, device, seed=1)
    x = torch.randn(2, 7, sizes[0], generator=torch.Generator().manual_seed(2)).to(device, dtype)
    got = rpt.mla_attention(x, p, sizes[1])
    assert got.dtype == dtype and got.device == x.device
    tol = TOLERANCES[dtype] if dtype != torch.bfloat16 else dict(rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(got, _by_definition(x, p, sizes[1]), **tol)
    if dtype != torch.bfloat16:
        np_p = {name: w.cpu().numpy() for name, w in p.items()}
        np.testing.assert_allclose(
            rnp.mla_attention(x.cpu().numpy(), np_p, sizes[1]),
            got.cpu().numpy(),
            **TOLERANCES[dtype],
        )


def test_mla_without_compression_or_rotation_is_multi_head_attention(device):
    """W_DKV the identity, no rotary part: causal multi-head attention with W_K = W_UK, W_V = W_UV
    (lesson 4's, which its own tests hold to nn.MultiheadAttention)."""
    p = _params((12, 3, 4, 12, 0), torch.float64, device, seed=3)
    p["w_dkv"] = torch.eye(12, dtype=torch.float64, device=device)
    x = torch.randn(5, 12, dtype=torch.float64, device=device)
    mha = {"w_q": p["w_q"], "w_k": p["w_uk"], "w_v": p["w_uv"], "w_o": p["w_o"]}
    causal = rpt.causal_mask(5, device=device)
    torch.testing.assert_close(
        rpt.mla_attention(x, p, 3), rpt.multi_head_attention(x, x, x, mha, 3, causal)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_absorbed_decoding_equals_the_whole_sequence(device, dtype, sizes):
    h = sizes[1]
    p = _params(sizes, dtype, device, seed=4)
    x = torch.randn(3, 6, sizes[0], generator=torch.Generator().manual_seed(5)).to(device, dtype)
    cache, absorbed = {}, rpt.absorb_mla_params(p, h)  # once, before decoding
    steps = [rpt.mla_decode_step(x[:, t : t + 1], p, h, cache, t, absorbed) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), rpt.mla_attention(x, p, h), **TOLERANCES[dtype])
    assert set(cache) == {"latent", "rope_key"}
    assert cache["latent"].shape == (3, 6, sizes[3]) and cache["rope_key"].shape == (3, 6, sizes[4])
    np_p, np_x, np_cache = {k: w.cpu().numpy() for k, w in p.items()}, x.cpu().numpy(), {}
    np_steps = [rnp.mla_decode_step(np_x[:, t : t + 1], np_p, h, np_cache, t) for t in range(6)]
    np.testing.assert_allclose(
        np.concatenate(np_steps, 1), torch.cat(steps, 1).cpu().numpy(), **TOLERANCES[dtype]
    )


def test_absorbed_factors_are_each_heads_own():
    p = {k: w.numpy() for k, w in _params((16, 4, 6, 5, 4), torch.float64, "cpu", seed=6).items()}
    absorbed = rnp.absorb_mla_params(p, 4)
    assert absorbed["w_uk_t"].shape == (4, 6, 5) and absorbed["w_uv"].shape == (4, 5, 6)
    for i in range(4):
        cols = slice(6 * i, 6 * i + 6)
        np.testing.assert_array_equal(absorbed["w_uk_t"][i], p["w_uk"][:, cols].T)
        np.testing.assert_array_equal(absorbed["w_uv"][i], p["w_uv"][:, cols])
    torch_p = {k: torch.from_numpy(w) for k, w in p.items()}
    torch_absorbed = rpt.absorb_mla_params(torch_p, 4)
    for name, w in absorbed.items():
        np.testing.assert_array_equal(torch_absorbed[name].numpy(), w)
        assert (
            torch_absorbed[name].untyped_storage().data_ptr()
            == torch_p[name.removesuffix("_t")].untyped_storage().data_ptr()
        ), f"{name}: a view of the weight, not a copy"


def test_reassociated_scores_equal_the_up_projected_ones():
    """((x W_Q,i) W_UK,i^T) c_j^T = q_i . k_j,i, and (sum_j p_j c_j) W_UV,i = sum_j p_j v_j,i:
    the absorption is associativity, with no merged d_model x d_c matrix."""
    p = {k: w.numpy() for k, w in _params((16, 4, 6, 5, 4), torch.float64, "cpu", seed=10).items()}
    absorbed = rnp.absorb_mla_params(p, 4)
    x, c = (
        np.random.default_rng(0).normal(size=(3, 16)),
        np.random.default_rng(1).normal(size=(9, 5)),
    )
    q = rnp.split_heads(x @ p["w_q"], 4)
    np.testing.assert_allclose(
        (q @ absorbed["w_uk_t"]) @ c.T, q @ np.swapaxes(rnp.split_heads(c @ p["w_uk"], 4), -1, -2)
    )
    weights = rnp.softmax(np.random.default_rng(2).normal(size=(4, 3, 9)))
    np.testing.assert_allclose(
        (weights @ c) @ absorbed["w_uv"], weights @ rnp.split_heads(c @ p["w_uv"], 4)
    )


def _decode_memory(sizes, cached, step=rpt.mla_decode_step):
    p = _params(sizes, torch.float32, "cpu", seed=7)
    h = sizes[1]
    x = torch.randn(1, cached + 1, sizes[0], generator=torch.Generator().manual_seed(8))
    cache = {
        "latent": x[:, :cached] @ p["w_dkv"],
        "rope_key": rpt.rotary_embedding(x[:, :cached] @ p["w_kr"]),
    }
    absorbed = rpt.absorb_mla_params(p, h)
    _, ran = record_torch(step, x[:, cached:], p, h, cache, cached, absorbed)
    return ran.largest_new_bytes


def test_decoding_never_up_projects_the_cache_nor_merges_the_weights():
    """With 256 positions cached and heads of 64 over a latent of 8, no tensor a step makes is half
    one head's up-projected keys (64 KiB); with a latent of 64 wider than heads of 8 and d_model
    128, none is half of one head's merged W_Q,i W_UK,i^T (32 KiB)."""
    assert _decode_memory((32, 8, 64, 8, 4), 256) < 256 * 64 * 4 / 2
    assert _decode_memory((128, 8, 8, 64, 4), 16) < 128 * 64 * 4 / 2


def test_mla_is_device_agnostic(device):
    p = _params((16, 4, 6, 5, 4), torch.float32, device, seed=8)
    x = torch.randn(2, 5, 16, device=device)
    out = expect_device_agnostic(rpt.mla_attention, x, p, 4, what="mla_attention")
    assert out is not None and out.shape == (2, 5, 16)
    cache = {
        "latent": torch.randn(2, 3, 5, device=device),
        "rope_key": torch.randn(2, 3, 4, device=device),
    }
    out = expect_device_agnostic(
        rpt.mla_decode_step, x[:, :1], p, 4, cache, 3, what="mla_decode_step"
    )
    assert out is not None and out.shape == (2, 1, 16)


def test_cache_bytes_per_token_at_deepseek_v2s_size():
    """60 layers, d_c = 512, d_r = 64 (DeepSeek-V2, section 3.1.2): 576 numbers per token and
    layer, what GQA caches with 2.25 groups of 128 (their Table 1)."""
    one_token = torch.empty(60, 512 + 64, dtype=torch.bfloat16, device="meta")
    assert rnp.mla_cache_bytes_per_token(60, 512, 64) == one_token.numel() * 2 == 69_120
    assert 4 * rpt.mla_cache_bytes_per_token(60, 512, 64) == rnp.kv_cache_bytes_per_token(
        60, 9, 128
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda p: p.pop("w_kr"), "lacks w_kr"),
        (lambda p: p.update(w_uk=p["w_uk"][:, :-1]), "w_uk must have shape"),
        (lambda p: p.update(w_qr=torch.ones(16, 4 * 3), w_kr=torch.ones(16, 3)), "even"),
    ],
)
def test_bad_mla_weights_are_refused(change, match):
    p = _params((16, 4, 6, 5, 4), torch.float32, "cpu", seed=9)
    change(p)
    with pytest.raises(ValueError, match=match):
        rpt.mla_attention(torch.ones(3, 16), p, 4)

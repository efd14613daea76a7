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
    cache, absorbed = {}, rpt.absorb_mla_params(p, h)
    steps = [rpt.mla_decode_step(x[:, t : t + 1], p, h, cache, t, absorbed) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), rpt.mla_attention(x, p, h), **TOLERANCES[dtype])
    assert set(cache) == {"latent", "rope_key"}
    assert cache["latent"].shape == (3, 6, sizes[3]) and cache["rope_key"].shape == (3, 6, sizes[4])
    np_p, np_x, np_cache = {k: w.cpu().numpy() for k, w in p.items()}, x.cpu().numpy(), {}
    np_steps = [rnp.mla_decode_step(np_x[:, t : t + 1], np_p, h, np_cache, t) for t in range(6)]
    np.testing.assert_allclose(
        np.concatenate(np_steps, 1), torch.cat(steps, 1).cpu().numpy(), **TOLERANCES[dtype]
    )


def test_absorbed_projections_are_the_products_per_head():
    p = {k: w.numpy() for k, w in _params((16, 4, 6, 5, 4), torch.float64, "cpu", seed=6).items()}
    absorbed = rnp.absorb_mla_params(p, 4)
    for i in range(4):
        cols = slice(6 * i, 6 * i + 6)
        np.testing.assert_allclose(
            absorbed["w_q_latent"][i], p["w_q"][:, cols] @ p["w_uk"][:, cols].T
        )
        np.testing.assert_allclose(absorbed["w_o_latent"][i], p["w_uv"][:, cols] @ p["w_o"][cols])
    torch_absorbed = rpt.absorb_mla_params({k: torch.from_numpy(w) for k, w in p.items()}, 4)
    for name, w in absorbed.items():
        np.testing.assert_allclose(torch_absorbed[name].numpy(), w)


def test_decoding_never_up_projects_the_cache():
    """With 256 positions cached (8 heads of 16), no tensor of a step is as large as half the
    up-projected keys of those positions: scores and sums stay in the latent space."""
    p = _params((32, 8, 16, 8, 4), torch.float32, "cpu", seed=7)
    x = torch.randn(1, 257, 32)
    cache = {
        "latent": x[:, :256] @ p["w_dkv"],
        "rope_key": rpt.rotary_embedding(x[:, :256] @ p["w_kr"]),
    }
    absorbed = rpt.absorb_mla_params(p, 8)
    _, ran = record_torch(rpt.mla_decode_step, x[:, 256:], p, 8, cache, 256, absorbed)
    assert ran.largest_bytes < 256 * 8 * 16 * 4 / 2, ran.largest_bytes


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

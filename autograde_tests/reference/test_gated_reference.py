"""Gated attention (lesson 13; Qiu et al., 2025) against Hugging Face and PyTorch: the element-wise
gate against ``transformers``' ``Qwen3NextAttention`` with the same weights (its q/k norms and
rotary embedding switched off); a gate that is always open against ``nn.MultiheadAttention``; the
head-wise gate against its formula; the gate applied before ``W^O``; NumPy against PyTorch,
dtypes x devices, on PyTorch's meta device; the bytes a hybrid stack keeps against
``transformers``' own Qwen3-Next configuration and recurrent state; bad input refused with the
shapes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic

from .test_sdpa_reference import _randn
from .tolerances import TOLERANCES


def _params(d_model, h, d_k, gate_width, dtype, device, seed):
    shapes = {
        "w_q": (d_model, h * d_k),
        "w_k": (d_model, h * d_k),
        "w_v": (d_model, h * d_k),
        "w_g": (d_model, gate_width),
        "w_o": (h * d_k, d_model),
    }
    return {
        n: _randn(s, dtype, device, seed=seed + i) / d_model**0.5
        for i, (n, s) in enumerate(shapes.items())
    }


def test_elementwise_gate_equals_qwen3_next_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention

    logging.getLogger("transformers").setLevel(logging.ERROR)
    config = transformers.Qwen3NextConfig(
        hidden_size=16, num_attention_heads=2, num_key_value_heads=2, head_dim=8
    )
    torch.manual_seed(1)
    attention = Qwen3NextAttention(config, layer_idx=3).eval()
    attention.q_norm, attention.k_norm = nn.Identity(), nn.Identity()  # left to lesson 14
    x = torch.randn(2, 7, 16)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    additive = torch.zeros(7, 7).masked_fill(~causal, float("-inf"))[None, None]
    with torch.no_grad():
        theirs, _ = attention(x, (torch.ones(2, 7, 8), torch.zeros(2, 7, 8)), additive)
        query_and_gate = attention.q_proj.weight.T.reshape(16, 2, 2, 8)  # per head: [query | gate]
        params = {
            "w_q": query_and_gate[:, :, 0].reshape(16, 16),
            "w_g": query_and_gate[:, :, 1].reshape(16, 16),
            "w_k": attention.k_proj.weight.T,
            "w_v": attention.v_proj.weight.T,
            "w_o": attention.o_proj.weight.T,
        }
        torch.testing.assert_close(
            rpt.gated_attention(x, params, 2, causal), theirs, rtol=1e-5, atol=1e-5
        )
        np_params = {n: p.numpy() for n, p in params.items()}
        np.testing.assert_allclose(
            rnp.gated_attention(x.numpy(), np_params, 2, causal.numpy()),
            theirs.numpy(),
            rtol=1e-5,
            atol=1e-5,
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_an_open_gate_is_multi_head_attention(device, dtype):
    mha = nn.MultiheadAttention(12, 3, bias=False, batch_first=True).to(device=device, dtype=dtype)
    p = rpt.params_from_torch(mha)
    params = {
        "w_q": p["w_q"],
        "w_k": p["w_k"],
        "w_v": p["w_v"],
        "w_o": p["w_o"],
        "w_g": torch.zeros(12, 3, dtype=dtype, device=device),
    }
    x = _randn((2, 5, 12), dtype, device, seed=4)
    causal = torch.ones(5, 5, dtype=torch.bool, device=device).tril()
    want, _ = mha(x, x, x, attn_mask=~causal, need_weights=False)
    # sigmoid(0) = 1/2 for every head: half of multi-head attention
    torch.testing.assert_close(
        rpt.gated_attention(x, params, 3, causal), want / 2, **TOLERANCES[dtype]
    )


@pytest.mark.parametrize("gate", ["head-wise", "element-wise"])
def test_the_gate_scales_each_head_before_the_output_projection(device, gate):
    h, d_k = 3, 4
    params = _params(
        12, h, d_k, h if gate == "head-wise" else h * d_k, torch.float64, device, seed=10
    )
    x = _randn((2, 6, 12), torch.float64, device, seed=20)
    causal = torch.ones(6, 6, dtype=torch.bool, device=device).tril()
    heads = [
        torch.nn.functional.scaled_dot_product_attention(
            *(x @ params[f"w_{n}"][:, i * d_k : (i + 1) * d_k] for n in "qkv"), attn_mask=causal
        )
        for i in range(h)
    ]
    logits = x @ params["w_g"]
    gates = [
        logits[..., i : i + 1] if gate == "head-wise" else logits[..., i * d_k : (i + 1) * d_k]
        for i in range(h)
    ]
    want = (
        torch.cat([head * torch.sigmoid(g) for head, g in zip(heads, gates)], dim=-1)
        @ params["w_o"]
    )
    got, weights = rpt.gated_attention(x, params, h, causal, return_weights=True)
    torch.testing.assert_close(got, want)
    assert weights.shape == (2, h, 6, 6)
    np_got = rnp.gated_attention(
        x.cpu().numpy(), {n: p.cpu().numpy() for n, p in params.items()}, h, causal.cpu().numpy()
    )
    np.testing.assert_allclose(np_got, want.cpu().numpy(), rtol=1e-10, atol=1e-12)
    after = torch.sigmoid(logits[..., :1]) * (
        torch.cat(heads, dim=-1) @ params["w_o"]
    )  # one gate after W^O
    assert not torch.allclose(got, after)


def test_gated_attention_is_device_agnostic(device):
    params = _params(8, 2, 4, 2, torch.float32, device, seed=30)
    x = torch.randn(3, 5, 8, device=device)
    out = expect_device_agnostic(rpt.gated_attention, x, params, 2, what="gated_attention")
    assert out is not None and out.shape == (3, 5, 8)


def test_stack_bytes_are_those_of_qwen3_nexts_caches():
    """Qwen3-Next-80B-A3B's configuration as ``transformers`` ships it: 12 full-attention layers
    caching 2 key/value heads of 256 per token, 36 Gated DeltaNet layers keeping a 128 x 128
    state for each of 32 value heads, whose shape ``torch_recurrent_gated_delta_rule`` returns."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import torch_recurrent_gated_delta_rule

    logging.getLogger("transformers").setLevel(logging.ERROR)
    c = transformers.Qwen3NextConfig()
    meta = dict(device="meta", dtype=torch.bfloat16)
    qk = torch.empty(1, 1, c.linear_num_key_heads, c.linear_key_head_dim, **meta)
    v = torch.empty(1, 1, c.linear_num_value_heads, c.linear_value_head_dim, **meta)
    per_head = torch.empty(1, 1, c.linear_num_value_heads, **meta)
    _, state = torch_recurrent_gated_delta_rule(
        qk, qk, v, per_head, per_head, output_final_state=True
    )
    state_bytes = rpt.linear_state_bytes(
        c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim, 4
    )
    assert state_bytes == state.numel() * state.element_size()  # float32, as they keep it
    kv = rpt.kv_cache_bytes_per_token(1, c.num_key_value_heads, c.head_dim, 2)
    for n in (1, 4096, 262_144):
        assert (
            rpt.stack_cache_bytes(c.layer_types, n, kv, state_bytes)
            == 12 * n * kv + 36 * state_bytes
        )
    assert rnp.stack_cache_bytes(["linear_attention"] * 3, 10**6, kv, 7) == 21


def test_short_conv_state_bytes_are_what_transformers_caches():
    """A Gated DeltaNet layer of ``transformers`` (tiny, on the CPU) run with a cache keeps its
    convolution's last ``kernel`` inputs of every channel (q and k of the key heads, v of the value
    heads): ``short_conv_state_bytes`` counts the same, and 64 KiB for Qwen3-Next's layer."""
    transformers = pytest.importorskip("transformers")
    from transformers.cache_utils import DynamicCache
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    logging.getLogger("transformers").setLevel(logging.ERROR)
    c = transformers.Qwen3NextConfig(
        hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=8, num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
    )  # fmt: skip
    torch.manual_seed(0)
    layer, cache = Qwen3NextGatedDeltaNet(c, 0), DynamicCache(config=c)
    with torch.no_grad():
        for n in (7, 1):  # a prompt, then one decoded token
            layer(torch.randn(1, n, 32), cache_params=cache)
            conv = cache.get_conv_state(0, state_idx=0)
            channels = 2 * 2 * 8 + 4 * 8
            assert conv.shape == (1, channels, c.linear_conv_kernel_dim)
            assert (
                rpt.short_conv_state_bytes(channels, c.linear_conv_kernel_dim, conv.element_size())
                == conv.numel() * conv.element_size()
            )
    big = transformers.Qwen3NextConfig()
    channels = 2 * big.linear_num_key_heads * big.linear_key_head_dim + (
        big.linear_num_value_heads * big.linear_value_head_dim
    )
    assert rnp.short_conv_state_bytes(channels, big.linear_conv_kernel_dim, 2) == 64 * 1024


BAD_INPUTS = [
    (
        "a gate of another width",
        lambda: rnp.gated_attention(
            np.ones((2, 4)),
            {**{n: np.ones((4, 4)) for n in ("w_q", "w_k", "w_v", "w_o")}, "w_g": np.ones((4, 3))},
            2,
        ),
        "w_g",
    ),
    (
        "a missing gate",
        lambda: rpt.gated_attention(
            torch.ones(2, 4), {n: torch.ones(4, 4) for n in ("w_q", "w_k", "w_v", "w_o")}, 2
        ),
        "w_g",
    ),
    (
        "an unknown layer kind",
        lambda: rpt.stack_cache_bytes(["full_attention", "mamba"], 8, 1, 1),
        "layer_types",
    ),
    ("zero heads", lambda: rpt.linear_state_bytes(0, 128, 128), "num_heads"),
    ("zero channels", lambda: rpt.short_conv_state_bytes(0, 4), "channels"),
]


@pytest.mark.parametrize("what, bad, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_gated_inputs_are_refused_with_the_shapes(what, bad, match):
    with pytest.raises(ValueError, match=match):
        bad()

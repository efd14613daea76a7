"""Multi-head attention (lesson 4) against nn.MultiheadAttention with copied weights, masks
included; split/merge by reshape; parameter and multiply-add counts against PyTorch's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.profiling import count_multiply_adds

from .tolerances import TOLERANCES


def _mha(embed_dim, num_heads, device, dtype=torch.float32, seed=0, **kwargs):
    """An nn.MultiheadAttention with non-zero biases, so that copying them is tested too."""
    torch.manual_seed(seed)
    mha = (
        nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, **kwargs)
        .to(device, dtype)
        .eval()
    )
    with torch.no_grad():
        for name, p in mha.named_parameters():
            if "bias" in name:
                p.normal_()
    return mha


def test_split_heads_takes_contiguous_column_blocks(device):
    x = torch.arange(2 * 3 * 12, dtype=torch.float32, device=device).reshape(2, 3, 12)
    heads = rpt.split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)
    for i in range(4):  # head i = columns 3i .. 3i+2, the paper's W_i^Q block of W^Q
        torch.testing.assert_close(heads[:, i], x[..., 3 * i : 3 * i + 3])
    torch.testing.assert_close(rpt.merge_heads(heads), x)
    np.testing.assert_array_equal(rnp.split_heads(x.cpu().numpy(), 4), heads.cpu().numpy())
    np.testing.assert_array_equal(rnp.merge_heads(heads.cpu().numpy()), x.cpu().numpy())
    # merge is Concat(head_1, ..., head_h) along the features
    torch.testing.assert_close(rpt.merge_heads(heads), torch.cat(heads.unbind(1), dim=-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize(
    "n_q,n_k,mask_kind",
    [
        (6, 6, None),
        (6, 6, "causal"),
        (5, 9, "padding"),
        (7, 7, "causal+padding"),
        (1, 4, None),
        (4, 1, None),
    ],
)
def test_matches_nn_multihead_attention(device, dtype, n_q, n_k, mask_kind):
    d_model, h, batch = 32, 4, 3
    mha = _mha(d_model, h, device, dtype)
    gen = torch.Generator().manual_seed(n_q * 10 + n_k)
    query = torch.randn(batch, n_q, d_model, generator=gen, dtype=dtype).to(device)
    memory = (
        query
        if n_q == n_k
        else torch.randn(batch, n_k, d_model, generator=gen, dtype=dtype).to(device)
    )
    ours, torch_kwargs = None, {}
    if mask_kind and "causal" in mask_kind:
        ours = rpt.causal_mask(n_q, n_k, device=device)
        torch_kwargs["attn_mask"] = ~ours  # nn.MultiheadAttention: True = ignore
    if mask_kind and "padding" in mask_kind:
        pad = rpt.padding_mask(torch.tensor([n_k, max(1, n_k - 3), 2], device=device), n_k)
        ours = pad if ours is None else ours & pad
        torch_kwargs["key_padding_mask"] = rpt.to_key_padding_mask(pad)
    want, want_weights = mha(query, memory, memory, average_attn_weights=False, **torch_kwargs)
    got, weights = rpt.multi_head_attention(
        query, memory, memory, rpt.params_from_torch(mha), h, mask=ours, return_weights=True
    )
    assert got.dtype == dtype and got.device.type == device.type
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    torch.testing.assert_close(weights, want_weights, **TOLERANCES[dtype])
    np_params = {k: v.cpu().numpy() for k, v in rpt.params_from_torch(mha).items()}
    np_got = rnp.multi_head_attention(
        query.cpu().numpy(),
        memory.cpu().numpy(),
        memory.cpu().numpy(),
        np_params,
        h,
        mask=None if ours is None else ours.cpu().numpy(),
    )
    np.testing.assert_allclose(np_got, want.detach().cpu().numpy(), **TOLERANCES[dtype])


def test_separate_key_value_widths_and_no_bias(device):
    """kdim/vdim != d_model stores q/k/v_proj_weight separately; bias=False has no biases at all."""
    mha = _mha(16, 2, device, kdim=10, vdim=6, bias=False)
    params = rpt.params_from_torch(mha)
    assert set(params) == {"w_q", "w_k", "w_v", "w_o"}
    assert params["w_k"].shape == (10, 16) and params["w_v"].shape == (6, 16)
    q, k, v = (
        torch.randn(2, 5, 16, device=device),
        torch.randn(2, 3, 10, device=device),
        torch.randn(2, 3, 6, device=device),
    )
    # query width differs from the keys': cross widths checked
    with pytest.raises(ValueError, match="d_model"):
        rpt.multi_head_attention(k, k, v, params, 2)
    torch.testing.assert_close(rpt.multi_head_attention(q, k, v, params, 2), mha(q, k, v)[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_follows_float32(device, dtype):
    mha = _mha(32, 4, device)
    x = torch.randn(2, 6, 32, device=device)
    params = rpt.params_from_torch(mha)
    want = rpt.multi_head_attention(x, x, x, params, 4, mask=rpt.causal_mask(6, device=device))
    half = {k: v.to(dtype) for k, v in params.items()}
    got = rpt.multi_head_attention(
        x.to(dtype), x.to(dtype), x.to(dtype), half, 4, mask=rpt.causal_mask(6, device=device)
    )
    assert got.dtype == dtype and torch.isfinite(got).all()
    torch.testing.assert_close(got.float(), want, rtol=5e-2, atol=5e-2)


def test_fully_masked_query_gives_the_output_bias():
    """A query that may attend to nothing gets zero attention output; W^O then adds only b_o."""
    mha = _mha(8, 2, "cpu")
    params = rpt.params_from_torch(mha)
    x = torch.randn(1, 3, 8)
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, True]])
    out = rpt.multi_head_attention(x, x, x, params, 2, mask=mask)
    torch.testing.assert_close(out[0, 0], params["b_o"])
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("d_model,h", [(512, 8), (768, 12), (1024, 16), (64, 1)])
def test_parameter_count_matches_nn_multihead_attention(d_model, h):
    for bias in (True, False):
        mha = nn.MultiheadAttention(d_model, h, bias=bias)
        assert rnp.parameter_count(d_model, h, bias=bias) == sum(
            p.numel() for p in mha.parameters()
        )
    # d_k = d_v = d_model / h: the count does not depend on h (4 d_model^2 weights)
    assert rnp.parameter_count(d_model, h, bias=False) == 4 * d_model**2


@pytest.mark.parametrize("n_q,n_k,d_model,h", [(10, 7, 64, 8), (16, 16, 64, 1), (5, 12, 48, 3)])
def test_multiply_adds_match_the_flop_counter(n_q, n_k, d_model, h):
    params = rpt.init_params(d_model, h, torch.Generator().manual_seed(0))
    query, memory = torch.randn(1, n_q, d_model), torch.randn(1, n_k, d_model)
    with FlopCounterMode(display=False) as counter:
        rpt.multi_head_attention(query, memory, memory, params, h)
    # a multiply-add = 2 FLOPs
    assert counter.get_total_flops() == 2 * rnp.multiply_adds(n_q, n_k, d_model, h)
    assert len({rnp.multiply_adds(n_q, n_k, d_model, heads) for heads in (1, 2, 4, 8, 16)}) == 1
    # Lesson 4 grades count_multiply_adds with the course's own counter (no seconds-long start):
    # it must see exactly what PyTorch's FLOP counter sees.
    _, counted = count_multiply_adds(rpt.multi_head_attention, query, memory, memory, params, h)
    assert 2 * counted == counter.get_total_flops()


def test_bad_input_is_named():
    params = rnp.init_params(16, 4, np.random.default_rng(0))
    x = np.zeros((2, 5, 16))
    with pytest.raises(ValueError, match="num_heads = 3"):
        rnp.split_heads(x, 3)
    with pytest.raises(ValueError, match="not a multiple of num_heads = 3"):  # 16 columns, 3 heads
        rnp.multi_head_attention(x, x, x, params, 3)
    with pytest.raises(ValueError, match="w_o"):
        rnp.multi_head_attention(x, x, x, {k: v for k, v in params.items() if k != "w_o"}, 4)
    with pytest.raises(ValueError, match=r"d_model.*\(2, 5, 12\)"):
        rnp.multi_head_attention(np.zeros((2, 5, 12)), x, x, params, 4)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        rnp.multi_head_attention(x, x, x, params, 0)
    with pytest.raises(ValueError, match="not divisible"):
        rnp.init_params(10, 4)
    with pytest.raises(TypeError, match="query"):
        rpt.multi_head_attention(x, x, x, params, 4)  # NumPy arrays given to the PyTorch reference
    with pytest.raises(TypeError, match="MultiheadAttention"):
        rpt.params_from_torch(nn.Linear(4, 4))

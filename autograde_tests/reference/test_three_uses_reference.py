"""The three uses of attention (lesson 5) against nn.MultiheadAttention wired as the Transformer
wires it, and against nn.TransformerDecoderLayer's own causal mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import attention_ref.np as rnp
import attention_ref.pt as rpt

from .tolerances import TOLERANCES


def _mha(d_model, h, device, dtype, seed):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(d_model, h, batch_first=True).to(device, dtype).eval()
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    return mha


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_the_three_wirings_match_nn_multihead_attention(device, dtype):
    d_model, h, n_src, n_tgt = 24, 4, 7, 5
    src_lengths, tgt_lengths = (
        torch.tensor([7, 4, 1], device=device),
        torch.tensor([5, 5, 2], device=device),
    )
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, n_src, d_model, generator=gen, dtype=dtype).to(device)
    y = torch.randn(3, n_tgt, d_model, generator=gen, dtype=dtype).to(device)
    src_pad, tgt_pad = rpt.padding_mask(src_lengths, n_src), rpt.padding_mask(tgt_lengths, n_tgt)
    tol = TOLERANCES[dtype]

    mha = _mha(d_model, h, device, dtype, 1)
    params = rpt.params_from_torch(mha)
    got, weights = rpt.encoder_self_attention(x, params, h, src_pad, return_weights=True)
    torch.testing.assert_close(
        got, mha(x, x, x, key_padding_mask=rpt.to_key_padding_mask(src_pad))[0], **tol
    )
    assert weights.shape == (3, h, n_src, n_src)

    # The decoder's self-attention: nn.Transformer's own causal mask (float, -inf above the
    # diagonal)
    causal = nn.Transformer.generate_square_subsequent_mask(n_tgt, device=device, dtype=dtype)
    got, weights = rpt.decoder_self_attention(y, params, h, tgt_pad, return_weights=True)
    # float like the causal mask (PyTorch wants one type)
    ignore = torch.zeros(tgt_pad.shape[0], n_tgt, dtype=dtype, device=device).masked_fill(
        rpt.to_key_padding_mask(tgt_pad), -torch.inf
    )
    want = mha(y, y, y, attn_mask=causal, key_padding_mask=ignore)[0]
    torch.testing.assert_close(got, want, **tol)
    assert weights.shape == (3, h, n_tgt, n_tgt)
    assert torch.all(weights.triu(1) == 0), "no weight on a future position"

    got, weights = rpt.encoder_decoder_attention(y, x, params, h, src_pad, return_weights=True)
    torch.testing.assert_close(
        got, mha(y, x, x, key_padding_mask=rpt.to_key_padding_mask(src_pad))[0], **tol
    )
    assert weights.shape == (3, h, n_tgt, n_src)
    assert torch.all(weights[1, :, :, 4:] == 0), "padded source keys get exactly zero weight"

    np_params = {k: v.cpu().numpy() for k, v in params.items()}
    np.testing.assert_allclose(
        rnp.decoder_self_attention(y.cpu().numpy(), np_params, h, tgt_pad.cpu().numpy()),
        rpt.decoder_self_attention(y, params, h, tgt_pad).cpu().numpy(),
        **tol,
    )
    np.testing.assert_allclose(
        rnp.encoder_decoder_attention(
            y.cpu().numpy(), x.cpu().numpy(), np_params, h, src_pad.cpu().numpy()
        ),
        rpt.encoder_decoder_attention(y, x, params, h, src_pad).cpu().numpy(),
        **tol,
    )


def test_decoder_self_attention_has_no_leftward_information_flow(device):
    """Changing a future token changes no earlier output: the auto-regressive property."""
    params = rpt.init_params(16, 2, torch.Generator().manual_seed(0), device=device)
    y = torch.randn(2, 6, 16, device=device)
    changed = y.clone()
    changed[:, 4] += 10.0
    a, b = rpt.decoder_self_attention(y, params, 2), rpt.decoder_self_attention(changed, params, 2)
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_combine_masks(device):
    causal = rpt.causal_mask(4, device=device)
    pad = rpt.padding_mask(torch.tensor([4, 2], device=device), 4)
    both = rpt.combine_masks(causal, None, pad)
    assert both.shape == (2, 4, 4)
    torch.testing.assert_close(
        both[1], causal & torch.tensor([True, True, False, False], device=device)
    )
    assert rpt.combine_masks(None, None) is None
    np.testing.assert_array_equal(
        rnp.combine_masks(causal.cpu().numpy(), pad.cpu().numpy()), both.cpu().numpy()
    )
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        rpt.combine_masks(causal, torch.ones(3, 3, dtype=torch.bool, device=device))
    with pytest.raises(TypeError, match="boolean"):
        rnp.combine_masks(np.ones((2, 2)))


@pytest.mark.parametrize(
    "src_lengths, tgt_lengths, n_src, n_tgt",
    [([5, 3], [6, 4], 5, 6), ([1, 7, 4], [3, 1, 8], 7, 8), ([2], [2], 2, 2)],
)
def test_transformer_masks_are_pytorchs_masks_inverted(
    device, src_lengths, tgt_lengths, n_src, n_tgt
):
    """The three masks are what nn.Transformer is given (True = ignore there), inverted and
    broadcast."""
    src, tgt = torch.tensor(src_lengths, device=device), torch.tensor(tgt_lengths, device=device)
    src_mask, tgt_mask, memory_mask = rpt.transformer_masks(src, tgt, n_src, n_tgt)
    batch = len(src_lengths)
    assert src_mask.shape == (batch, n_src, n_src) and src_mask.dtype == torch.bool
    assert tgt_mask.shape == (batch, n_tgt, n_tgt) and memory_mask.shape == (batch, n_tgt, n_src)
    assert src_mask.device.type == tgt_mask.device.type == memory_mask.device.type == device.type
    src_ignore = torch.arange(n_src, device=device)[None, :] >= src[:, None]  # src_key_padding_mask
    tgt_ignore = torch.arange(n_tgt, device=device)[None, :] >= tgt[:, None]  # tgt_key_padding_mask
    # tgt_mask
    future = nn.Transformer.generate_square_subsequent_mask(n_tgt, device=device) == -torch.inf
    assert torch.equal(src_mask, ~src_ignore[:, None, :].expand(batch, n_src, n_src))
    assert torch.equal(tgt_mask, ~(future[None] | tgt_ignore[:, None, :]))
    assert torch.equal(memory_mask, ~src_ignore[:, None, :].expand(batch, n_tgt, n_src))
    for got, want in zip(
        rnp.transformer_masks(src_lengths, tgt_lengths, n_src, n_tgt),
        (src_mask, tgt_mask, memory_mask),
    ):
        np.testing.assert_array_equal(got, want.cpu().numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_transformer_masks_drive_the_wirings_like_nn_transformer_decoder_layer(device, dtype):
    """The masks given to the three wirings reproduce nn.TransformerDecoderLayer's two attentions
    called with generate_square_subsequent_mask and key padding masks; zero weight exactly where
    masked."""
    d_model, h, n_src, n_tgt = 16, 4, 6, 5
    src, tgt = torch.tensor([6, 2, 4], device=device), torch.tensor([5, 3, 1], device=device)
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(3, n_src, d_model, generator=gen, dtype=dtype).to(device)
    y = torch.randn(3, n_tgt, d_model, generator=gen, dtype=dtype).to(device)
    torch.manual_seed(3)
    layer = nn.TransformerDecoderLayer(
        d_model, h, dim_feedforward=32, dropout=0.0, batch_first=True
    )
    layer = layer.to(device, dtype).eval()
    src_mask, tgt_mask, memory_mask = rpt.transformer_masks(src, tgt, n_src, n_tgt)
    tol = TOLERANCES[dtype]
    src_ignore = torch.zeros(3, n_src, dtype=dtype, device=device).masked_fill(
        torch.arange(n_src, device=device)[None] >= src[:, None], -torch.inf
    )
    tgt_ignore = torch.zeros(3, n_tgt, dtype=dtype, device=device).masked_fill(
        torch.arange(n_tgt, device=device)[None] >= tgt[:, None], -torch.inf
    )
    causal = nn.Transformer.generate_square_subsequent_mask(n_tgt, device=device, dtype=dtype)

    self_params = rpt.params_from_torch(layer.self_attn)
    got, weights = rpt.decoder_self_attention(y, self_params, h, tgt_mask, return_weights=True)
    want = layer.self_attn(
        y, y, y, attn_mask=causal, key_padding_mask=tgt_ignore, need_weights=False
    )[0]
    torch.testing.assert_close(got, want, **tol)
    assert torch.equal(weights != 0, tgt_mask[:, None].expand_as(weights))

    cross_params = rpt.params_from_torch(layer.multihead_attn)
    got, weights = rpt.encoder_decoder_attention(
        y, x, cross_params, h, memory_mask, return_weights=True
    )
    want = layer.multihead_attn(y, x, x, key_padding_mask=src_ignore, need_weights=False)[0]
    torch.testing.assert_close(got, want, **tol)
    assert torch.equal(weights != 0, memory_mask[:, None].expand_as(weights))

    got, weights = rpt.encoder_self_attention(x, self_params, h, src_mask, return_weights=True)
    assert torch.equal(weights != 0, src_mask[:, None].expand_as(weights))


def test_transformer_masks_reject_mismatched_batches():
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        rnp.transformer_masks([3, 2, 1], [4, 4], 3, 4)
    with pytest.raises(ValueError, match="lengths"):
        rpt.transformer_masks(torch.tensor([3, 2]), torch.tensor([5, 4]), 3, 4)  # 5 > n_tgt = 4
    with pytest.raises(ValueError, match="1-D"):
        rnp.transformer_masks([[3, 2]], [[4, 4]], 3, 4)

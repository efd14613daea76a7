"""Masks (lesson 3) against PyTorch: is_causal, attn_mask, and nn.MultiheadAttention's
key_padding_mask with its opposite convention."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt


@pytest.mark.parametrize("n_q,n_k", [(1, 1), (5, 5), (3, 7), (6, 2)])
def test_causal_mask_matches_is_causal(device, n_q, n_k):
    mask = rpt.causal_mask(n_q, n_k, device=device)
    assert mask.dtype == torch.bool and mask.device.type == device.type
    np.testing.assert_array_equal(rnp.causal_mask(n_q, n_k), mask.cpu().numpy())
    q, k, v = (torch.randn(2, n, 4, device=device) for n in (n_q, n_k, n_k))
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )
    torch.testing.assert_close(
        rpt.scaled_dot_product_attention(q, k, v, mask),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


def test_padding_mask_shapes_and_broadcasting(device):
    lengths = torch.tensor([3, 1, 5], device=device)
    mask = rpt.padding_mask(lengths, 5)
    assert mask.shape == (3, 1, 5) and mask.device.type == device.type
    expected = np.array([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=bool)[:, None, :]
    np.testing.assert_array_equal(mask.cpu().numpy(), expected)
    np.testing.assert_array_equal(rnp.padding_mask([3, 1, 5], 5), expected)
    # scores (batch, n_q, n_k) and, with heads, (batch, h, n_q, n_k): padded keys get exactly zero
    scores = torch.randn(3, 4, 5, device=device)
    weights = rpt.masked_softmax(scores, mask)
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
    heads = rpt.masked_softmax(torch.randn(3, 8, 4, 5, device=device), mask[:, None])
    assert (heads[1, :, :, 1:] == 0).all()
    torch.testing.assert_close(heads.sum(-1), torch.ones(3, 8, 4, device=device))


def test_key_padding_mask_is_the_opposite_convention(device):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(device)
    x = torch.randn(3, 5, 8, device=device)
    lengths = torch.tensor([5, 2, 4], device=device)
    ours = rpt.padding_mask(lengths, 5)
    _, weights = mha(
        x, x, x, key_padding_mask=rpt.to_key_padding_mask(ours), average_attn_weights=False
    )
    # nn.MultiheadAttention gives padded keys zero weight exactly where our mask says False
    assert (weights.masked_select(~ours[:, None].expand_as(weights)) == 0).all()
    assert (weights.masked_select(ours[:, None].expand_as(weights)) > 0).all()
    np.testing.assert_array_equal(
        rnp.to_key_padding_mask(ours.cpu().numpy()), ~ours[:, 0].cpu().numpy()
    )


def test_masked_softmax_fully_masked_rows_and_huge_scores(device):
    scores = torch.tensor([[1e4, -1e4, 3.0], [0.0, 1.0, 2.0]], device=device)
    mask = torch.tensor([[True, True, False], [False, False, False]], device=device)
    got = rpt.masked_softmax(scores, mask)
    torch.testing.assert_close(got, torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], device=device))
    np.testing.assert_allclose(
        rnp.masked_softmax(scores.cpu().numpy(), mask.cpu().numpy()), got.cpu().numpy()
    )


def test_masks_refuse_bad_input():
    with pytest.raises(ValueError, match=r"\[0, n_k = 4\]"):
        rnp.padding_mask([2, 5], 4)
    with pytest.raises(ValueError, match="integer"):
        rnp.padding_mask([1.5, 2.0], 4)
    with pytest.raises(TypeError, match="boolean"):
        rnp.masked_softmax(np.zeros((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        rnp.masked_softmax(np.zeros((2, 3)), np.ones((3, 2), dtype=bool))
    with pytest.raises(ValueError, match="lengths"):
        rpt.padding_mask(torch.tensor([1.0]), 3)

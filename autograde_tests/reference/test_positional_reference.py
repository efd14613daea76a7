"""Sinusoidal positional encoding (lesson 7): the formula computed another way (the
exp/log form of PyTorch's own tutorials), PE(pos + k) as a fixed linear map, and the permutation
equivariance of self-attention that it breaks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attention_ref.np as rnp
import attention_ref.pt as rpt


def _tutorial_pe(n, d_model):
    """The common PyTorch formulation: div_term = exp(2i * -ln(10000) / d_model), float64."""
    position = torch.arange(n, dtype=torch.float64)[:, None]
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    pe = torch.zeros(n, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


@pytest.mark.parametrize("n,d_model", [(1, 2), (50, 16), (128, 512), (7, 6)])
def test_formula(device, n, d_model):
    want = _tutorial_pe(n, d_model)
    np.testing.assert_allclose(
        rnp.positional_encoding(n, d_model), want.numpy(), rtol=1e-12, atol=1e-12
    )
    got = rpt.positional_encoding(n, d_model, device=device)
    assert (
        got.dtype == torch.float32 and got.device.type == device.type and got.shape == (n, d_model)
    )
    torch.testing.assert_close(got.cpu(), want.float())
    # the paper's formula (§3.5), cell by cell: PE(pos, 2i) = sin(pos / 10000^(2i / d_model))
    pos, i = n - 1, d_model // 2 - 1
    assert math.isclose(
        rnp.positional_encoding(n, d_model)[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / d_model))
    )
    assert math.isclose(
        rnp.positional_encoding(n, d_model)[pos, 2 * i + 1],
        math.cos(pos / 10000 ** (2 * i / d_model)),
    )


@pytest.mark.parametrize("k", [1, 5, 37, -3])
def test_shift_is_a_fixed_linear_map(device, k):
    pe = rnp.positional_encoding(100, 32)
    m = rnp.shift_matrix(k, 32)
    lo, hi = max(0, -k), min(100, 100 - k)
    np.testing.assert_allclose(pe[lo:hi] @ m, pe[lo + k : hi + k], atol=1e-12)
    np.testing.assert_allclose(m @ m.T, np.eye(32), atol=1e-12)  # a rotation: orthogonal
    mt = rpt.shift_matrix(k, 32, device=device, dtype=torch.float64)
    np.testing.assert_allclose(mt.cpu().numpy(), m, atol=1e-12)


def test_self_attention_is_permutation_equivariant_until_positions_are_added(device):
    params = rpt.init_params(
        16, 4, torch.Generator().manual_seed(0), device=device, dtype=torch.float64
    )
    x = torch.randn(2, 9, 16, dtype=torch.float64, device=device)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1)).to(device)
    out = rpt.encoder_self_attention(x, params, 4)
    torch.testing.assert_close(rpt.encoder_self_attention(x[:, perm], params, 4), out[:, perm])
    with_pe = rpt.encoder_self_attention(rpt.add_positional_encoding(x), params, 4)
    permuted_then_pe = rpt.encoder_self_attention(
        rpt.add_positional_encoding(x[:, perm]), params, 4
    )
    assert not torch.allclose(permuted_then_pe, with_pe[:, perm]), "positions make order visible"


def test_add_and_bad_sizes(device):
    x = torch.zeros(3, 5, 8, device=device, dtype=torch.float16)
    added = rpt.add_positional_encoding(x)
    assert added.dtype == torch.float16
    torch.testing.assert_close(
        added[1].float().cpu(),
        torch.tensor(rnp.positional_encoding(5, 8), dtype=torch.float16).float(),
    )
    for bad in (7, 0, -2):
        with pytest.raises(ValueError, match="even"):
            rnp.positional_encoding(4, bad)
    with pytest.raises(ValueError, match="n_positions"):
        rpt.positional_encoding(-1, 8)

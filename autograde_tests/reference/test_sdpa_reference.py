"""Scaled dot-product attention (lessons 2-3) against F.scaled_dot_product_attention.

Shapes x dtypes x devices x masks (none, causal, padding, 2-D masks on 4-D scores, fully
masked rows), NumPy and PyTorch twins alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref import _batching
from attention_ref.np import sdpa_tuned as tuned_np
from attention_ref.pt import sdpa_tuned as tuned_pt

from .tolerances import FLOAT_DTYPES, TOLERANCES

SHAPES = [  # queries, keys, values
    ((1, 8), (1, 8), (1, 8)),
    ((5, 16), (7, 16), (7, 4)),
    ((2, 8, 6, 64), (2, 8, 9, 64), (2, 8, 9, 64)),  # h = 8 heads of d_k = 64, as in the paper
    ((3, 1, 4, 8), (1, 2, 6, 8), (1, 2, 6, 5)),
]


def _randn(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)


def _reference_sdpa(q, k, v, mask):
    """F.scaled_dot_product_attention, with its NaN for fully masked rows (on some backends)
    replaced by the zero output the course's convention asks for."""
    if mask is not None:  # spelled out in full: the built-in rejects some broadcastable masks
        mask = mask.expand(
            torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
        )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if mask is not None:
        fully = ~mask.any(dim=-1, keepdim=True)
        out = out.masked_fill(fully.expand(out.shape[:-1] + (1,)), 0.0) if fully.any() else out
    return out


def _masks(n_q, n_k, batch, device):
    gen = torch.Generator().manual_seed(7)
    yield "none", None
    yield "causal", torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q).to(device)
    yield "random", (torch.rand(batch + (n_q, n_k), generator=gen) > 0.3).to(device)
    padding = torch.arange(n_k) < max(1, n_k - 2)  # the last two keys are padding
    yield "padding", padding.to(device)  # a 1-D mask broadcast over queries, heads and batch


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_sdpa_matches_torch(device, dtype, shapes):
    q, k, v = (_randn(s, dtype, device, seed=i) for i, s in enumerate(shapes))
    batch = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]))
    for name, mask in _masks(q.shape[-2], k.shape[-2], batch, device):
        got = rpt.scaled_dot_product_attention(q, k, v, mask=mask)
        want = _reference_sdpa(q, k, v, mask)
        assert got.dtype == dtype and got.device == q.device, name
        torch.testing.assert_close(
            got, want, **TOLERANCES[dtype], msg=lambda m: f"mask {name}: {m}"
        )
        if dtype in (torch.float32, torch.float64):
            np_mask = None if mask is None else mask.cpu().numpy()
            np_out = rnp.scaled_dot_product_attention(
                *(t.cpu().numpy() for t in (q, k, v)), mask=np_mask
            )
            np.testing.assert_allclose(
                np_out, want.cpu().numpy(), **TOLERANCES[dtype], err_msg=name
            )


def test_is_causal_equals_a_lower_triangular_mask(device):
    q, k, v = (_randn((2, 4, 6, 8), torch.float32, device, seed=i) for i in range(3))
    causal = torch.ones(6, 6, dtype=torch.bool, device=device).tril()
    torch.testing.assert_close(
        rpt.scaled_dot_product_attention(q, k, v, mask=causal),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


def test_fully_masked_rows_give_zero_weights_and_output(device):
    q, k, v = (_randn((2, 3, 4), torch.float32, device, seed=i) for i in range(3))
    mask = torch.ones(2, 3, 3, dtype=torch.bool, device=device)
    mask[1, 2] = False  # the third query of the second sequence may attend to nothing
    weights = rpt.attention_weights(q, k, mask)
    out = rpt.scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (weights[1, 2] == 0).all() and (out[1, 2] == 0).all()
    torch.testing.assert_close(weights.sum(-1)[0], torch.ones(3, device=device))
    np_w = rnp.attention_weights(q.cpu().numpy(), k.cpu().numpy(), mask.cpu().numpy())
    assert np.isfinite(np_w).all() and (np_w[1, 2] == 0).all()


def test_gradients_flow_and_stay_finite_with_masks(device):
    q = _randn((2, 5, 8), torch.float32, device, seed=1).requires_grad_()
    k, v = (_randn((2, 5, 8), torch.float32, device, seed=i) for i in (2, 3))
    mask = torch.ones(5, 5, dtype=torch.bool, device=device).tril()
    mask[0] = False  # one fully masked row
    rpt.scaled_dot_product_attention(q, k, v, mask).sum().backward()
    assert torch.isfinite(q.grad).all()


def test_masks_must_be_boolean_and_fit():
    q = np.ones((2, 3, 4))
    with pytest.raises(TypeError, match="boolean"):
        rnp.scaled_dot_product_attention(q, q, q, mask=np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        rnp.scaled_dot_product_attention(q, q, q, mask=np.ones((4, 3), dtype=bool))
    t = torch.ones(2, 3, 4)
    with pytest.raises(TypeError, match="boolean"):
        rpt.scaled_dot_product_attention(t, t, t, mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        rpt.scaled_dot_product_attention(t, t, t, mask=torch.ones(2, 3, 4, dtype=torch.bool))


def test_huge_logits_stay_finite(device):
    q = 1e3 * _randn((3, 4, 16), torch.float32, device, seed=5)
    k, v = (_randn((3, 6, 16), torch.float32, device, seed=i) for i in (6, 7))
    got = rpt.scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shapes",
    [
        ((3, 4, 6, 8), (3, 4, 9, 8), (3, 4, 9, 5), (4, 6, 9)),  # a (n_q, n_k) mask per head
        ((3, 1, 6, 8), (1, 4, 9, 8), (9, 5), (3, 1, 6, 9)),  # broadcast batch axes, 2-D values
        ((5, 6, 8), (9, 8), (9, 5), (9,)),  # a 1-D mask
        ((6, 8), (9, 8), (2, 3, 9, 5), None),  # the batch comes from the values alone
        ((70, 8), (80, 8), (80, 5), None),  # one head: never split
    ],
    ids=str,
)
def test_the_tuned_eq1_equals_the_reference(monkeypatch, shapes):
    """make bench times attention_ref.{np,pt}.sdpa_tuned: above CHUNK_ENTRIES score entries it
    computes a few heads at a time (their scores stay in the cache). It gives the reference's
    numbers (lesson 2's Eq. (1) as written), masks, fully masked rows and errors too."""
    rng = np.random.default_rng(5)
    *arrays, mask_shape = shapes
    q, k, v = (rng.standard_normal(s) for s in arrays)
    mask = None if mask_shape is None else rng.random(mask_shape) > 0.3
    if mask is not None and mask.ndim >= 2:
        mask[..., 0, :] = False  # a query with nothing to attend to
    whole = rnp.scaled_dot_product_attention(q, k, v, mask)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    tmask = None if mask is None else torch.from_numpy(mask)
    t_whole = rpt.scaled_dot_product_attention(tq, tk, tv, tmask)
    np.testing.assert_allclose(tuned_np.scaled_dot_product_attention(q, k, v, mask), whole)
    monkeypatch.setattr(_batching, "CHUNK_ENTRIES", 60)
    np.testing.assert_allclose(
        tuned_np.scaled_dot_product_attention(q, k, v, mask), whole, rtol=1e-12
    )
    with torch.no_grad():  # the PyTorch one splits on the CPU, without autograd
        split = tuned_pt.scaled_dot_product_attention(tq, tk, tv, tmask)
    torch.testing.assert_close(split, t_whole, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(split.numpy(), whole, rtol=1e-10, atol=1e-12)
    if mask is not None and mask.ndim >= 2:
        too_big = np.ones((7,) + mask.shape, dtype=bool)
        with pytest.raises(ValueError, match="does not broadcast"):  # the mask must fit the scores
            tuned_np.scaled_dot_product_attention(q, k, v, too_big)
        with pytest.raises(ValueError, match="does not broadcast"), torch.no_grad():
            tuned_pt.scaled_dot_product_attention(tq, tk, tv, torch.from_numpy(too_big))
        with pytest.raises(TypeError, match="boolean"):
            tuned_np.scaled_dot_product_attention(q, k, v, mask.astype(int))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_the_tuned_eq1_equals_the_reference_on_every_device(device, dtype, shapes):
    """With and without autograd, on every device and dtype: the reference's numbers (and the
    reference's gradients, which the tuned one computes with the reference itself)."""
    q, k, v = (_randn(s, dtype, device, seed=i) for i, s in enumerate(shapes))
    mask = torch.rand(q.shape[-2], k.shape[-2], generator=torch.Generator().manual_seed(3)) > 0.4
    mask[0] = False  # a query with nothing to attend to
    mask = mask.to(device)
    with torch.no_grad():
        want = rpt.scaled_dot_product_attention(q, k, v, mask)
        torch.testing.assert_close(tuned_pt.scaled_dot_product_attention(q, k, v, mask), want)
    q.requires_grad_(True)
    got = tuned_pt.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(got, want)
    (grad,) = torch.autograd.grad(got.float().sum(), q)
    assert torch.isfinite(grad).all()
    if dtype in (torch.float32, torch.float64):
        np_q, np_k, np_v = (t.detach().cpu().numpy() for t in (q, k, v))
        np.testing.assert_allclose(
            tuned_np.scaled_dot_product_attention(np_q, np_k, np_v, mask.cpu().numpy()),
            rnp.scaled_dot_product_attention(np_q, np_k, np_v, mask.cpu().numpy()),
        )

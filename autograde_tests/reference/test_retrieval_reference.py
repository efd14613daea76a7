"""Lesson 1's reference functions against PyTorch's own implementations.

Shapes x dtypes x devices; the NumPy and PyTorch twins must agree with the built-ins and with
each other, and refuse bad input with errors that name what is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt

from .tolerances import FLOAT_DTYPES, TOLERANCES

SHAPES_QK = [  # (queries, keys, values)
    ((1, 4), (1, 4), (1, 3)),  # a single query and a single key
    ((1, 8), (5, 8), (5, 2)),  # a single query: the original soft lookup
    ((2, 6, 16), (2, 9, 16), (2, 9, 4)),
    ((3, 2, 5, 8), (3, 2, 7, 8), (3, 2, 7, 8)),
    ((2, 1, 4, 8), (1, 3, 6, 8), (1, 3, 6, 5)),  # batch dimensions that broadcast
]


def _randn(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape,axis", [((7,), -1), ((3, 5), 0), ((2, 3, 4, 5), 1), ((4, 6), -1)])
def test_softmax_matches_torch_softmax(device, dtype, shape, axis):
    x = 4 * _randn(shape, dtype, device, seed=1)
    got = rpt.softmax(x, axis=axis)
    assert got.dtype == dtype and got.device == x.device
    half = dtype in (torch.float16, torch.bfloat16)
    want = torch.softmax(x.float() if half else x, dim=axis).to(dtype)
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    if dtype in (torch.float32, torch.float64):
        np.testing.assert_allclose(
            rnp.softmax(x.cpu().numpy(), axis=axis), got.cpu().numpy(), **TOLERANCES[dtype]
        )


@pytest.mark.parametrize("scale", [1e3, 1e4, -1e4])
def test_softmax_is_stable_for_huge_logits(device, scale):
    x = scale * _randn((4, 9), torch.float32, device, seed=2)
    got = rpt.softmax(x)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, torch.softmax(x, dim=-1))
    with np.errstate(over="raise", invalid="raise"):  # no overflow, not even a warning
        got_np = rnp.softmax(x.cpu().double().numpy())
    np.testing.assert_allclose(got_np, torch.softmax(x.double(), -1).cpu().numpy(), atol=1e-12)


def test_softmax_of_an_all_minus_inf_row_is_zero(device):
    x = torch.tensor([[0.0, 1.0], [-torch.inf, -torch.inf]], device=device)
    expected = torch.tensor([[1 / (1 + np.e), np.e / (1 + np.e)], [0.0, 0.0]], device=device)
    torch.testing.assert_close(rpt.softmax(x), expected)
    np.testing.assert_allclose(rnp.softmax(x.cpu().numpy()), expected.cpu().numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_plain_softmax_is_torch_softmax_nan_rows_included(device, dtype):
    """Lesson 3 imports it so that a masked softmax must handle a fully masked row itself."""
    x = 4 * _randn((3, 5), dtype, device, seed=3)
    x[1] = -torch.inf  # a query whose keys are all masked
    x[2, 1:] = -torch.inf  # one key left
    half = dtype in (torch.float16, torch.bfloat16)
    want = torch.softmax(x.float() if half else x, dim=-1).to(dtype)
    got = rpt.plain_softmax(x)
    assert got.dtype == dtype and got.device == x.device
    assert torch.isnan(got[1]).all() and not torch.isnan(got[[0, 2]]).any()
    torch.testing.assert_close(got, want, equal_nan=True, **TOLERANCES[dtype])
    if dtype in (torch.float32, torch.float64):
        with np.errstate(invalid="ignore"):
            got_np = rnp.plain_softmax(x.cpu().numpy())
        np.testing.assert_allclose(got_np, want.cpu().numpy(), equal_nan=True, **TOLERANCES[dtype])
        np.testing.assert_allclose(
            rnp.plain_softmax(x[[0, 2]].cpu().numpy(), axis=0),
            torch.softmax(x[[0, 2]], dim=0).cpu().numpy(),
            **TOLERANCES[dtype],
        )


def test_plain_softmax_refuses_what_softmax_refuses():
    for fn, scalar, ints in [
        (rnp.plain_softmax, np.float64(1.0), np.arange(3)),
        (rpt.plain_softmax, torch.tensor(1.0), torch.arange(3)),
    ]:
        with pytest.raises(ValueError, match="scalar"):
            fn(scalar)
        with pytest.raises(TypeError, match="floating"):
            fn(ints)
    assert rnp.plain_softmax(np.zeros((2, 0))).shape == (2, 0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shapes", SHAPES_QK, ids=str)
@pytest.mark.parametrize("temperature", [1.0, 0.4, 3.0])
def test_soft_lookup_matches_scaled_dot_product_attention(device, dtype, shapes, temperature):
    q, k, v = (_randn(s, dtype, device, seed=i) for i, s in enumerate(shapes))
    got = rpt.soft_lookup(q, k, v, temperature=temperature)
    want = F.scaled_dot_product_attention(q, k, v, scale=1.0 / temperature)
    assert got.shape == want.shape and got.dtype == dtype and got.device == q.device
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    if dtype in (torch.float32, torch.float64):
        np.testing.assert_allclose(
            rnp.soft_lookup(*(t.cpu().numpy() for t in (q, k, v)), temperature),
            want.cpu().numpy(),
            **TOLERANCES[dtype],
        )


@pytest.mark.parametrize("shapes", SHAPES_QK, ids=str)
def test_dot_scores_and_weighted_sum_match_einsum(device, shapes):
    q, k, v = (_randn(s, torch.float64, device, seed=10 + i) for i, s in enumerate(shapes))
    scores = rpt.dot_scores(q, k)
    torch.testing.assert_close(scores, torch.einsum("...qd,...kd->...qk", q, k))
    weights = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(
        rpt.weighted_sum(weights, v), torch.einsum("...qk,...kd->...qd", weights, v)
    )
    np.testing.assert_allclose(
        rnp.dot_scores(q.cpu().numpy(), k.cpu().numpy()), scores.cpu().numpy()
    )
    np.testing.assert_allclose(
        rnp.weighted_sum(weights.cpu().numpy(), v.cpu().numpy()),
        rpt.weighted_sum(weights, v).cpu().numpy(),
    )


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_normalize_weights_matches_l1_normalize(device, axis):
    s = _randn((3, 4, 5), torch.float64, device, seed=3).abs() + 0.01
    want = F.normalize(s, p=1, dim=axis)
    torch.testing.assert_close(rpt.normalize_weights(s, axis=axis), want)
    np.testing.assert_allclose(
        rnp.normalize_weights(s.cpu().numpy(), axis=axis), want.cpu().numpy()
    )


def test_kernel_regression_is_attention_with_embedded_inputs(device):
    """-(x - x_i)^2 / 2h^2 = (x x_i - x_i^2 / 2) / h^2 - x^2 / 2h^2, and the last term is the same
    for every key, so Nadaraya-Watson is SDPA with q = (x, 1), k = (x_i, -x_i^2/2), scale 1/h^2."""
    xq, xk, y = (
        _randn(s, torch.float64, device, seed=20 + i)
        for i, s in enumerate([(2, 7), (2, 5), (2, 5)])
    )
    h = 0.6
    q = torch.stack([xq, torch.ones_like(xq)], dim=-1)
    k = torch.stack([xk, -(xk**2) / 2], dim=-1)
    want = F.scaled_dot_product_attention(q, k, y[..., None], scale=1 / h**2)[..., 0]
    torch.testing.assert_close(rpt.kernel_regression(xq, xk, y, bandwidth=h), want)
    np.testing.assert_allclose(
        rnp.kernel_regression(*(t.cpu().numpy() for t in (xq, xk, y)), bandwidth=h),
        want.cpu().numpy(),
        rtol=1e-10,
    )


@pytest.mark.parametrize("backend", ["np", "pt"])
def test_bad_shapes_raise_value_errors_that_name_the_shapes(backend):
    lib, make = (rnp, np.ones) if backend == "np" else (rpt, lambda s: torch.ones(s))
    cases = [
        (
            lambda: lib.dot_scores(make((2, 3, 4)), make((2, 5, 3))),
            ["d_k", "(2, 3, 4)", "(2, 5, 3)"],
        ),
        (
            lambda: lib.dot_scores(make((2, 3, 4)), make((3, 5, 4))),
            ["broadcast", "(2, 3, 4)", "(3, 5, 4)"],
        ),
        (lambda: lib.weighted_sum(make((3, 4)), make((5, 2))), ["n_k", "(3, 4)", "(5, 2)"]),
        (
            lambda: lib.soft_lookup(make((3, 4)), make((5, 4)), make((6, 2))),
            ["n_k", "(5, 4)", "(6, 2)"],
        ),
        (lambda: lib.dot_scores(make((4,)), make((5, 4))), ["queries", "(4,)"]),
        (
            lambda: lib.soft_lookup(make((1, 4)), make((5, 4)), make((5, 2)), temperature=0.0),
            ["temperature"],
        ),
        (
            lambda: lib.kernel_regression(make((3,)), make((4,)), make((5,))),
            ["n_k", "(4,)", "(5,)"],
        ),
        (lambda: lib.normalize_weights(-make((2, 2))), ["non-negative"]),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as info:
            call()
        for word in words:
            assert word in str(info.value), f"{word!r} not in {info.value!r}"


def test_wrong_dtypes_raise_type_errors():
    with pytest.raises(TypeError, match="int64"):
        rnp.softmax(np.arange(3))
    with pytest.raises(TypeError, match="torch.int64"):
        rpt.softmax(torch.arange(3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        rpt.dot_scores(np.ones((2, 2)), torch.ones(2, 2))


def test_numpy_and_torch_modules_export_the_same_names_and_signatures():
    """Same names, same parameters; PyTorch may add keyword-only ones (e.g. ``device=`` where a
    function creates tensors from nothing). A ``dtype=`` default names each library's own type
    (``np.float64`` against ``torch.float32``), so only its presence is compared."""
    import inspect

    shared = set(rnp.__all__)
    assert shared <= set(rpt.__all__)

    def described(fn):  # names, kinds and defaults; annotations may name each library's types
        return [
            (p.name, p.kind, "a dtype" if p.name == "dtype" else p.default)
            for p in inspect.signature(fn).parameters.values()
        ]

    for name in shared:
        np_params, pt_params = described(getattr(rnp, name)), described(getattr(rpt, name))
        assert pt_params[: len(np_params)] == np_params, name
        extra = pt_params[len(np_params) :]
        assert all(kind is inspect.Parameter.KEYWORD_ONLY for _, kind, _ in extra), name

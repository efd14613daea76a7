"""Property tests (hypothesis) of the reference library's numerical edge cases.

Random shapes with the corner cases in them (one key, one query, no keys, an empty batch),
logits up to +-1e4, float64/32/16 and bfloat16 inputs, masks with fully masked rows. The
properties: no NaN or inf, rows of weights that sum to 1 (or are all zero when every key is
masked), and agreement with ``F.scaled_dot_product_attention`` evaluated in float64 on the same
(rounded) inputs. Inputs that do not fit raise a ValueError naming the shapes; inputs of the
wrong dtype raise a TypeError. Plain pytest + numpy + torch + hypothesis, on every device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attention_ref.np as rnp
import attention_ref.pt as rpt

from .tolerances import TOLERANCES

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


@st.composite
def problems(draw, masks: bool = True):
    """Shapes, dtype, logit scale, seed and mask for one attention problem."""
    batch = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    n_q, n_k = draw(st.integers(1, 6)), draw(st.integers(0, 6))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    return dict(
        batch=batch,
        n_q=n_q,
        n_k=n_k,
        d_k=d_k,
        d_v=d_v,
        dtype=draw(st.sampled_from(DTYPES)),
        scale=draw(st.sampled_from([1.0, 30.0, 1e4])),  # how large the logits get
        seed=draw(st.integers(0, 2**16)),
        mask=draw(st.sampled_from(["none", "random", "rows", "causal"] if masks else ["none"])),
    )


def _inputs(p, device):
    gen = torch.Generator().manual_seed(p["seed"])
    shape = lambda n, d: p["batch"] + (n, d)  # noqa: E731
    q = torch.randn(shape(p["n_q"], p["d_k"]), generator=gen, dtype=torch.float64)
    k = torch.randn(shape(p["n_k"], p["d_k"]), generator=gen, dtype=torch.float64)
    v = torch.randn(shape(p["n_k"], p["d_v"]), generator=gen, dtype=torch.float64)
    # logits q.k / sqrt(d_k) of about +-scale: unit keys, queries of length scale * sqrt(d_k)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-3)
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-3) * p["scale"] * p["d_k"] ** 0.5
    mask = None
    if p["mask"] == "random":
        mask = torch.rand(p["batch"] + (p["n_q"], p["n_k"]), generator=gen) > 0.4
    elif p["mask"] == "rows":  # some queries may attend to nothing at all
        mask = torch.rand(p["batch"] + (p["n_q"], p["n_k"]), generator=gen) > 0.3
        mask[..., ::2, :] = False
    elif p["mask"] == "causal":
        mask = torch.ones(p["n_q"], p["n_k"], dtype=torch.bool).tril()
    cast = lambda t: t.to(dtype=p["dtype"], device=device)  # noqa: E731
    return cast(q), cast(k), cast(v), None if mask is None else mask.to(device)


def _truth(q, k, v, mask):
    """F.scaled_dot_product_attention in float64 on the same (rounded) inputs; a query whose keys
    are all masked gets zeros (the course's convention; the built-in gives NaN there on some
    paths). No keys or an empty batch give zeros without asking the built-in: on one of these
    examples torch 2.11's CPU kernel stopped the whole process (SIGFPE, on a 16-core machine)."""
    q, k, v = (t.double() for t in (q, k, v))
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    shape = batch + (q.shape[-2], v.shape[-1])
    if k.shape[-2] == 0 or 0 in shape:
        return torch.zeros(shape, dtype=torch.float64, device=q.device)
    if mask is not None:
        mask = mask.expand(batch + (q.shape[-2], k.shape[-2]))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if mask is not None:
        out = torch.where(mask.any(-1, keepdim=True), out, torch.zeros_like(out))
    return out


def _weights_truth(q, k, mask):
    scores = q.double() @ k.double().transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf)
    weights = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


@SETTINGS
@given(p=problems())
def test_attention_is_finite_and_matches_the_builtin(device, p):
    q, k, v, mask = _inputs(p, device)
    out = rpt.scaled_dot_product_attention(q, k, v, mask=mask)
    weights = rpt.attention_weights(q, k, mask)
    assert out.dtype == p["dtype"] and out.device == q.device
    assert out.shape == torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (p["n_q"], p["d_v"])
    assert torch.isfinite(out).all() and torch.isfinite(weights).all(), p
    torch.testing.assert_close(out, _truth(q, k, v, mask).to(p["dtype"]), **TOLERANCES[p["dtype"]])
    torch.testing.assert_close(
        weights, _weights_truth(q, k, mask).to(p["dtype"]), **TOLERANCES[p["dtype"]]
    )
    sums = weights.double().sum(-1)
    attended = (
        torch.ones_like(sums, dtype=torch.bool) if mask is None else mask.any(-1).expand(sums.shape)
    )
    attended = attended & (p["n_k"] > 0)
    torch.testing.assert_close(sums, attended.double(), **TOLERANCES[p["dtype"]])


@SETTINGS
@given(p=problems())
def test_numpy_twin_agrees(p):
    if p["dtype"] not in (torch.float64, torch.float32):
        return  # NumPy has no bfloat16, and the course computes half precision in PyTorch
    q, k, v, mask = _inputs(p, "cpu")
    np_mask = None if mask is None else mask.numpy()
    out = rnp.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask=np_mask)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, _truth(q, k, v, mask).numpy(), **TOLERANCES[p["dtype"]])


@SETTINGS
@given(p=problems(masks=False), temperature=st.sampled_from([0.05, 1.0, 7.0]))
def test_soft_lookup_is_the_builtin_with_a_temperature(device, p, temperature):
    q, k, v, _ = _inputs(p, device)
    got = rpt.soft_lookup(q, k, v, temperature=temperature)
    scale = 1.0 / temperature
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), scale=scale)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want.to(p["dtype"]), **TOLERANCES[p["dtype"]])


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(DTYPES),
    scale=st.sampled_from([1.0, 1e2, 1e4]),
)
def test_softmax_of_huge_logits(device, shape, seed, dtype, scale):
    gen = torch.Generator().manual_seed(seed)
    x = (scale * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(-1e4, 1e4)
    x[(0,) * len(shape)] = scale  # +-1e4 exactly, where the scale is 1e4
    x = x.to(dtype=dtype, device=device)
    for axis in range(-len(shape), 0):
        got = rpt.softmax(x, axis=axis)
        assert got.dtype == dtype and torch.isfinite(got).all()
        torch.testing.assert_close(
            got, torch.softmax(x.double(), dim=axis).to(dtype), **TOLERANCES[dtype]
        )
        if dtype in (torch.float64, torch.float32):
            np_got = rnp.softmax(x.cpu().numpy(), axis=axis)
            np.testing.assert_allclose(np_got, got.cpu().numpy(), **TOLERANCES[dtype])


@SETTINGS
@given(p=problems(), mask_kind=st.sampled_from(["rows", "all"]))
def test_masked_softmax_never_gives_nan(device, p, mask_kind):
    q, k, _, _ = _inputs(p, device)
    scores = rpt.dot_scores(q.float(), k.float())
    mask = torch.rand(scores.shape, generator=torch.Generator().manual_seed(p["seed"])) > 0.5
    mask[..., ::2, :] = False
    if mask_kind == "all":
        mask[:] = False
    mask = mask.to(device)
    weights = rpt.masked_softmax(scores, mask)
    assert torch.isfinite(weights).all()
    assert (weights[~mask.any(-1)] == 0).all(), "a fully masked row must give zero weights"
    np_weights = rnp.masked_softmax(scores.cpu().numpy(), mask.cpu().numpy())
    assert np.isfinite(np_weights).all()
    np.testing.assert_allclose(np_weights, weights.cpu().numpy(), rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    n_q=st.integers(1, 5),
    n_k=st.integers(1, 5),
    d_model=st.sampled_from([4, 8, 12]),
    h=st.sampled_from([1, 2, 4]),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_multi_head_attention_half_precision_and_single_tokens(n_q, n_k, d_model, h, dtype, seed):
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(d_model, h, batch_first=True).double().eval()
    x, y = (
        torch.randn(2, n_q, d_model, dtype=torch.float64),
        torch.randn(2, n_k, d_model, dtype=torch.float64),
    )
    want, _ = mha(x, y, y, need_weights=False)
    params = {name: p.to(dtype) for name, p in rpt.params_from_torch(mha).items()}
    got = rpt.multi_head_attention(x.to(dtype), y.to(dtype), y.to(dtype), params, h)
    assert got.dtype == dtype and torch.isfinite(got).all()
    tolerance = {k: 4 * v for k, v in TOLERANCES[dtype].items()}  # two projections more than SDPA
    torch.testing.assert_close(
        got.double(), want, **{k: max(v, 1e-6) for k, v in tolerance.items()}
    )


# ---------------------------------------------------------------- bad input


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


@st.composite
def misfits(draw):
    """Queries, keys and values whose shapes do not fit, and how."""
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 5)) for _ in range(4))
    how = draw(st.sampled_from(["d_k", "n_k", "batch", "rank"]))
    q, k, v = (2, n_q, d_k), (2, n_k, d_k), (2, n_k, d_v)
    if how == "d_k":
        k = (2, n_k, d_k + draw(st.integers(1, 3)))
    elif how == "n_k":
        v = (2, n_k + draw(st.integers(1, 3)), d_v)
    elif how == "batch":
        k, v = (3, n_k, d_k), (3, n_k, d_v)
    else:
        q = (d_k,)
    return how, q, k, v


@SETTINGS
@given(case=misfits(), backend=st.sampled_from(["np", "pt"]))
def test_shapes_that_do_not_fit_raise_value_errors_naming_them(case, backend):
    how, *shapes = case
    make = (lambda s: np.ones(s)) if backend == "np" else (lambda s: torch.ones(s))
    lib = rnp if backend == "np" else rpt
    q, k, v = (make(s) for s in shapes)
    for call in (
        lambda: lib.scaled_dot_product_attention(q, k, v),
        lambda: lib.soft_lookup(q, k, v),
    ):
        with pytest.raises(ValueError) as error:
            call()
        message = str(error.value)
        named = [s for s in shapes if _shape_text(s) in message]
        if how == "rank":
            assert _shape_text(shapes[0]) in message, message
        else:  # both inputs that disagree are named
            assert len(named) >= 2, (
                f"{how}: the message should name the shapes that do not fit: {message}"
            )


@SETTINGS
@given(bad=st.sampled_from(["int", "bool", "complex", "mixed"]), where=st.integers(0, 2))
def test_wrong_dtypes_raise_type_errors(bad, where):
    arrays = [np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 6))]
    tensors = [torch.from_numpy(a) for a in arrays]
    if bad == "mixed":  # NumPy promotes; PyTorch must refuse, naming the dtypes
        tensors[where] = tensors[where].float()
        with pytest.raises(TypeError, match="float32"):
            rpt.scaled_dot_product_attention(*tensors)
        return
    np_dtype = {"int": np.int64, "bool": np.bool_, "complex": np.complex128}[bad]
    arrays[where] = arrays[where].astype(np_dtype)
    tensors[where] = torch.from_numpy(arrays[where])
    for lib, xs in ((rnp, arrays), (rpt, tensors)):
        for call in (lambda: lib.scaled_dot_product_attention(*xs), lambda: lib.soft_lookup(*xs)):
            with pytest.raises(TypeError, match="float|dtype"):
                call()

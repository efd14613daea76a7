"""Lesson 1, Retrieval as attention -- PyTorch reference.

The same functions, names and signatures as ``attention_ref.np.retrieval``. Nothing here
moves data between devices: each function runs on the device its inputs live on.
"""

from __future__ import annotations

import torch

from .. import _checks


def as_float_tensor(name: str, x) -> torch.Tensor:
    """Refuse anything but a floating-point tensor, with a TypeError that names the input."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must hold floating-point numbers, got dtype {x.dtype}")
    return x


def same_dtype(**named: torch.Tensor) -> None:
    """Refuse tensors of different dtypes with a TypeError that names them (as
    F.scaled_dot_product_attention does; a bare matmul would say "expected scalar type Float")."""
    dtypes = {name: t.dtype for name, t in named.items()}
    if len(set(dtypes.values())) > 1:
        listing = ", ".join(
            f"{name} {str(dtype).replace('torch.', '')}" for name, dtype in dtypes.items()
        )
        raise TypeError(f"inputs must share one dtype, got {listing}")


def upcast(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Half-precision tensors as float32: scores rounded to fp16/bf16 before the softmax lose
    most of their precision (F.scaled_dot_product_attention also computes in float32 on the CPU).
    """
    return tuple(t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors)


def dot_scores(queries, keys) -> torch.Tensor:
    """Similarity of every query with every key: ``queries @ keys^T``.

    queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)`` -> scores ``(..., n_q, n_k)``.
    """
    queries, keys = as_float_tensor("queries", queries), as_float_tensor("keys", keys)
    same_dtype(queries=queries, keys=keys)
    _checks.scores_inputs(queries, keys)
    return queries @ keys.transpose(-1, -2)


def softmax(x, axis: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``axis``; an all -inf slice gives zeros, not NaN.

    Half-precision inputs are computed in float32 and returned in their own dtype.
    """
    x = as_float_tensor("x", x)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one dimension, got a scalar")
    return _stable_softmax(x, axis, in_place=False)


def plain_softmax(x, axis: int = -1) -> torch.Tensor:
    """``torch.softmax`` along ``axis``: lesson 1's stable softmax with no care for masked rows,
    so a slice that is -inf everywhere gives NaN (NumPy's ``plain_softmax`` says why lesson 3
    wants that). Half-precision inputs are computed in float32 and returned in their own dtype.
    """
    x = as_float_tensor("x", x)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one dimension, got a scalar")
    return torch.softmax(upcast(x)[0], dim=axis).to(x.dtype)


def softmax_in_place(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """:func:`softmax` written into ``x`` itself, a float tensor the caller owns (fresh scores),
    like NumPy's ``softmax_in_place``: Eq. (1) holds its n x n scores anyway, and a softmax that
    allocates holds a second such tensor. Where autograd needs ``x`` (it requires grad), or
    ``x`` is in half precision (computed in float32), the result is a new tensor instead."""
    in_place = not (torch.is_grad_enabled() and x.requires_grad) and x.dtype == upcast(x)[0].dtype
    return _stable_softmax(x, axis, in_place)


def softmax_parts(x: torch.Tensor, axis: int, in_place: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(torch.softmax(x), nothing)``: ``nothing`` marks the slices that are -inf everywhere
    (keys all masked), whose softmax is NaN and whose weights are zeros in this course.

    ``torch.softmax`` subtracts each slice's maximum before ``exp``: lesson 1's stable softmax in
    one fused pass. ``in_place`` writes it into ``x`` (a float32 or float64 tensor the caller owns).
    """
    nothing_shape = x.shape[: axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1 :]
    if x.shape[axis] == 0:  # no keys at all: nothing gets weight (amax of an empty axis would fail)
        return x, torch.ones(nothing_shape, dtype=torch.bool, device=x.device)
    nothing = torch.isneginf(x.amax(dim=axis, keepdim=True))  # slices without a finite entry
    return (torch.softmax(x, dim=axis, out=x) if in_place else torch.softmax(x, dim=axis)), nothing


def _stable_softmax(x: torch.Tensor, axis: int, in_place: bool) -> torch.Tensor:
    """:func:`softmax_parts` with zeros where ``torch.softmax`` gives NaN for a slice of -inf."""
    if x.shape[axis] == 0:
        return x if in_place else x.clone()
    (work,) = upcast(x)
    weights, nothing = softmax_parts(work, axis, in_place)
    if in_place:
        return weights.masked_fill_(nothing, 0.0)
    return weights.masked_fill(nothing, 0.0).to(x.dtype)


def normalize_weights(similarities, axis: int = -1) -> torch.Tensor:
    """Divide non-negative similarities by their sum along ``axis`` (attention with a non-negative
    similarity, normalized as in Katharopoulos et al., 2020)."""
    sims = as_float_tensor("similarities", similarities)
    if bool((sims < 0).any()):
        raise ValueError("similarities must be non-negative to be normalized by their sum")
    total = sims.sum(dim=axis, keepdim=True)
    if bool((total == 0).any()):
        raise ValueError("a row of similarities sums to zero and cannot be normalized")
    return sims / total


def weighted_sum(weights, values) -> torch.Tensor:
    """Sum of the values weighted by ``weights``: ``weights @ values``.

    weights ``(..., n_q, n_k)``, values ``(..., n_k, d_v)`` -> output ``(..., n_q, d_v)``.
    """
    weights, values = as_float_tensor("weights", weights), as_float_tensor("values", values)
    same_dtype(weights=weights, values=values)
    _checks.weighted_sum_inputs(weights, values)
    return weights @ values


def soft_lookup(queries, keys, values, temperature: float = 1.0) -> torch.Tensor:
    """Soft dictionary lookup: ``softmax(queries @ keys^T / temperature) @ values``."""
    _checks.require_positive("temperature", temperature)
    keys, values = as_float_tensor("keys", keys), as_float_tensor("values", values)
    queries = as_float_tensor("queries", queries)
    same_dtype(queries=queries, keys=keys, values=values)
    _checks.keys_values_inputs(keys, values)
    dtype = values.dtype
    queries, keys, values = upcast(queries, keys, values)
    weights = softmax(dot_scores(queries, keys) / temperature, axis=-1)
    return weighted_sum(weights, values).to(dtype)


def kernel_regression(x_query, x_keys, y_values, bandwidth: float = 1.0) -> torch.Tensor:
    """Nadaraya-Watson kernel regression with a Gaussian kernel (see the NumPy twin)."""
    xq = as_float_tensor("x_query", x_query)
    xk = as_float_tensor("x_keys", x_keys)
    yv = as_float_tensor("y_values", y_values)
    _checks.kernel_regression_inputs(xq, xk, yv, bandwidth)
    dtype = yv.dtype
    xq, xk, yv = upcast(xq, xk, yv)
    logits = -((xq[..., :, None] - xk[..., None, :]) ** 2) / (2.0 * bandwidth**2)
    return weighted_sum(softmax(logits, axis=-1), yv[..., :, None])[..., 0].to(dtype)

"""Lesson 1, Retrieval as attention -- NumPy reference.

A dictionary answers a query only when it equals a key. Attention answers every query with a
weighted sum of the values, the weights coming from the query's similarity to each key.
"""

from __future__ import annotations

import numpy as np

from .. import _checks


def as_float_array(name: str, x) -> np.ndarray:
    """``np.asarray(x)``, refusing non-floating dtypes with a TypeError that names the input."""
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{name} must hold floating-point numbers, got dtype {arr.dtype}")
    return arr


def dot_scores(queries, keys) -> np.ndarray:
    """Similarity of every query with every key: ``queries @ keys^T``.

    queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)`` -> scores ``(..., n_q, n_k)``.
    """
    queries, keys = as_float_array("queries", queries), as_float_array("keys", keys)
    _checks.scores_inputs(queries, keys)
    # K^T copied to a contiguous array (n_k * d_k numbers, small next to the scores): NumPy's
    # batched matmul runs markedly slower on the transposed view
    return queries @ np.ascontiguousarray(np.swapaxes(keys, -1, -2))


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    Subtracting the maximum first leaves the result unchanged (the factor exp(-max) cancels)
    and keeps every exponent <= 0, so logits of 1e4 do not overflow. A slice that is -inf
    everywhere (all keys masked) gives zeros rather than NaN, as F.scaled_dot_product_attention.
    """
    x = as_float_array("x", x)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one dimension, got a scalar")
    return softmax_in_place(x.copy(), axis)  # x itself is left alone


def plain_softmax(x, axis: int = -1) -> np.ndarray:
    """Lesson 1's stable softmax exactly as its exercise asks for it, and as ``torch.softmax``
    computes it: subtract the maximum, exponentiate, divide by the sum, and nothing more.

    A slice that is -inf everywhere (a query whose keys are all masked) gives NaN, since
    -inf - (-inf) is NaN. Lesson 3 imports it as ``softmax``, so that its masked softmax has to
    handle that row itself; :func:`softmax` returns zeros there.
    """
    x = as_float_array("x", x)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one dimension, got a scalar")
    if x.shape[axis] == 0:  # no keys at all: nothing to normalise (the max of an empty axis fails)
        return x.copy()
    exps = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_in_place(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`softmax` written into ``x`` itself, a float array the caller owns (e.g. fresh scores).

    Eq. (1) as written holds its n x n scores anyway; computing the weights in place keeps it at
    one array of that size rather than three (lesson 9 measures it).
    """
    if x.shape[axis] == 0:  # no keys at all: nothing gets weight (the max of an empty axis fails)
        return x
    peak = np.max(x, axis=axis, keepdims=True)
    x -= np.where(np.isfinite(peak), peak, 0.0)
    np.exp(x, out=x)
    total = np.sum(x, axis=axis, keepdims=True)
    x /= np.where(total == 0, 1.0, total)
    return x


def normalize_weights(similarities, axis: int = -1) -> np.ndarray:
    """Divide non-negative similarities by their sum along ``axis`` (attention with
    a non-negative similarity, normalized as in Katharopoulos et al., 2020).

    Raises ValueError for a negative similarity or a slice that sums to zero: neither can be
    turned into weights by division alone (that is what softmax is for).
    """
    sims = as_float_array("similarities", similarities)
    if np.any(sims < 0):
        raise ValueError("similarities must be non-negative to be normalized by their sum")
    total = np.sum(sims, axis=axis, keepdims=True)
    if np.any(total == 0):
        raise ValueError("a row of similarities sums to zero and cannot be normalized")
    return sims / total


def weighted_sum(weights, values) -> np.ndarray:
    """Sum of the values weighted by ``weights``: ``weights @ values``.

    weights ``(..., n_q, n_k)``, values ``(..., n_k, d_v)`` -> output ``(..., n_q, d_v)``.
    """
    weights, values = as_float_array("weights", weights), as_float_array("values", values)
    _checks.weighted_sum_inputs(weights, values)
    return weights @ values


def soft_lookup(queries, keys, values, temperature: float = 1.0) -> np.ndarray:
    """Soft dictionary lookup: ``softmax(queries @ keys^T / temperature) @ values``.

    As the temperature goes to 0 this becomes the hard lookup of the best-matching key; as it
    grows, every value gets the same weight and the output tends to the mean of the values.
    """
    _checks.require_positive("temperature", temperature)
    keys, values = as_float_array("keys", keys), as_float_array("values", values)
    _checks.keys_values_inputs(keys, values)
    weights = softmax(dot_scores(queries, keys) / temperature, axis=-1)
    return weighted_sum(weights, values)


def kernel_regression(x_query, x_keys, y_values, bandwidth: float = 1.0) -> np.ndarray:
    """Nadaraya-Watson kernel regression with a Gaussian kernel.

    Each prediction is a weighted mean of ``y_values`` whose weights are
    ``softmax(-(x_query - x_keys)^2 / (2 bandwidth^2))``: attention whose similarity is a kernel.
    x_query ``(..., n_q)``, x_keys ``(..., n_k)``, y_values ``(..., n_k)`` -> ``(..., n_q)``.
    """
    xq = as_float_array("x_query", x_query)
    xk = as_float_array("x_keys", x_keys)
    yv = as_float_array("y_values", y_values)
    _checks.kernel_regression_inputs(xq, xk, yv, bandwidth)
    logits = -((xq[..., :, None] - xk[..., None, :]) ** 2) / (2.0 * bandwidth**2)
    return weighted_sum(softmax(logits, axis=-1), yv[..., :, None])[..., 0]

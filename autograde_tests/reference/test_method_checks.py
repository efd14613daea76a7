"""attention_ref.testing's checks of the method: how lesson 9's exercises compute.

Each must pass the correct answers, written several ways (those of the lesson and of its
alternatives.yml), and fail the answers with the right numbers by the wrong method: a two-pass
softmax however it hides its second pass, attention chunked over the queries, a block size of its
own, a "cache" that projects every position again.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.pt as rpt
from attention_ref.testing import expect_key_blocks, expect_newest_position_only, expect_one_pass

pytestmark = pytest.mark.reference


def _fails(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as failure:
        check(*args, **kwargs)
    return str(failure.value)


# ---- one pass -----------------------------------------------------------------------------------


def _online(row):
    running_max, running_sum = -np.inf, 0.0
    for x in row:
        new_max = max(running_max, x)
        if new_max == -np.inf:
            continue
        running_sum = running_sum * np.exp(running_max - new_max) + np.exp(x - new_max)
        running_max = new_max
    if running_sum == 0:
        return np.zeros_like(row)
    return np.exp(row - running_max) / running_sum


def _online_after_asarray(row):
    row = np.asarray(row)
    m, total = -np.inf, 0.0
    for x in row:
        new = np.maximum(m, x)
        if np.isneginf(new):
            continue
        total, m = total * np.exp(m - new) + np.exp(x - new), new
    return np.zeros(row.shape) if total == 0 else np.exp(row - m) / total


def _online_by_index(row):
    if np.all(np.isneginf(row)):  # "is everything masked?": allowed, it computes no statistic
        return np.zeros_like(row)
    m, total = -math.inf, 0.0
    for i in range(len(row)):
        x = float(row[i])
        if x > m:
            total, m = total * math.exp(m - x) + 1.0, x
        elif x > -math.inf:
            total += math.exp(x - m)
    return np.exp(row - m) / total


def _argmax_then_dot(row):
    e = np.exp(row - row[np.argmax(row)])
    return e / np.dot(e, np.ones(len(row)))


def _accumulations(row):
    e = np.exp(row - np.maximum.accumulate(row)[-1])
    return e / np.cumsum(e)[-1]


def _sorted_method(row):
    e = np.exp(row - np.sort(row)[-1])
    return e / e.sum()


def _asarray_then_two_passes(row):
    row = np.asarray(row)
    e = np.exp(row - row.max())
    return e / e.sum()


def _tolist_then_builtin_sum(row):
    values = row.tolist()
    peak = -math.inf
    for x in values:
        peak = max(peak, x)
    return np.exp(row - peak) / sum(math.exp(x - peak) for x in values)


def test_one_pass_passes_one_loop_however_written():
    row = np.array([-np.inf, 0.5, -1.0, 2.0, 0.0, 3.5, 3.4])
    want = np.exp(row - 3.5) / np.exp(row - 3.5).sum()
    for answer in (_online, _online_after_asarray, _online_by_index):
        np.testing.assert_allclose(expect_one_pass(answer, row, "one pass"), want)


@pytest.mark.parametrize(
    "answer, seen",
    [
        (_argmax_then_dot, "np.argmax"),
        (_accumulations, "np.maximum.accumulate"),
        (_sorted_method, "np.sort"),
        (_asarray_then_two_passes, "names whole-array passes (.max, .sum)"),
        (_tolist_then_builtin_sum, "sum()"),
    ],
)
def test_one_pass_fails_a_second_pass_however_hidden(answer, seen):
    assert seen in _fails(expect_one_pass, answer, np.array([0.5, -1.0, 2.0, 3.5]), "two passes")


# ---- key blocks ---------------------------------------------------------------------------------


def _tiled_np(queries, keys, values, mask=None, block_size=4):
    """Lesson 9's answer (no mask or batch needed here)."""
    running_max = np.full(queries.shape[:-1] + (1,), -np.inf)
    running_sum, acc = np.zeros_like(running_max), np.zeros(queries.shape[:-1] + values.shape[-1:])
    for start in range(0, keys.shape[-2], block_size):
        block = np.swapaxes(keys[..., start : start + block_size, :], -1, -2)
        scores = queries @ block / math.sqrt(queries.shape[-1])
        new_max = np.maximum(running_max, scores.max(axis=-1, keepdims=True))
        weights, alpha = np.exp(scores - new_max), np.exp(running_max - new_max)
        running_sum = running_sum * alpha + weights.sum(axis=-1, keepdims=True)
        acc = acc * alpha + weights @ values[..., start : start + block_size, :]
        running_max = new_max
    return acc / running_sum


def _tiled_einsum(queries, keys, values, mask=None, block_size=4):
    m, total, acc = -np.inf, 0.0, 0.0
    for s in range(0, keys.shape[-2], block_size):
        sc = np.einsum("...qd,...kd->...qk", queries, keys[..., s : s + block_size, :])
        sc = sc / math.sqrt(queries.shape[-1])
        new = np.maximum(m, sc.max(-1, keepdims=True))
        p, a = np.exp(sc - new), np.exp(m - new)
        total, acc, m = (
            a * total + p.sum(-1, keepdims=True),
            a * acc + p @ values[..., s : s + block_size, :],
            new,
        )
    return acc / total


def _tiled_torch(queries, keys, values, mask=None, block_size=4):
    running_max = torch.full(queries.shape[:-1] + (1,), -torch.inf, dtype=queries.dtype)
    running_sum = torch.zeros_like(running_max)
    acc = torch.zeros(queries.shape[:-1] + values.shape[-1:], dtype=queries.dtype)
    for start in range(0, keys.shape[-2], block_size):
        scores = (
            queries @ keys[..., start : start + block_size, :].mT / math.sqrt(queries.shape[-1])
        )
        new_max = torch.maximum(running_max, scores.amax(-1, keepdim=True))
        weights, alpha = torch.exp(scores - new_max), torch.exp(running_max - new_max)
        running_sum = running_sum * alpha + weights.sum(-1, keepdim=True)
        acc = acc * alpha + weights @ values[..., start : start + block_size, :]
        running_max = new_max
    return acc / running_sum


def _query_chunks(queries, keys, values, mask=None, block_size=4):
    """Exact softmax over every key, chunked over the queries: right numbers, no tiling."""
    outs = []
    for start in range(0, queries.shape[-2], block_size):
        q = queries[..., start : start + block_size, :]
        scores = q @ keys.swapaxes(-1, -2) / math.sqrt(queries.shape[-1])
        if isinstance(scores, np.ndarray):
            w = np.exp(scores - scores.max(-1, keepdims=True))
            outs.append(w @ values / w.sum(-1, keepdims=True))
        else:
            outs.append(torch.softmax(scores, -1) @ values)
    return np.concatenate(outs, -2) if isinstance(outs[0], np.ndarray) else torch.cat(outs, -2)


def _query_chunks_after_asarray(queries, keys, values, mask=None, block_size=4):
    return _query_chunks(
        np.asarray(queries), np.asarray(keys), np.asarray(values), mask, block_size
    )


def _own_block_size(queries, keys, values, mask=None, block_size=4):
    return (_tiled_np if isinstance(queries, np.ndarray) else _tiled_torch)(
        queries, keys, values, None, 16
    )


def _inputs(kind):
    r = np.random.default_rng(5)
    q, k, v = r.normal(size=(3, 5)), r.normal(size=(37, 5)), r.normal(size=(37, 2))
    return (q, k, v) if kind == "numpy" else tuple(torch.from_numpy(a) for a in (q, k, v))


def _want(q, k, v):
    w = np.exp(q @ k.T / math.sqrt(5))
    return (w / w.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_key_blocks_pass_tiling_over_the_keys(kind):
    q, k, v = _inputs(kind)
    answers = [_tiled_np, _tiled_einsum] if kind == "numpy" else [_tiled_torch]
    for answer in answers:
        got = expect_key_blocks(answer, q, k, v, block_size=4, what="tiled")
        np.testing.assert_allclose(np.asarray(got), _want(*_inputs("numpy")), rtol=1e-9)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_key_blocks_fail_chunks_of_queries_and_blocks_of_their_own(kind):
    q, k, v = _inputs(kind)
    assert "all the keys at once" in _fails(
        expect_key_blocks, _query_chunks, q, k, v, block_size=4, what="q"
    )
    assert "16 keys at once, with block_size = 4" in _fails(
        expect_key_blocks, _own_block_size, q, k, v, block_size=4, what="own block size"
    )


def test_key_blocks_cannot_watch_plain_copies_and_say_so():
    assert "copies made with np.asarray" in _fails(
        expect_key_blocks,
        _query_chunks_after_asarray,
        *_inputs("numpy"),
        block_size=4,
        what="copies",
    )


def test_key_blocks_refuse_inputs_where_keys_cannot_be_told_apart():
    q, k, v = (np.ones((40, 5)), np.ones((37, 5)), np.ones((37, 2)))
    with pytest.raises(ValueError, match="n_k = 37 longer than every other axis"):
        expect_key_blocks(_tiled_np, q, k, v, block_size=4, what="too many queries")


# ---- the newest position only -------------------------------------------------------------------


def _recomputing_cache(x_new, params, num_heads, cache):
    """Keeps the inputs and projects them all again: the right numbers, no saving."""
    cache["x"] = x_new if "x" not in cache else torch.cat([cache["x"], x_new], dim=-2)
    full = rpt.decoder_self_attention(cache["x"], params, num_heads)
    return full[..., -1:, :]


def _linear_cache(x_new, params, num_heads, cache):
    """A correct cache that projects with F.linear and the transposed weights (views of them)."""
    b, n, d = x_new.shape
    heads = lambda t: t.view(b, n, num_heads, d // num_heads).transpose(1, 2)  # noqa: E731
    q, k, v = (heads(F.linear(x_new, params[f"w_{c}"].T, params[f"b_{c}"])) for c in "qkv")
    cache["k"] = torch.cat([cache["k"], k], -2) if "k" in cache else k
    cache["v"] = torch.cat([cache["v"], v], -2) if "v" in cache else v
    out = rpt.scaled_dot_product_attention(q, cache["k"], cache["v"])
    return out.transpose(1, 2).reshape(b, n, d) @ params["w_o"] + params["b_o"]


@pytest.mark.parametrize("answer", [rpt.cached_self_attention, _linear_cache])
def test_newest_position_passes_a_real_cache(answer):
    params = rpt.init_params(8, 2, torch.Generator().manual_seed(3))
    y, cache = torch.randn(2, 5, 8), {}
    steps = [expect_newest_position_only(answer, y[:, t : t + 1], params, 2, cache, what="cache")
             for t in range(5)]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps, 1), rpt.decoder_self_attention(y, params, 2))


def test_newest_position_fails_a_cache_that_recomputes_everything():
    params = rpt.init_params(8, 2, torch.Generator().manual_seed(3))
    y, cache = torch.randn(2, 5, 8), {}
    _recomputing_cache(y[:, :3], params, 2, cache)  # three positions so far
    message = _fails(
        expect_newest_position_only, _recomputing_cache, y[:, 3:4], params, 2, cache, what="c"
    )
    assert (
        "an array of shape (2, 4, 8)" in message
        and "8 positions, where the step brings 2" in message
    )


# ---- no library function where the library's care would do the exercise's work ---------------

import attention_ref  # noqa: E402
from attention_ref.np import plain_softmax as softmax  # noqa: E402  (lesson 3's import)
from attention_ref.np import softmax as guarded_softmax  # noqa: E402
from attention_ref.testing import expect_no_library_call  # noqa: E402


def _own(scores, mask):
    s = np.where(mask, scores, -np.inf)
    peak = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(peak), peak, 0.0))
    return e / np.maximum(e.sum(-1, keepdims=True), 1e-300)


def _through_plain(scores, mask):
    return np.nan_to_num(softmax(np.where(mask, scores, -np.inf)))


def _through_guarded(scores, mask):
    return guarded_softmax(np.where(mask, scores, -np.inf))


def _through_helper(scores, mask):
    return _through_guarded(scores, mask)


def _through_module(scores, mask):
    return attention_ref.np.softmax(np.where(mask, scores, -np.inf))


def _through_inner_import(scores, mask):
    import attention_ref.np as ref

    return ref.softmax(np.where(mask, scores, -np.inf))


def _through_inner_from_import(scores, mask):
    from attention_ref.np import softmax as s

    return s(np.where(mask, scores, -np.inf))


def test_no_library_call_passes_own_code_and_what_is_allowed():
    for answer in (_own, _through_plain):
        expect_no_library_call(answer, "masked_softmax", allowed=("plain_softmax",))


@pytest.mark.parametrize(
    "answer",
    [
        _through_guarded,
        _through_helper,
        _through_module,
        _through_inner_import,
        _through_inner_from_import,
    ],
)
def test_no_library_call_fails_the_library_however_reached(answer):
    message = _fails(
        expect_no_library_call, answer, "masked_softmax", allowed=("plain_softmax",), hint="h"
    )
    assert "attention_ref.np.retrieval.softmax" in message and "Hint: h" in message


# ---- what a call allocates, views of its arguments left out -------------------------------------


def test_record_counts_new_storage_not_views_of_the_arguments():
    from attention_ref.testing import record_torch

    weights = {"w": torch.zeros(64, 64)}
    _, viewed = record_torch(lambda p: p["w"].unflatten(1, (4, 16)).transpose(0, 1), weights)
    assert viewed.largest_bytes == 64 * 64 * 4 and viewed.largest_new_bytes == 0
    _, copied = record_torch(
        lambda p: p["w"].unflatten(1, (4, 16)).transpose(0, 1).contiguous(), weights
    )
    assert copied.largest_new_bytes == 64 * 64 * 4

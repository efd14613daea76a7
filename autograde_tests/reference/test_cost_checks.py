"""attention_ref.testing's cost profile, growth laws and holdings: how a call computes, and what a
state holds.

Each measurement is checked against a number worked out by hand (the multiply-adds of a product,
the bytes of a tensor), and each check against the right answer and the naive-but-correct answers
it exists to refuse: a recurrence that re-reads every past key, one chunk for the whole text, a
loop over the heads, a cache in a global keyed by id(), data in a dict's keys, a default argument
that remembers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from attention_ref.testing import (
    cost_profile,
    expect_growth,
    expect_holds_at_most,
    expect_no_hidden_state,
    holdings,
)

pytestmark = pytest.mark.reference


def _fails(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as failure:
        check(*args, **kwargs)
    return str(failure.value)


# ---- the cost profile: PyTorch ---------------------------------------------------------------


def _attention(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


def test_torch_multiply_adds_and_bytes_are_exact():
    q, k, v = torch.randn(2, 8, 4), torch.randn(2, 16, 4), torch.randn(2, 16, 3)
    cost = cost_profile(_attention, q, k, v)
    assert cost.multiply_adds == 2 * 8 * 16 * 4 + 2 * 8 * 16 * 3
    scores, out = 2 * 8 * 16 * 4, 2 * 8 * 3 * 4  # float32 bytes
    assert cost.allocated_bytes == 2 * scores + out  # the scores, their softmax, the output
    assert cost.peak_bytes == 2 * scores  # the scores and the weights, at once
    assert cost.kept_bytes == cost.result_bytes == out
    assert cost.largest_bytes == scores
    assert cost.count("bmm") == 2 and cost.seen
    torch.testing.assert_close(cost.result, _attention(q, k, v))


def test_torch_products_of_every_kind_are_counted():
    x, w = torch.randn(5, 6), torch.randn(7, 6)
    conv = torch.nn.Conv1d(6, 7, kernel_size=3)
    cases = [
        (lambda: torch.nn.functional.linear(x, w), 5 * 6 * 7),
        (lambda: torch.einsum("ij,kj->ik", x, w), 5 * 6 * 7),
        (lambda: x @ w[0], 5 * 6),
        (lambda: torch.dot(x[0], x[1]), 6),
        (lambda: conv(x.T[None]), 3 * 7 * 6 * 3),  # 3 output positions x 7 channels x (6 x 3)
        (lambda: torch.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None]),
         5 * 5 * 6 * 2),
    ]  # fmt: skip
    for run, expected in cases:
        with torch.no_grad():
            assert cost_profile(lambda _: run(), x).multiply_adds == expected


def test_torch_memory_kept_outside_the_result_shows():
    kept = []

    def keeps_a_copy(x):
        kept.append(x * 2)
        return x + 1

    cost = cost_profile(keeps_a_copy, torch.zeros(100))
    assert cost.result_bytes == 400 and cost.kept_bytes == 800
    assert cost_profile(lambda x: x[:10], torch.zeros(100)).allocated_bytes == 0  # a view


def test_torch_python_literals_count_as_allocations():
    cost = cost_profile(lambda x: x + torch.tensor([1.0, 2.0, 3.0]), torch.zeros(3))
    assert cost.allocated_bytes == 12 + 12


_FIRST_PROFILE_IN_A_FRESH_PROCESS = """
import sys
import torch
from attention_ref.testing import cost_profile
attention = lambda q, k, v: torch.softmax(q @ k.mT, dim=-1) @ v
cost_profile(attention, *(torch.randn(1, 2, 2) for _ in range(3)))
print("compiler imported:", "torch._dynamo" in sys.modules and "triton" in sys.modules)
"""


def test_the_first_torch_profile_does_not_import_the_compiler():
    """In a fresh process: another test of this session may have imported transformers (and
    with it torch._dynamo and Triton) already."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FIRST_PROFILE_IN_A_FRESH_PROCESS],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "compiler imported: False" in out, out


# ---- the cost profile: NumPy ------------------------------------------------------------------


def test_numpy_products_of_every_kind_are_counted():
    a, b = np.ones((5, 6)), np.ones((6, 7))
    cases = [
        (lambda a, b: a @ b, 5 * 6 * 7),
        (lambda a, b: np.matmul(a, b), 5 * 6 * 7),
        (lambda a, b: np.dot(a, b), 5 * 6 * 7),
        (lambda a, b: a.dot(b), 5 * 6 * 7),
        (lambda a, b: np.einsum("ij,jk->ik", a, b), 5 * 6 * 7),
        (lambda a, b: np.einsum("...j,jk->...k", a, b), 5 * 6 * 7),
        (lambda a, b: np.tensordot(a, b, axes=1), 5 * 6 * 7),
        (lambda a, b: (a[:, :, None] * b[None]).sum(1), 0),  # no product: its numbers, below
    ]
    for run, expected in cases:
        cost = cost_profile(run, a, b)
        assert cost.multiply_adds == expected
        np.testing.assert_allclose(cost.result, a @ b)
        assert type(cost.result) is np.ndarray
    broadcast = cost_profile(lambda a, b: (a[:, :, None] * b[None]).sum(1), a, b)
    assert broadcast.elements == 5 * 6 * 7 + 5 * 7


def test_numpy_memory_and_steps():
    def dense(q, k):
        scores = q @ k.T  # n x n float64
        return scores.max(axis=1)

    def rows(q, k):
        best = np.empty(len(q))
        for i in range(len(q)):
            best[i] = (k @ q[i]).max()
        return best

    q = np.random.default_rng(0).normal(size=(256, 4))
    whole, by_row = cost_profile(dense, q, q), cost_profile(rows, q, q)
    assert whole.peak_bytes >= 256 * 256 * 8 > 10 * by_row.peak_bytes
    assert whole.multiply_adds == by_row.multiply_adds == 256 * 256 * 4
    assert whole.steps == 2 and by_row.steps >= 2 * 256
    np.testing.assert_allclose(whole.result, by_row.result)


def test_numpy_arrays_copied_into_plain_ones_are_not_seen():
    cost = cost_profile(lambda a: np.asarray(a) @ np.asarray(a), np.ones((3, 3)))
    assert not cost.seen and cost.multiply_adds == 0
    assert cost.peak_bytes >= 72  # tracemalloc still sees the memory


# ---- growth laws -------------------------------------------------------------------------------


def _recurrence(q, k, v):
    state, out = np.zeros((k.shape[1], v.shape[1])), np.empty((len(q), v.shape[1]))
    for t in range(len(q)):
        state += np.outer(k[t], v[t])
        out[t] = q[t] @ state
    return out


def _rereads_every_key(q, k, v):  # the same numbers, O(n^2): a KV cache in disguise
    out = np.empty((len(q), v.shape[1]))
    for t in range(len(q)):
        out[t] = (k[: t + 1] @ q[t]) @ v[: t + 1]
    return out


def _inputs(n):
    x = np.random.default_rng(1).normal(size=(n, 4))
    return x, x, x


def test_growth_passes_the_recurrence_and_refuses_the_quadratic_one():
    costs = expect_growth(_recurrence, _inputs, (64, 256), what="one key at a time",
                          multiply_adds=1, peak_bytes=1, steps=1)  # fmt: skip
    np.testing.assert_allclose(costs[-1].result, _rereads_every_key(*_inputs(256)))
    message = _fails(expect_growth, _rereads_every_key, _inputs, (64, 256),
                     what="one key at a time", multiply_adds=1)  # fmt: skip
    assert "multiply-adds grew" in message and "like n^2" in message and "n = 64 -> 256" in message
    assert "at most like n" in message


def _chunked(q, k, v, chunk_size):
    """Causal linear attention, a chunk at a time (the state carries what came before)."""
    state, outs = q.new_zeros(q.shape[-1], v.shape[-1]), []
    for start in range(0, q.shape[-2], chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (q, k, v))
        inside = torch.tril(qc @ kc.transpose(-1, -2)) @ vc
        outs.append(qc @ state + inside)
        state = state + kc.transpose(-1, -2) @ vc
    return torch.cat(outs, dim=-2)


def _one_chunk(q, k, v, chunk_size):
    return _chunked(q, k, v, chunk_size=q.shape[-2])


def test_growth_refuses_one_chunk_for_the_whole_text():
    def inputs(n):
        x = torch.randn(n, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        return {"q": x, "k": x, "v": x, "chunk_size": 16}

    laws = {"multiply_adds": 1, "peak_bytes": 1, "steps": 1}  # the output itself grows like n
    costs = expect_growth(_chunked, inputs, (128, 512), what="a chunk at a time", **laws)
    torch.testing.assert_close(costs[-1].result, _one_chunk(**inputs(512)))
    message = _fails(
        expect_growth, _one_chunk, inputs, (128, 512), what="a chunk at a time", **laws
    )
    assert "multiply-adds grew 15.3x" in message and "like n^2" in message


def test_growth_with_two_bounds_and_bad_arguments():
    loop = lambda h: [np.ones(3) for _ in range(h)]  # noqa: E731 -- a line that loops h times
    expect_growth(loop, lambda h: (h,), (2, 8), name="h", what="a loop", steps=(0, 1))
    message = _fails(expect_growth, _recurrence, _inputs, (16, 64), name="n", what="batched",
                     steps=0)  # fmt: skip
    assert "lines of Python run grew" in message and "does not grow with n" in message
    with pytest.raises(ValueError, match="ascending"):
        expect_growth(_recurrence, _inputs, (64, 16), what="x", steps=1)
    with pytest.raises(ValueError, match="laws among"):
        expect_growth(_recurrence, _inputs, (16, 64), what="x", flops=1)


# ---- holdings ----------------------------------------------------------------------------------


def test_holdings_count_keys_lists_attributes_and_each_buffer_once():
    key = np.arange(8.0)
    memory = {np.concatenate([key, key]).tobytes(): np.zeros(0)}
    assert holdings(memory).data_bytes == 128  # in the key
    big = torch.zeros(1000)
    assert holdings({"k": [big[:10], big[:2]], "x": big}).array_bytes == 4000
    tensor = torch.zeros(2)
    tensor.cache = [np.ones(10)]  # an attribute hung on a tensor
    assert holdings(tensor).array_bytes == 8 + 80
    message = _fails(expect_holds_at_most, memory, 64, "the memory fits 64 bytes")
    assert "128 bytes" in message and "[key 0]" in message
    assert expect_holds_at_most({"k": np.zeros(4)}, 64, "fits") == 32 + 1  # the key's byte too


_CACHE: dict = {}


def _step_with_global(cache, x):
    _CACHE.setdefault(id(cache), []).append(x)
    return sum(_CACHE[id(cache)])


def _step_with_default(cache, x, _seen=[]):  # noqa: B006 -- the answer a test must refuse
    _seen.append(x)
    return sum(_seen)


def _step_in_cache(cache, x):
    cache.setdefault("xs", []).append(x)
    return sum(cache["xs"])


def test_no_hidden_state_refuses_globals_and_defaults_and_allows_the_cache():
    for answer, where in [(_step_with_global, "global _CACHE"), (_step_with_default, "")]:
        message = _fails(expect_no_hidden_state, answer, {}, 1.0, what="state in the cache")
        assert "state kept outside" in message and where in message
        # the argument itself kept: no new object or byte, one more reference in a global list
        message = _fails(expect_no_hidden_state, answer, {}, torch.ones(3), what="state in cache")
        assert "state kept outside" in message and where in message
    cache = {}
    assert expect_no_hidden_state(_step_in_cache, cache, 2.0, what="state in the cache") == 2.0
    assert cache == {"xs": [2.0]}


MASK = None  # a global None: a call that returns None must not seem to change it
RNG = np.random.default_rng(0)


def _writes_into(memory, x):
    memory["x"] = x


def test_no_hidden_state_is_not_fooled_by_a_result_of_none():
    assert expect_no_hidden_state(_writes_into, {}, 3, what="state in memory") is None


class _Shell:  # IPython's shell, as `exit` holds it: what a call prints changes its state
    def __init__(self):
        self.outputs = []


class _Autocall:
    def __init__(self, shell):
        self._ip = shell


exit = _Autocall(_Shell())  # noqa: A001 -- IPython binds it in every kernel's namespace


def _prints_and_warns(memory, x):
    exit._ip.outputs.append(f"{x}")  # what the shell keeps of a print
    registry = globals().setdefault("__warningregistry__", {})  # what warnings.warn does
    warnings.warn_explicit("a warning", UserWarning, "cell", 1, registry=registry)
    memory["x"] = x


def test_no_hidden_state_is_not_fooled_by_the_kernel_printing_or_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        assert expect_no_hidden_state(_prints_and_warns, {}, 3, what="state in memory") is None


def test_no_hidden_state_is_not_fooled_by_the_checks_record_of_the_cell():
    """In a learner's kernel the check helpers keep the running cell's namespace
    (attention_ref.testing.cell_runs); the argument a call rightly grows, and the printing shell,
    are reached from that library module too, and are no state kept outside."""
    from attention_ref.testing import cell_runs

    namespace = {"__name__": "__main__", "exit": _Autocall(_Shell())}
    exec(  # noqa: S102 -- a notebook function, defined in the notebook's namespace
        "def write(memory, key, value):\n"
        "    exit._ip.outputs.append(key)\n"
        "    memory[key] = value\n",
        namespace,
    )
    memory = namespace["memory"] = {}
    cell_runs.before_cell("write(memory, 'a', 1)", namespace)
    try:
        for key in "abc":
            expect_no_hidden_state(namespace["write"], memory, key, np.ones(4), what="memory")
    finally:
        cell_runs.forget()
    assert list(memory) == ["a", "b", "c"]


class _Slotted:
    __slots__ = ("kept", "unset")

    def __init__(self, kept):
        self.kept = kept


def test_holdings_follow_slots_deques_partials_and_cells():
    import collections
    import functools

    assert holdings(_Slotted(np.zeros(4))).array_bytes == 32  # a slot never set is skipped
    assert holdings(collections.deque([np.zeros(2), np.zeros(3)])).array_bytes == 40
    assert holdings(functools.partial(max, np.zeros(5), key=np.zeros(6))).array_bytes == 88
    kept = np.zeros(7)
    assert holdings([lambda: kept]).array_bytes == 0  # a library-less lambda is not the notebook's

"""Answer-equivalent callables (coursekit/mutants/equivalents.py): each lesson's table is as new
as its graded cells and the library's names, and the check that uses it refuses a graded function
that reaches an equivalent, whichever way, and nothing else.

The tables are checked from the sources alone (seconds); making them runs the lessons
(``make equivalents LESSON=...``, a minute or two a lesson).
"""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

from attention_ref import equivalents as table
from attention_ref.testing import ownership
from coursekit.course.lessons import all_lessons
from coursekit.course.reading import source_to_notebook
from coursekit.mutants import equivalents

pytestmark = pytest.mark.unit

LESSONS = {item.assignment: item for item in all_lessons()}
# Lessons whose table is kept: each must be current (a lesson joins once its table is written).
KEPT = {
    "lesson01", "lesson02", "lesson03", "lesson04", "lesson05", "lesson06", "lesson07", "lesson08",
    "lesson09", "lesson10", "lesson12", "lesson13", "lesson15",
}  # fmt: skip


def test_every_kept_lessons_table_is_as_new_as_its_lesson():
    stale = {}
    for name in sorted(KEPT):
        path = equivalents.table_path(name)
        if not path.exists():
            stale[name] = "no table"
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["graded"] != equivalents.lesson_hash(source_to_notebook(LESSONS[name].source)):
            stale[name] = "its graded cells changed"
    assert not stale, f"stale equivalents tables: {stale}; run make equivalents LESSON=..."


def test_results_are_the_same_answer_structure_by_structure():
    torch = pytest.importorskip("torch")
    assert equivalents.same(np.ones(3), torch.ones(3))
    assert equivalents.same((np.ones(2), 1.0), [np.ones(2), 1.0 + 1e-9])
    assert not equivalents.same(np.ones(3), np.ones((1, 3)))  # the shape is part of the answer
    assert not equivalents.same(True, 1) and not equivalents.same({"a": 1}, {"b": 1})
    assert equivalents.same(float("nan"), np.nan)


def _one_sequence(q, k):  # written for one sequence: (n, d)
    return q @ k.T


def test_a_function_for_one_sequence_counts_looped_over_the_batch():
    q = np.random.default_rng(0).normal(size=(2, 3, 4, 5))
    calls = [((q, q), {}, q @ np.swapaxes(q, -1, -2))]
    assert equivalents._gives_the_answer(_one_sequence, calls)
    assert not equivalents._gives_the_answer(lambda q, k: q @ np.swapaxes(k, -1, -2) + 1, calls)


def test_the_check_refuses_an_equivalent_reached_through_a_helper(monkeypatch):
    namespace = {"__name__": "__main__", "np": np}
    locked = "def kernel_attention_loop(q, k, v):  # a locked helper of the lesson\n    return q\n"
    answer = """
def _helper(q, k, v):
    return kernel_attention_loop(q, k, v)
def linear_attention(q, k, v):
    return _helper(q, k, v)
"""
    exec(compile(locked, "<locked cell>", "exec"), namespace)
    exec(compile(answer, "<answer cell>", "exec"), namespace)
    own = {"__name__": "__main__"}  # the learner's own function of that name, in the answer's cell
    exec(compile(locked + answer.replace("linear_attention", "own_version"), "<answer>", "exec"),
         own)  # fmt: skip
    entry = {"functions": ["linear_attention"], "equivalents": ["kernel_attention_loop"]}
    monkeypatch.setattr(table, "_tables", lambda: {"lesson13": {"exercises": {"x": entry}}})
    fn = namespace["linear_attention"]
    assert isinstance(fn, types.FunctionType)
    assert ownership.equivalents_reached(fn, "linear_attention") == ["kernel_attention_loop"]
    with pytest.raises(AssertionError, match="kernel_attention_loop, which already computes"):
        ownership.expect_own_function(fn, "linear_attention")
    assert ownership.equivalents_reached(own["own_version"], "linear_attention") == []
    assert ownership.equivalents_reached(fn, "another_exercise") == []

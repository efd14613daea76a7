"""Which test cells an answer can reach (coursekit.course.dataflow), and the planted mistakes the
grading chain hands in together because of it (chain/selection.py). Fast: sources only."""

from __future__ import annotations

from types import SimpleNamespace
from unittest.mock import patch

import nbformat
import pytest

from coursekit.course.dataflow import LessonFlow
from coursekit.course.lessons import all_lessons
from coursekit.course.mistakes import all_mistakes

from .chain import selection
from .chain.selection import packed_mistakes, reach, reached_by

pytestmark = pytest.mark.unit


def _cell(source: str, grade_id: str | None = None, *, answer=False, test=False):
    meta = {}
    if grade_id:
        meta = {"grade_id": grade_id, "solution": answer, "grade": test, "schema_version": 3}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta} if meta else {})


def _flow(*cells) -> LessonFlow:
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("import numpy as np\nimport torch\nfrom lib import expect_close"), *cells]
    return LessonFlow(nb)


def test_a_test_that_calls_the_answer_is_reached_and_one_that_does_not_is_not():
    flow = _flow(
        _cell("def f(x):\n    return x + 1", "f", answer=True),
        _cell("def g(x):\n    return 2 * x", "g", answer=True),
        _cell("expect_close(f(1), 2)", "test_f", test=True),
        _cell("expect_close(g(1), 2)", "test_g", test=True),
    )
    assert flow.reached_tests("f") == {"test_f"}
    assert flow.reached_tests("g") == {"test_g"}


def test_what_a_cell_makes_with_the_answer_carries_it_to_later_tests():
    flow = _flow(
        _cell("def step(model, lr):\n    model.w -= lr", "step", answer=True),
        _cell("device = torch.device('cpu')\nmodel = Model().to(device)"),
        _cell("rng = np.random.default_rng(0)"),
        _cell("for _ in range(3):\n    step(model, 0.1)"),  # the learner's loop trains the model
        _cell("x = torch.ones(2).to(device)\nexpect_close(model(x), 0)", "test_model", test=True),
        _cell("expect_close(torch.zeros(2, device=device), 0)", "test_device", test=True),
        _cell("expect_close(rng.normal(), 0)", "test_rng", test=True),
    )
    assert flow.reached_tests("step") == {"test_model"}


def test_reach_follows_conditions_helpers_and_functions_handed_the_answer():
    flow = _flow(
        _cell("def f(x):\n    return x", "f", answer=True),
        _cell("flag = False\nif f(1) > 0:\n    flag = True"),  # bound under a reached condition
        _cell("assert flag", "test_flag", test=True),
        _cell("cache = {}\ndef fill(store, value):\n    store['v'] = value\nfill(cache, f(2))"),
        _cell("assert cache['v'] == 2", "test_cache", test=True),
        _cell("box = []\ncheck(f, box)"),  # a library function handed f may call it with box
        _cell("assert box == []", "test_box", test=True),
        _cell("seen = []\nexpect_close(f(1), 1, seen)"),  # handed data only: changes nothing
        _cell("assert seen == []", "test_seen", test=True),
        _cell("items = []\nitems.append(f(3))"),  # the object whose method keeps it
        _cell("assert items == [3]", "test_items", test=True),
    )
    assert flow.reached_tests("f") == {"test_flag", "test_cache", "test_box", "test_items"}


def test_a_planted_answer_reaches_what_it_touches_and_a_name_bound_again_is_fresh():
    flow = _flow(
        _cell("def f(x):\n    return x", "f", answer=True),
        _cell("counts = []", None),
        _cell("assert counts == []", "test_counts", test=True),
        _cell("out = 1\nexpect_close(out, 1)", "test_fresh", test=True),
    )
    assert flow.reached_tests("f") == set()
    planted = "def f(x):\n    counts.append(x)\n    return x"  # the mistake changes a global
    assert flow.reached_tests("f", (planted,)) == {"test_counts"}
    with pytest.raises(ValueError, match="no code cell 'h'"):
        flow.reached_tests("h")


@pytest.mark.parametrize("item", all_lessons(), ids=lambda item: item.assignment)
def test_every_declared_failure_is_within_the_mistakes_reach(item):
    """The analysis sees every cascade a lesson declares: a mistake's failing cells are among
    those its answer reaches (else the analysis is blind to how the lesson's cells meet)."""
    mistakes = [m for m in all_mistakes() if m.lesson == item.assignment]
    blind = {m.name: sorted(m.fails - reached_by(m)) for m in mistakes if m.fails - reached_by(m)}
    assert not blind, f"{item.assignment}: failures the analysis does not reach: {blind}"


@pytest.mark.parametrize("item", all_lessons(), ids=lambda item: item.assignment)
def test_mistakes_handed_in_together_never_meet(item):
    mistakes = [m for m in all_mistakes() if m.lesson == item.assignment]
    notebooks = packed_mistakes(mistakes)
    assert sorted(m.name for n in notebooks.values() for m in n) == sorted(m.name for m in mistakes)
    for student, together in notebooks.items():
        for i, one in enumerate(together):
            for other in together[i + 1 :]:
                assert one.cell != other.cell, f"{student}: two mistakes in {one.cell}"
                assert reach(one).isdisjoint(reach(other)), f"{student}: {one.name}, {other.name}"


class _Graded:
    """Results as the chain's fixture keeps them, for a lesson whose fullest notebook failed
    ``failed``; a mistake graded alone fails its own cells."""

    def __init__(self, student: str, failed: set[str]):
        self.student, self.failed, self.asked_alone = student, failed, []

    def results(self, lesson):
        return {self.student: SimpleNamespace(failed=frozenset(self.failed))}

    def alone(self, lesson, mistake):
        self.asked_alone.append(mistake.name)
        return SimpleNamespace(failed=mistake.fails)


def test_a_notebook_that_loses_more_than_its_mistakes_has_them_judged_alone():
    mistakes = [m for m in all_mistakes() if m.lesson == "lesson12"]
    student, together = max(packed_mistakes(mistakes).items(), key=lambda item: len(item[1]))
    union = frozenset().union(*(m.fails for m in together))
    first = together[0]
    graded = _Graded(student, set(union))
    with patch.object(selection, "selected_mistakes", lambda: mistakes):
        assert selection.judged(graded, first) == (student, graded.results(None)[student], union)
        assert graded.asked_alone == []
        graded.failed = set(union) | {"test_an_interaction"}
        with pytest.warns(UserWarning, match=f"{first.name} is graded on its own"):
            judged_as, result, expected = selection.judged(graded, first)
    assert (judged_as, result.failed, expected) == (first.student, first.fails, first.fails)
    assert graded.asked_alone == [first.name]

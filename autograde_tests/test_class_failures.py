"""What the class got wrong (coursekit.grading.failures), counted from results as class grading
reads them: per test cell the share that lost its points, wrong answers apart from unanswered
ones, messages grouped whatever numbers they quote, the worst cells first, a table and a plot.
(That the planted mistakes of a graded synthetic class come out on top is
autograde_tests/test_class_report.py.)"""

from __future__ import annotations

import pytest

from coursekit.course.lessons import lesson as find_lesson
from coursekit.grading import failures
from coursekit.grading.results import CellResult, NotebookResult

pytestmark = pytest.mark.unit

LESSON = find_lesson("lesson01")
WRONG = "AssertionError: softmax of [1000, 1000]: got nan at index (0,) where 0.5 was expected"
NOT_DONE = "NotImplementedError: "


def _row(student: str, status: str = "graded", **failed: str) -> NotebookResult:
    cells = [
        CellResult(test, 0.0 if test in failed else 2.0, 2.0, failed.get(test, ""))
        for test in ("test_softmax", "test_lookup", "test_kernel")
    ]
    return NotebookResult(student, LESSON, status, 0.0, 6.0, cells)


def test_shares_messages_and_the_worst_cells():
    rows = [
        _row("a"),
        _row("b", test_softmax=WRONG),
        _row("c", test_softmax=WRONG.replace("index (0,)", "index (3,)")),  # the same property
        _row("d", test_lookup="ValueError: shapes (2,3) and (4,) not aligned"),
        _row("e", test_softmax=NOT_DONE, test_lookup=NOT_DONE, test_kernel=NOT_DONE),
        _row("f", "held", test_kernel=WRONG),
        _row("g", "invalid"),  # never graded: no test results to count
    ]
    cells = {c.grade_id: c for c in failures.tally(rows)}
    softmax, lookup, kernel = cells["test_softmax"], cells["test_lookup"], cells["test_kernel"]
    assert [c.grade_id for c in cells.values()] == ["test_softmax", "test_lookup", "test_kernel"]
    assert (softmax.counted, softmax.lost, softmax.wrong, softmax.unanswered) == (6, 3, 2, 1)
    assert softmax.share == pytest.approx(0.5)
    assert softmax.top(1) == [(WRONG, 2)]  # grouped although the index differs, shown as written
    assert (lookup.wrong, kernel.wrong) == (1, 1)
    worst = failures.worst(list(cells.values()))
    assert [c.grade_id for c in worst] == ["test_softmax", "test_lookup", "test_kernel"]
    text = "\n".join(failures.summary(list(cells.values())))
    assert "test_softmax: 50% lost its 2 points (2 wrong, 1 not answered)" in text
    assert "2 x AssertionError: softmax of [1000, 1000]" in text
    assert "NotImplementedError" not in text  # unanswered is counted, not listed as a message


def test_a_class_that_passed_everything():
    assert failures.summary(failures.tally([_row("a")])) == [
        "what the class got wrong: nothing; every graded test cell passed"
    ]


def test_the_table_and_the_plot(tmp_path):
    cells = failures.tally([_row("a", test_lookup="AssertionError: a | b"), _row("b")])
    table, picture = failures.write_reports(tmp_path, cells, "lesson01")
    assert "| test_lookup | 2 | 50% | 1 | 0 | 1 x AssertionError: a \\| b |" in table.read_text()
    assert picture.name == "failures.png" and picture.read_bytes()[:4] == b"\x89PNG"

"""A synthetic class graded as `make grade-class` grades it (coursekit.democlass: solved, blank,
planted mistakes, a broken or hostile submission, and a planted copy), then what class grading
reports after the deadline:

* what the class got wrong: each test cell's wrong answers are exactly the planted mistakes that
  fail it, the unanswered ones the blank submissions, and the worst cell is one a planted mistake
  fails; the table and the plot are written;
* the similarity report finds the planted copy (renamed variables, reordered functions, changed
  comments), which is graded like its original, and shows it side by side.

Graded once for the module (one group under pytest-xdist: autograde_tests/conftest.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.mistakes import lesson_mistakes
from coursekit.democlass.copies import planted_found, source_of
from coursekit.democlass.synthetic import build_synthetic
from coursekit.grading import failures
from coursekit.grading.classgrade import ClassReport, grade_class

from .sandboxes import nbgrader_flags

pytestmark = [pytest.mark.chain, pytest.mark.synthetic_class]

LESSON = find_lesson("lesson01")
SIZE = 10  # four solved, one blank, three planted mistakes, one planted copy, one bad


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[dict, ClassReport, Path]:
    course = tmp_path_factory.mktemp("synthetic") / "course"
    plan = build_synthetic(course, LESSON, SIZE)
    extra = ["--Execute.timeout=10", *nbgrader_flags()]
    return plan, grade_class(course, LESSON, extra=extra, progress=False), course


def _mistake(student: str):
    """The planted mistake a student handed in (a copy hands in its original's)."""
    _, found, name = student.partition("-mistake-")
    mistakes = {m.name: m for m in lesson_mistakes(LESSON.assignment)}
    return mistakes[name] if found else None


def test_the_planted_mistakes_are_what_the_class_got_wrong(graded):
    plan, report, _ = graded
    assert Counter(plan.values()) == {"solved": 4, "blank": 1, "mistake": 3, "copy": 1, "bad": 1}
    honest = [r for r in report.rows if plan[r.student] != "bad"]  # a bad one fails anything
    cells = {c.grade_id: c for c in failures.tally(honest)}
    planted = [_mistake(r.student) for r in honest if _mistake(r.student)]
    blank = sum(what == "blank" for what in plan.values())
    for test, found in cells.items():
        expected = sum(test in m.fails for m in planted)
        assert (found.wrong, found.unanswered) == (expected, blank), test
    worst = failures.worst(failures.tally(report.rows), 1)[0]  # the whole class this time
    assert any(worst.grade_id in m.fails for m in planted), worst
    summary = "\n".join(report.after_deadline())
    assert f"{worst.grade_id}: " in summary.splitlines()[1]


def test_the_report_files_are_written(graded):
    _, _, course = graded
    folder = course / "reports" / LESSON.assignment
    for name in ("failures.md", "failures.png", "similarity.html", "similarity.csv"):
        assert (folder / name).stat().st_size > 0, name


def test_the_planted_copy_is_found_and_graded_like_its_original(graded):
    plan, report, course = graded
    assert planted_found(report.similarity) == (1, 1)
    copy = next(student for student, what in plan.items() if what == "copy")
    original = source_of(copy)
    assert report.row(copy).auto == report.row(original).auto  # the disguise changed nothing
    pair = next(p for p in report.similarity.flagged if {p.first, p.second} == {copy, original})
    assert pair.score >= report.similarity.threshold
    page = (course / "reports" / LESSON.assignment / "similarity.html").read_text()
    assert f"{min(copy, original)} and {max(copy, original)}" in page


def test_make_grade_class_prints_both_rates_of_the_similarity_report(graded, monkeypatch):
    """Beside the planted copies of its class, `make grade-class` prints what the report finds of
    the disguised copies of every lesson and how many honest pairs it flags (measured by
    coursekit.democlass.detection, held to its goals in test_similarity.py: here one lesson,
    to see the lines)."""
    from coursekit.democlass import __main__ as democlass
    from coursekit.democlass import detection

    _, report, _ = graded
    every_lesson = detection.measure
    monkeypatch.setattr(detection, "measure", lambda: every_lesson([LESSON]))
    lines = democlass._similarity_measured(report)
    assert lines[1] == "planted copies found: 1 of 1 (renamed variables, reordered functions, " + (
        "changed comments: the pair of copy and original flagged)"
    )
    assert any(line.startswith("disguised copies found: ") for line in lines)
    assert any(line.startswith("honest pairs flagged: 0 of ") for line in lines)
    assert any(
        line.startswith("independent correct answers to one exercise: 0 of ") for line in lines
    )

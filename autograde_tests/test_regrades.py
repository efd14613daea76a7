"""Regrade requests (coursekit.grading.regrades) on a gradebook made with nbgrader's own API, no
grading needed (seconds): a request needs a reason, an answer a reply; the points change as
nbgrader's manual grade, the late penalty is taken again from the new score, and the record
beside the gradebook says who asked what, and what was decided. That nbgrader export and the
LMS files then count it: autograde_tests/test_after_deadline.py."""

from __future__ import annotations

import os
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from coursekit.course.lessons import lesson as find_lesson
from coursekit.grading import regrades
from coursekit.grading.gradebook import open_gradebook
from coursekit.grading.holds import hold
from coursekit.grading.regrades import RegradeError

pytestmark = pytest.mark.unit

LESSON = find_lesson("lesson01")
DUE = datetime(2026, 3, 2, 22, 59)
COURSE = """[course]
roster = "roster.csv"
[deadlines]
lesson01 = 2026-03-02T22:59:00Z
[late]
policy = "per-day"
percent = 10
cap = 50
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A gradebook with ann (on time: 2 of test_a's 4 points, test_b's 6) and bo (a day and an
    hour late: both full, 10 points, less 20 %), made once (nbgrader runs alembic to make one)."""
    path = tmp_path_factory.mktemp("template") / "gradebook.db"
    bin_folder = str(Path(sys.executable).parent)  # alembic (make puts it on PATH)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
        with open_gradebook(path) as book:
            book.add_assignment(LESSON.assignment, duedate=DUE)
            book.add_notebook(LESSON.name, LESSON.assignment)
            for cell, points in (("test_a", 4), ("test_b", 6)):
                book.add_grade_cell(cell, LESSON.name, LESSON.assignment, max_score=points,
                                    cell_type="code")  # fmt: skip
            for student, late, scores in (("ann", -1, (2, 6)), ("bo", 25, (4, 6))):
                book.add_student(student)
                book.add_submission(LESSON.assignment, student,
                                    timestamp=DUE + timedelta(hours=late))  # fmt: skip
                notebook = book.find_submission_notebook(LESSON.name, LESSON.assignment, student)
                for grade, score in zip(sorted(notebook.grades, key=lambda g: g.name), scores):
                    grade.auto_score = score
                notebook.late_submission_penalty = 2.0 if late > 0 else None
            book.db.commit()
    return path


@pytest.fixture
def course(tmp_path, monkeypatch, template):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    (tmp_path / "classroom").mkdir()
    (tmp_path / "classroom" / "course.toml").write_text(COURSE)
    (tmp_path / "classroom" / "roster.csv").write_text("username,role\nann,student\nbo,student\n")
    shutil.copy2(template, tmp_path / "gradebook.db")
    return tmp_path, LESSON.in_course(tmp_path)


def _score(course, lesson, student) -> tuple[float, float]:
    with open_gradebook(course / "gradebook.db") as book:
        notebook = book.find_submission_notebook(lesson.name, lesson.assignment, student)
        return float(notebook.score), float(notebook.late_submission_penalty or 0)


def test_a_request_answered_with_points_changes_the_manual_grade(course):
    root, lesson = course
    regrades.request(root, lesson, "ann", "test_a", "my answer handles the batch case")
    done = regrades.answer(root, lesson, "ann", "test_a", "right: full marks", points=4)
    assert (done.status, done.points_before, done.points_after) == ("changed", "2", "4")
    assert _score(root, lesson, "ann") == (10.0, 0.0)
    (row,) = regrades.read(root, lesson)
    assert row.reason == "my answer handles the batch case" and row.reply == "right: full marks"
    assert row.requested and row.answered


def test_the_late_penalty_is_taken_again_from_the_new_score(course):
    root, lesson = course
    regrades.request(root, lesson, "bo", "test_b", "please check the second case")
    done = regrades.answer(root, lesson, "bo", "test_b", "it returns NaN there", points=1)
    assert _score(root, lesson, "bo") == (5.0, 1.0)  # 20 % (two days begun) of 5, not of 10
    assert (done.penalty_before, done.penalty_after) == ("2", "1")


def test_an_answer_that_keeps_the_points_is_recorded(course):
    root, lesson = course
    regrades.request(root, lesson, "ann", "test_a", "why only 2?")
    done = regrades.answer(root, lesson, "ann", "test_a", "the causal case is wrong")
    assert done.status == "kept" and _score(root, lesson, "ann") == (8.0, 0.0)
    assert "kept" in regrades._listed(regrades.read(root, lesson))[0]


def test_what_cannot_be_recorded_is_refused(course):
    root, lesson = course
    with pytest.raises(RegradeError, match="needs a reason"):
        regrades.request(root, lesson, "ann", "test_a", " ")
    with pytest.raises(RegradeError, match="no test cell 'test_c'"):
        regrades.request(root, lesson, "ann", "test_c", "why?")
    with pytest.raises(RegradeError, match="no graded submission"):
        regrades.request(root, lesson, "cy", "test_a", "why?")
    regrades.request(root, lesson, "ann", "test_a", "why?")
    with pytest.raises(RegradeError, match="already has an open request"):
        regrades.request(root, lesson, "ann", "test_a", "why, again?")
    with pytest.raises(RegradeError, match="worth 0 to 4 points, not 5"):
        regrades.answer(root, lesson, "ann", "test_a", "generous", points=5)
    with pytest.raises(RegradeError, match="no open request about test_b"):
        regrades.answer(root, lesson, "ann", "test_b", "?", points=1)
    with open_gradebook(root / "gradebook.db") as book:
        hold(book, lesson.assignment, lesson.name, "ann")
    with pytest.raises(RegradeError, match="held for review"):
        regrades.answer(root, lesson, "ann", "test_a", "fine", points=4)
    assert [r.status for r in regrades.read(root, lesson)] == ["open"]


def test_the_command_line_records_and_lists(course, capsys):
    root, lesson = course
    base = ["--course", str(root)]
    assert regrades.main([*base, "request", "lesson01", "ann", "test_a", "--reason", "why?"]) == 0
    assert regrades.main([*base, "answer", "lesson01", "ann", "test_a", "--points", "3",
                          "--reply", "one more"]) == 0  # fmt: skip
    assert regrades.main([*base, "list", "lesson01"]) == 0
    out = capsys.readouterr().out
    assert "changed  " in out and "points 2 to 3, late penalty 0 to 0: one more" in out
    assert regrades.main([*base, "answer", "lesson01", "ann", "test_a", "--keep",
                          "--reply", "again"]) == 1  # fmt: skip

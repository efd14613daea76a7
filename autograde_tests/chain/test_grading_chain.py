"""The grading chain, end to end through real nbgrader (see chain/conftest.py)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from coursekit.course.lessons import ROOT
from coursekit.course.mistakes import all_mistakes, everyday_mistakes
from coursekit.grading import tempcourse as grading

from ..leaks import hidden_test_lines
from .selection import (
    judged,
    packed_mistakes,
    reach,
    selected_lessons,
    selected_mistakes,
    unrunnable_lessons,
)

LESSONS = selected_lessons()
UNRUNNABLE = unrunnable_lessons()
MISTAKES = selected_mistakes()
pytestmark = pytest.mark.chain


def _failures(result) -> str:
    return "\n".join(
        f"  {c.grade_id}: {c.score}/{c.max_score} {c.message}" for c in result.cells if not c.passed
    )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_solved_lesson_scores_full_marks(graded, lesson):
    result = graded.results(lesson)["solved"]
    assert result.max_score > 0 and len(result.cells) >= 4, (
        "a lesson has at least 4 graded test cells"
    )
    assert result.score == result.max_score, f"the solved lesson lost points:\n{_failures(result)}"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_solved_lesson_executes_without_error(graded, lesson):
    """autograde ran the whole solved notebook, hidden tests included, top to bottom."""
    result = graded.results(lesson)["solved"]
    assert result.errors == [], f"cells of the solved {lesson.assignment} raised: {result.errors}"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_student_edition_scores_zero(graded, lesson):
    result = graded.results(lesson)["blank"]
    passed = [c.grade_id for c in result.cells if c.score > 0]
    assert result.score == 0, f"the unanswered student edition earns points in {passed}"
    assert all("NotImplementedError" in c.message for c in result.cells), _failures(result)


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.student)
def test_planted_mistake_loses_exactly_its_points(graded, mistake):
    """A planted mistake loses exactly the points of the test cells it names, judged in the
    notebook it shares with mistakes it cannot meet, or on its own where that notebook did not
    lose the union of their cells (selection.judged). An alternative answer (it fails nothing)
    gets full marks, in the notebook it shares."""
    student, result, expected = judged(graded, mistake)
    known = {c.grade_id for c in result.cells}
    assert mistake.fails <= known, f"unknown test cells {sorted(mistake.fails - known)}"
    assert result.failed == expected, (
        f"{mistake.name} (in {student}): expected to fail {sorted(mistake.fails)}, "
        f"failed {sorted(result.failed)}\n"
        f"{_failures(result)}"
    )
    lost = sum(c.max_score for c in result.cells if c.grade_id in expected)
    assert result.score == result.max_score - lost
    for cell in result.cells:
        if not cell.passed:
            assert cell.message and "Traceback" not in cell.message, cell.message
    print(f"{mistake.student} (in {student}): {result.score:g}/{result.max_score:g}")


def _fullest_notebook(lesson) -> tuple[str, list]:
    """(student, mistakes) of the lesson's notebook that holds the most selected mistakes."""
    mine = [m for m in MISTAKES if m.lesson == lesson.assignment and m.kind != "alternative"]
    return max(packed_mistakes(mine).items(), key=lambda item: len(item[1]), default=("", []))


# The lesson whose packing is checked against grading alone: the first selected one that packs.
PACKED = next((item for item in LESSONS if len(_fullest_notebook(item)[1]) > 1), None)


@pytest.mark.parametrize("lesson", [PACKED] if PACKED else [], ids=lambda item: item.assignment)
def test_a_mistake_handed_in_alone_loses_what_it_lost_with_others(graded, lesson):
    """The packing, checked by grading (on one lesson: each check costs a course and a
    notebook): the first mistake of the lesson's fullest notebook, graded again on its own,
    fails the same cells as its share of that notebook. test_dataflow.py checks the packing of
    every lesson against the analysis; a notebook that loses more is judged alone anyway."""
    student, together = _fullest_notebook(lesson)
    mistake = together[0]
    packed = graded.results(lesson)[student].failed & reach(mistake)
    alone = graded.alone(lesson, mistake).failed
    assert alone == packed == mistake.fails, (
        f"{mistake.name}: alone it failed {sorted(alone)}; beside "
        f"{[m.name for m in together[1:]]} in {student}, {sorted(packed)}"
    )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_honest_submissions_are_never_held_for_review(graded, lesson):
    """Solved, blank and planted mistakes do nothing the grader's guards object to (a lesson whose
    own code trips the screening, the sandbox or the guard would have every student held)."""
    for student, result in graded.results(lesson).items():
        suspicious = [str(f) for f in result.findings if f.severity != "note"]
        assert not result.held and not suspicious, f"{lesson.assignment} {student}: {suspicious}"


def test_every_lesson_has_planted_mistakes():
    """Lesson 1 at least 3, the others at least 2 -- and as many in the everyday run."""
    for lesson in LESSONS:
        least = 3 if lesson.assignment == "lesson01" else 2
        for pool in (all_mistakes(), everyday_mistakes()):
            count = sum(m.lesson == lesson.assignment for m in pool)
            assert count >= least, f"{lesson.assignment}: {count} planted mistakes"


if UNRUNNABLE:  # only where some lesson cannot run: elsewhere there is nothing to report

    @pytest.mark.parametrize("assignment", sorted(UNRUNNABLE), ids=str)
    def test_lessons_this_machine_cannot_run_are_skipped_with_the_reason(assignment):
        """A lesson that needs a package this platform lacks (lesson 11: Triton, Linux only) is
        not graded here, and says why, instead of failing every chain test."""
        pytest.skip(UNRUNNABLE[assignment])


def _comparable(text: str) -> dict:
    return nbformat.from_dict(json.loads(text))


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def committed_student_edition(lesson) -> str:
    """The student notebook as committed, wherever the lesson's source is as committed: `make
    book` and `make lab` regenerate notebooks/ in the working tree from a newer source, as every
    fresh clone's is, so the working tree alone could hide a stale commit. Mid-edit, or outside
    a git checkout, the working tree's."""
    source = lesson.source.parent.relative_to(ROOT).as_posix()
    notebook = lesson.student_notebook.relative_to(ROOT).as_posix()
    if _git("diff", "--quiet", "HEAD", "--", source).returncode == 0:
        shown = _git("show", f"HEAD:{notebook}")
        if shown.returncode == 0:
            return shown.stdout
    return lesson.student_notebook.read_text(encoding="utf-8")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_committed_student_edition_matches_generated(graded, lesson):
    """notebooks/ is exactly what `make notebooks` (nbgrader generate_assignment) produces."""
    generated_path = lesson.in_course(graded.courses(lesson)[0]).student_notebook
    generated = _comparable(generated_path.read_text(encoding="utf-8"))
    committed = _comparable(committed_student_edition(lesson))
    assert committed == generated, (
        f"{lesson.student_notebook}, as committed, is out of date with solutions/"
        f"{lesson.assignment}: run `make notebooks` and commit notebooks/"
    )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_student_edition_has_no_solutions_hidden_tests_or_outputs(lesson):
    text = lesson.student_notebook.read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "as _ref"):
        assert marker not in text, f"{lesson.student_notebook} contains {marker!r}"
    nb = nbformat.reads(text, as_version=4)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count)
    ]
    assert not dirty, f"cells {dirty} of {lesson.student_notebook} carry outputs"


def _feedback_and_export(course, assignment):
    grading.run_nbgrader("generate_feedback", assignment, "--force", course=course)
    grading.run_nbgrader("export", course=course)


@pytest.fixture(scope="session")
def feedback(graded):
    """lesson -> its courses, after nbgrader generate_feedback and export ran in each, as the
    book's instructor page (book/grading.md) runs them (once per lesson, its courses side by
    side)."""
    done: dict = {}

    def run(lesson):
        if lesson.assignment not in done:
            courses = graded.courses(lesson)
            with ThreadPoolExecutor(len(courses)) as pool:
                list(
                    pool.map(
                        lambda course: _feedback_and_export(course, lesson.assignment), courses
                    )
                )
            done[lesson.assignment] = courses
        return done[lesson.assignment]

    return run


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_export_has_every_students_score(feedback, graded, lesson):
    import csv

    rows = [row for c in feedback(lesson) for row in csv.DictReader((c / "grades.csv").open())]
    for student, result in graded.results(lesson).items():
        row = next(
            r for r in rows if r["assignment"] == lesson.assignment and r["student_id"] == student
        )
        assert float(row["raw_score"]) == result.score, (lesson.assignment, student)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_feedback_shows_scores_and_messages_but_no_hidden_tests(feedback, graded, lesson):
    import html
    import re

    hidden = hidden_test_lines(lesson)
    assert hidden
    feedback(lesson)
    for student, result in graded.results(lesson).items():
        page = result.lesson.student_folder("feedback", student) / f"{lesson.name}.html"
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"feedback of {student} shows hidden tests: {leaked[:2]}"
        assert f"Score: {result.score:.1f} / {result.max_score:.1f}" in text, (
            f"{student}: total score missing"
        )
        for cell in result.cells:
            if not cell.passed:
                assert cell.message.splitlines()[0][:60] in text, (
                    f"{student}: message of {cell.grade_id} missing"
                )

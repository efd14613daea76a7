"""One nbgrader course per lesson, graded once per test session, shared by that lesson's tests.

For each lesson three kinds of learner hand in: ``solved`` (the student edition answered with
the solutions), ``blank`` (the student edition as released) and the planted mistakes, several to
a notebook where no test cell can see two of them (selection.packed_mistakes). A lesson is graded
when the first of its tests asks for it, by stock `nbgrader autograde`, and each lesson is one
group of tests for pytest-xdist (autograde_tests/conftest.py): under `make test` the workers
share the lessons out and grade them side by side. Run alone (one process, one lesson under
COURSE_LESSONS), a lesson's learners are split into one course (and gradebook: one SQLite file
takes one writer) per core, graded side by side: nbgrader grades one notebook after another.
"""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import nbformat
import pytest

from coursekit.course.lessons import Lesson
from coursekit.course.mistakes import fill_solutions, plant
from coursekit.grading import tempcourse as grading
from coursekit.grading.results import read_results

from ..sandboxes import nbgrader_flags
from .selection import handed_in_together, packed_mistakes, selected_mistakes

CORES = max(1, min(len(os.sched_getaffinity(0)), 4))
# Under pytest-xdist the other workers grade other lessons at the same time: one course per lesson.
PARTS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else CORES
# Kernels graded side by side get one thread each: two kernels with two BLAS/torch threads each
# on two cores wait on each other at every small product.
KERNEL_OPTIONS = ("--SandboxKernelManager.threads=1",) if CORES > 1 else ()


def _learners(lesson: Lesson, student_nb, solved_nb) -> dict:
    """{student: notebook}: the solved lesson, the student edition, the planted mistakes and the
    alternative answers, each several to a notebook (selection.packed_mistakes and
    selection.handed_in_together)."""
    handed_in = {"solved": fill_solutions(student_nb, solved_nb), "blank": student_nb}
    mine = [m for m in selected_mistakes() if m.lesson == lesson.assignment]
    for student, mistakes in packed_mistakes([m for m in mine if m.kind != "alternative"]).items():
        edits = {mistake.cell: (mistake.old, mistake.new) for mistake in mistakes}
        handed_in[student] = fill_solutions(student_nb, solved_nb, edits)
    alternatives = [m for m in mine if m.kind == "alternative"]
    for student, answers in handed_in_together(alternatives).items():
        edits = {answer.cell: (answer.old, answer.new) for answer in answers}
        handed_in[student] = fill_solutions(student_nb, solved_nb, edits)
    return handed_in


def _grade_part(folder: Path, lesson: Lesson, part: int, parts: int) -> tuple[Path, dict]:
    """A course of its own for every ``parts``-th learner from ``part`` on, graded by one stock
    `nbgrader autograde`."""
    course = grading.make_course(folder, [lesson])
    student_nb = nbformat.read(lesson.in_course(course).student_notebook, 4)
    solved_nb = nbformat.read(lesson.in_course(course).source_notebook, 4)
    learners = list(_learners(lesson, student_nb, solved_nb).items())
    for student, notebook in learners[part::parts]:
        grading.submit(course, student, lesson, notebook)
    grading.autograde(course, lesson, *KERNEL_OPTIONS, *nbgrader_flags())
    return course, read_results(course, lesson)


def _warm_compile_cache(folder: Path, lesson: Lesson) -> None:
    """Lesson 11's tests compile its kernels for GPUs (attention_ref.flash.compiler) and keep what
    compiled in a cache in the Python environment, which a graded notebook reads but, in the
    grading sandbox, cannot write. The solved lesson run once here, outside the sandbox (the
    cells skipped when grading left out), leaves its kernels' builds there: each graded notebook
    then compiles only the kernels it changed. (A cache, nothing more: a cold one changes no
    result, only the time.)"""
    if "expect_compiles(" not in lesson.source.read_text(encoding="utf-8"):
        return
    import jupytext
    import nbclient

    from coursekit.course.skipped import is_skipped

    notebook = jupytext.read(lesson.source)
    notebook.cells = [cell for cell in notebook.cells if not is_skipped(cell)]
    folder.mkdir(parents=True, exist_ok=True)
    nbclient.NotebookClient(
        notebook, timeout=900, kernel_name="python3", allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    ).execute(env={**os.environ, "ATTENTION_REF_KEEP_BUILDS": "1"})  # fmt: skip


def _grade_lesson(root: Path, lesson: Lesson) -> tuple[list[Path], dict]:
    """(the lesson's course directories, {student: NotebookResult}), its PARTS side by side."""
    _warm_compile_cache(root / f"{lesson.assignment}-warm-up", lesson)
    folders = [root / f"{lesson.assignment}-{i}" for i in range(PARTS)]
    with concurrent.futures.ThreadPoolExecutor(PARTS) as pool:  # each thread waits on nbgrader
        done = list(pool.map(lambda i: _grade_part(folders[i], lesson, i, PARTS), range(PARTS)))
    merged: dict = {}
    for _, results in done:
        merged.update(results)
    return [course for course, _ in done], merged


def _grade_alone(folder: Path, lesson: Lesson, mistake) -> dict:
    """``mistake`` handed in on its own, in a course of its own: {student: NotebookResult}."""
    course = grading.make_course(folder, [lesson])
    student_nb = nbformat.read(lesson.in_course(course).student_notebook, 4)
    solved_nb = nbformat.read(lesson.in_course(course).source_notebook, 4)
    grading.submit(course, mistake.student, lesson, plant(student_nb, solved_nb, mistake))
    grading.autograde(course, lesson, *nbgrader_flags())
    return read_results(course, lesson)


class GradedLessons:
    """Each lesson graded on first request, then remembered for the session."""

    def __init__(self, root: Path):
        self.root, self.done, self.single, self.failed = root, {}, {}, {}

    def alone(self, lesson: Lesson, mistake):
        """The NotebookResult of ``mistake`` handed in on its own (graded when first asked: when
        the notebook it shared did not lose what its mistakes lose alone)."""
        if mistake.student not in self.single:
            folder = self.root / f"alone-{mistake.student}"
            self.single[mistake.student] = _grade_alone(folder, lesson, mistake)[mistake.student]
        return self.single[mistake.student]

    def __call__(self, lesson: Lesson) -> tuple[list[Path], dict]:
        if lesson.assignment in self.failed:
            # graded once: the next test of the lesson reports the same failure instead of
            # grading it all again (which cost CI a whole lesson and hid a flaky failure)
            raise self.failed[lesson.assignment]
        if lesson.assignment not in self.done:
            try:
                self.done[lesson.assignment] = _grade_lesson(self.root, lesson)
            except grading.GradingError as problem:
                self.failed[lesson.assignment] = problem
                raise
        return self.done[lesson.assignment]

    def courses(self, lesson: Lesson) -> list[Path]:
        """The lesson's courses, each made by nbgrader generate_assignment from the source."""
        return self(lesson)[0]

    def results(self, lesson: Lesson) -> dict:
        """{student: NotebookResult} for every submission of the lesson."""
        return self(lesson)[1]


@pytest.fixture(scope="session")
def graded(tmp_path_factory) -> GradedLessons:
    return GradedLessons(tmp_path_factory.mktemp("courses"))

"""One nbgrader course per lesson, graded once per test session, shared by every chain test.

For each lesson three kinds of learner hand in: ``solved`` (the student edition answered with
the solutions), ``blank`` (the student edition as released) and one learner per planted
mistake. A single ``nbgrader autograde`` per lesson grades them all. Each lesson has a course
(and a gradebook: one SQLite file takes one writer) of its own, so that the lessons are graded
side by side, one per core: nbgrader grades one notebook after another.
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
from .selection import selected_lessons, selected_mistakes

WORKERS = max(1, min(len(os.sched_getaffinity(0)), 4))
# Kernels graded side by side get one thread each: two kernels with two BLAS/torch threads each
# on two cores wait on each other at every small product.
KERNEL_OPTIONS = ("--SandboxKernelManager.threads=1",) if WORKERS > 1 else ()


def _grade_lesson(root: Path, lesson: Lesson) -> tuple[Path, dict]:
    """Make the lesson's course, hand in every learner's notebook, autograde, read the scores."""
    course = grading.make_course(root / lesson.assignment, [lesson])
    student_nb = nbformat.read(course / "notebooks" / lesson.assignment / f"{lesson.name}.ipynb", 4)
    solved_nb = nbformat.read(course / "solutions" / lesson.assignment / f"{lesson.name}.ipynb", 4)
    grading.submit(course, "solved", lesson, fill_solutions(student_nb, solved_nb))
    grading.submit(course, "blank", lesson, student_nb)
    for mistake in (m for m in selected_mistakes() if m.lesson == lesson.assignment):
        planted = plant(student_nb, solved_nb, mistake)
        grading.submit(course, mistake.student, lesson, planted)
    grading.autograde(course, lesson, *KERNEL_OPTIONS, *nbgrader_flags())
    return course, read_results(course, lesson)


@pytest.fixture(scope="session")
def graded_courses(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """{assignment: (course directory, {student: NotebookResult})}, lessons graded in parallel."""
    root = tmp_path_factory.mktemp("courses")
    lessons = selected_lessons()
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:  # each worker waits on nbgrader
        futures = {
            lesson.assignment: pool.submit(_grade_lesson, root, lesson) for lesson in lessons
        }
        return {assignment: future.result() for assignment, future in futures.items()}


@pytest.fixture(scope="session")
def courses(graded_courses) -> dict[str, Path]:
    """{assignment: its course directory, made by nbgrader generate_assignment from the source}."""
    return {assignment: course for assignment, (course, _) in graded_courses.items()}


@pytest.fixture(scope="session")
def graded(graded_courses) -> dict:
    """{(assignment, student): NotebookResult} for every submission of every lesson."""
    return {
        (assignment, student): result
        for assignment, (_, results) in graded_courses.items()
        for student, result in results.items()
    }

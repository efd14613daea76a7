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


def _learners(lesson: Lesson, student_nb, solved_nb) -> dict:
    """{student: notebook}: the solved lesson, the student edition, one per planted mistake."""
    handed_in = {"solved": fill_solutions(student_nb, solved_nb), "blank": student_nb}
    for mistake in (m for m in selected_mistakes() if m.lesson == lesson.assignment):
        handed_in[mistake.student] = plant(student_nb, solved_nb, mistake)
    return handed_in


def _grade_part(folder: Path, lesson: Lesson, part: int, parts: int) -> tuple[Path, dict]:
    """A course of its own (its own gradebook: one SQLite file takes one writer) for every
    ``parts``-th learner from ``part`` on, graded by one stock `nbgrader autograde`."""
    course = grading.make_course(folder, [lesson])
    student_nb = nbformat.read(lesson.in_course(course).student_notebook, 4)
    solved_nb = nbformat.read(lesson.in_course(course).source_notebook, 4)
    learners = list(_learners(lesson, student_nb, solved_nb).items())
    for student, notebook in learners[part::parts]:
        grading.submit(course, student, lesson, notebook)
    grading.autograde(course, lesson, *KERNEL_OPTIONS, *nbgrader_flags())
    return course, read_results(course, lesson)


@pytest.fixture(scope="session")
def graded_courses(tmp_path_factory) -> dict[str, tuple[list[Path], dict]]:
    """{assignment: (its course directories, {student: NotebookResult})}.

    Every (lesson, part) is graded by its own `nbgrader autograde`, WORKERS at a time. A lesson's
    learners are dealt into parts when there are fewer lessons than workers (one lesson under
    COURSE_LESSONS: both cores grade it), else each lesson is one part."""
    root = tmp_path_factory.mktemp("courses")
    lessons = selected_lessons()
    count = max(1, WORKERS // len(lessons)) if lessons else 1
    jobs = [
        (lesson, root / f"{lesson.assignment}-{i}", i) for lesson in lessons for i in range(count)
    ]
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:  # each worker waits on nbgrader
        futures = [
            (lesson, pool.submit(_grade_part, folder, lesson, i, count))
            for lesson, folder, i in jobs
        ]
        out: dict[str, tuple[list[Path], dict]] = {}
        for lesson, future in futures:
            course, results = future.result()
            folders, merged = out.setdefault(lesson.assignment, ([], {}))
            folders.append(course)
            merged.update(results)
        return out


@pytest.fixture(scope="session")
def courses(graded_courses) -> dict[str, list[Path]]:
    """{assignment: its courses, each made by nbgrader generate_assignment from the source}."""
    return {assignment: folders for assignment, (folders, _) in graded_courses.items()}


@pytest.fixture(scope="session")
def graded(graded_courses) -> dict:
    """{(assignment, student): NotebookResult} for every submission of every lesson."""
    return {
        (assignment, student): result
        for assignment, (_, results) in graded_courses.items()
        for student, result in results.items()
    }

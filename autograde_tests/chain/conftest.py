"""One nbgrader course, graded once per test session, shared by every chain test.

For each lesson three kinds of learner hand in: ``solved`` (the student edition answered with
the solutions), ``blank`` (the student edition as released) and one learner per planted
mistake. A single ``nbgrader autograde`` per lesson grades them all.
"""

from __future__ import annotations

import nbformat
import pytest

from coursekit import grading

from .selection import selected_lessons, selected_mistakes


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A course directory made by nbgrader generate_assignment from the lesson sources."""
    return grading.make_course(tmp_path_factory.mktemp("course"), selected_lessons())


@pytest.fixture(scope="session")
def graded(course):
    """{(assignment, student): NotebookResult} for every submission of every lesson."""
    out = {}
    for lesson in selected_lessons():
        student_nb = nbformat.read(course / "notebooks" / lesson.assignment / f"{lesson.name}.ipynb", 4)
        solved_nb = nbformat.read(course / "solutions" / lesson.assignment / f"{lesson.name}.ipynb", 4)
        grading.submit(course, "solved", lesson, grading.fill_solutions(student_nb, solved_nb))
        grading.submit(course, "blank", lesson, student_nb)
        for mistake in (m for m in selected_mistakes() if m.lesson == lesson.assignment):
            planted = grading.fill_solutions(student_nb, solved_nb, {mistake.cell: (mistake.old, mistake.new)})
            grading.submit(course, mistake.student, lesson, planted)
        grading.autograde(course, lesson)
        for student, result in grading.results(course, lesson).items():
            out[lesson.assignment, student] = result
    return out

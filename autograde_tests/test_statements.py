"""The points each exercise's statement promises are the points its graded cells give
(coursekit.course.statements). Fast: sources only."""

from __future__ import annotations

import jupytext
import nbformat
import pytest

from coursekit.course.lessons import all_lessons
from coursekit.course.statements import statement_problems

pytestmark = pytest.mark.unit


def test_every_statement_states_the_points_its_cells_give():
    found = [f"{item.assignment}: {p}" for item in all_lessons() for p in statement_problems(item)]
    assert not found, "exercise statements that disagree with the lesson:\n  " + "\n  ".join(found)


def _graded(name: str, points: int, solution: bool = False) -> nbformat.NotebookNode:
    meta = {"grade_id": name, "grade": True, "solution": solution, "points": points}
    return nbformat.v4.new_code_cell("...", metadata={"nbgrader": {**meta, "schema_version": 3}})


def _exercise(name: str) -> nbformat.NotebookNode:
    meta = {"grade_id": name, "grade": False, "solution": True, "schema_version": 3}
    return nbformat.v4.new_code_cell("...", metadata={"nbgrader": meta})


def _lesson(tmp_path, first: str, second: str):
    cells = [
        nbformat.v4.new_markdown_cell(f"# Lesson 1 — Points\n\n{first} Write `f`."),
        _exercise("f"),
        _graded("test_f", 2),
        _graded("test_f_stable", 2),
        nbformat.v4.new_markdown_cell(f"{second} Write `g`, and say why."),
        _exercise("g"),
        _graded("test_g", 3),
        _graded("why_g", 1, solution=True),
    ]
    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True)
    jupytext.write(nbformat.v4.new_notebook(cells=cells), folder / "points.md", fmt="md:myst")
    return all_lessons(tmp_path)[0]


@pytest.mark.parametrize(
    ("first", "second", "found"),
    [
        ("**Exercise 1 (2 + 2 points).**", "**Challenge (4 points: 3 + 1 for why).**", []),
        ("**Exercise 1 (4 points).**", "**Exercise 2 (4 points, 1 for why).**", []),
        (
            "**Exercise 1 (2 points).**",
            "**Challenge (4 points).**",
            ["Exercise 1 states 2 points; its graded cells give 4 (test_f 2, test_f_stable 2)"],
        ),
        (
            "**Exercise 1 (4 points).**",
            "**Exercise 3 (4 points).**",
            ["Exercise 3 is out of order (exercises count 1, 2, 3)"],
        ),
        (
            "Write it.",
            "**Exercise 1 (4 points).**",
            ["exercise `f` comes before any statement '**Exercise N (P points).**'"],
        ),
    ],
)
def test_points_numbers_and_places_are_checked(tmp_path, first, second, found):
    assert statement_problems(_lesson(tmp_path, first, second)) == found

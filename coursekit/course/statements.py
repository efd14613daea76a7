"""The exercises' statements against the graded cells: the points a statement promises are the
points its cells give.

A lesson states each exercise in bold, with its points, before the exercise's cells::

    **Exercise 4 (2 + 2 points).** Write a numerically stable `softmax(x, axis=-1)` ...
    **Exercise 2 (6 points: 2 per wiring).** Write the three functions.
    **Challenge (3 points).** Write `temperature_for_peak(scores, peak)` ...

The graded cells (test cells, and answers a person grades) from one statement up to the next must
carry exactly the points it states; exercises are numbered 1, 2, 3 in order; every exercise's
solution cell comes after a statement. Run by autograde_tests/test_statements.py, from the
sources alone.
"""

from __future__ import annotations

import re

from coursekit.course.cells import grade_id, is_autograded_answer, is_graded, nbgrader_meta
from coursekit.course.lessons import Lesson
from coursekit.course.reading import source_to_notebook

STATEMENT = re.compile(
    r"\*\*(?P<label>Exercise (?P<number>\d+)|Challenge)\s*"
    r"\((?P<points>\d+(?:\s*\+\s*\d+)*) points?\b[^)]*\)\.?\*\*"
)


def statement_problems(item: Lesson) -> list[str]:
    """Each statement whose points differ from its cells', each misnumbered exercise, each
    exercise before any statement."""
    cells = source_to_notebook(item.source).cells
    found, statements = [], []  # statements: (cell index, label, stated points)
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            for match in STATEMENT.finditer(cell.source):
                points = sum(int(p) for p in re.findall(r"\d+", match["points"]))
                statements.append((index, match["label"], points))
                if match["number"] and int(match["number"]) != 1 + sum(
                    label.startswith("Exercise") for _, label, _ in statements[:-1]
                ):
                    found.append(f"{match['label']} is out of order (exercises count 1, 2, 3)")
    ends = [index for index, _, _ in statements[1:]] + [len(cells)]
    for (start, label, stated), end in zip(statements, ends):
        graded = [c for c in cells[start:end] if is_graded(c)]
        given = sum(nbgrader_meta(c).get("points", 0) for c in graded)
        if given != stated:
            names = ", ".join(f"{grade_id(c)} {nbgrader_meta(c).get('points', 0)}" for c in graded)
            found.append(f"{label} states {stated} points; its graded cells give {given} ({names})")
    first = statements[0][0] if statements else len(cells)
    found += [
        f"exercise `{grade_id(c)}` comes before any statement '**Exercise N (P points).**'"
        for c in cells[:first]
        if is_autograded_answer(c)
    ]
    return found

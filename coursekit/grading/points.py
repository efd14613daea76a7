"""The class's points per test cell, for a spreadsheet: reports/<lesson>/points.csv (a row per
student, a column per test cell) and item_statistics.csv (per test cell: its mean, how many got
all or none of its points, and how well it separates the class -- its points' correlation with
the rest of each student's score, the item discrimination of test theory).

A cell's points are those that count: an instructor's manual grade where there is one (a regrade,
coursekit.grading.regrades), else the autograder's. A submission held for review shows what the
tests gave, its status says it is held; submissions that could not be graded are left out.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from coursekit.grading.results import NotebookResult

COUNTED = ("graded", "held")


def cell_points(result: NotebookResult) -> dict[str, float]:
    """{test cell: points that count} of one submission."""
    return {c.grade_id: c.score if c.manual is None else c.manual for c in result.cells}


def write_points(folder: Path, rows: list[NotebookResult]) -> None:
    """points.csv and item_statistics.csv in ``folder`` (see the module's docstring)."""
    counted = [r for r in rows if r.status in COUNTED]
    cells = [c.grade_id for c in counted[0].cells] if counted else []
    maxima = {c.grade_id: c.max_score for c in counted[0].cells} if counted else {}
    table = np.array([[cell_points(r).get(c, 0.0) for c in cells] for r in counted]).reshape(
        len(counted), len(cells)
    )
    with (folder / "points.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["student", "status", *cells, "total", "late_penalty", "score"])
        for r, points in zip(counted, table):
            out.writerow([r.student, r.status, *(f"{p:g}" for p in points),
                          f"{points.sum():g}", f"{r.late_penalty:g}", f"{r.score:g}"])  # fmt: skip
    with (folder / "item_statistics.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["test_cell", "points", "mean", "share_full", "share_zero", "discrimination"])
        for i, cell in enumerate(cells):
            column, rest = table[:, i], table.sum(axis=1) - table[:, i]
            spread = column.std() > 0 and rest.std() > 0
            r = float(np.corrcoef(column, rest)[0, 1]) if spread else None
            out.writerow([cell, f"{maxima[cell]:g}", f"{column.mean():.3f}",
                          f"{np.mean(column == maxima[cell]):.3f}", f"{np.mean(column == 0):.3f}",
                          "" if r is None else f"{r:.3f}"])  # fmt: skip

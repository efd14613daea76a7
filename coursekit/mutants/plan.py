"""What a lesson's mutation run does, worked out from its source alone (nothing runs here).

Each autograded answer is an *exercise*: its mutants, the test cells it reaches (the dataflow
analysis the grading chain uses, coursekit/course/dataflow.py: the tests whose outcome may change
with it, its own and later ones that use it), and the cells a mutant runs through, from the
answer to the last of those tests, without the cells grading skips. Its *graded hash* covers the
answer and those tests: the mutation testing recorded in ``mutants.yml`` is current while it holds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from coursekit.course.cells import grade_id, is_autograded_answer
from coursekit.course.dataflow import LessonFlow
from coursekit.course.skipped import is_skipped
from coursekit.mutants.generate import Mutant, mutants_of

# Raised when what a mutant is, or how it runs, changes: every recorded run is then stale.
VERSION = "3"


@dataclass
class Exercise:
    cell: str  # grade_id of the answer cell
    position: int  # its index among the cells grading runs
    source: str
    tests: list[str]  # the test cells it reaches, in the lesson's order
    segment: list = field(repr=False)  # the cells after it, up to the last of those tests

    @cached_property
    def mutants(self) -> list[Mutant]:
        return mutants_of(self.source, self.cell)

    @property
    def graded(self) -> str:
        """A hash of the answer and of the test cells it reaches (and of this tool's version)."""
        digest = hashlib.sha256(VERSION.encode())
        for text in [self.source, *(c.source for c in self.segment if grade_id(c) in self.tests)]:
            digest.update(b"\0" + text.encode("utf-8"))
        return digest.hexdigest()[:16]


def graded_cells(nb) -> list:
    """The code cells grading runs, in order (the cells it skips left out)."""
    return [c for c in nb.cells if c.get("cell_type") == "code" and not is_skipped(c)]


def exercises(nb, only: set[str] | None = None) -> list[Exercise]:
    """The exercises of a lesson's source notebook (``only``: those answer cells)."""
    flow = LessonFlow(nb)
    cells = graded_cells(nb)
    found = []
    for position, cell in enumerate(cells):
        name = grade_id(cell)
        if not is_autograded_answer(cell) or (only is not None and name not in only):
            continue
        reached = flow.reached_tests(name)
        after = cells[position + 1 :]
        last = max((i for i, c in enumerate(after) if grade_id(c) in reached), default=-1)
        segment = after[: last + 1]
        tests = [grade_id(c) for c in segment if grade_id(c) in reached]
        found.append(Exercise(name, position, cell.source, tests, segment))
    if only is not None and only - {e.cell for e in found}:
        raise SystemExit(f"no autograded answer called {sorted(only - {e.cell for e in found})}")
    return found

"""Planted mistakes: each is a realistic bug, put into one solution cell of a solved lesson.

The chain test hands in the solved lesson with the mistake planted and checks that exactly the
test cells in ``fails`` lose their points: the bug is caught (the tests are not too weak) and
nothing else is lost (the tests are not too strict). Each lesson lists its mistakes in
``mistakes/lessonNN.py`` as ``MISTAKES = [mistake(...), ...]``; this module collects them all.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    lesson: str  # assignment, e.g. "lesson01"
    name: str  # short id, used as the student's name in the gradebook
    cell: str  # grade_id of the solution cell that gets the mistake
    old: str  # text in that cell ...
    new: str  # ... replaced by this
    fails: frozenset[str]  # grade_ids of the test cells that must fail
    why: str = ""

    @property
    def student(self) -> str:
        return f"mistake-{self.lesson}-{self.name}"


def mistake(lesson, name, cell, old, new, fails, why="") -> Mistake:
    return Mistake(lesson, name, cell, old, new, frozenset(fails), why)


def all_mistakes() -> list[Mistake]:
    """Every lesson's planted mistakes, in lesson order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("lesson"):
            found.extend(importlib.import_module(f"{__name__}.{info.name}").MISTAKES)
    return found

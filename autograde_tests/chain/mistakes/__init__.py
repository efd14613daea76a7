"""Planted mistakes: each is a realistic bug, put into one solution cell of a solved lesson.

The chain test hands in the solved lesson with the mistake planted and checks that exactly the
test cells in ``fails`` lose their points: the bug is caught (the tests are not too weak) and
nothing else is lost (the tests are not too strict). Each lesson lists its mistakes in
``mistakes/lessonNN.py`` as ``MISTAKES = [mistake(...), ...]``; this module collects them all.

Every mistake costs a whole notebook execution in nbgrader (~10 s of a core), so each lesson
also names in ``EVERYDAY`` the few that every `make test` grades: the classic bugs of the
lesson, in different cells. `make test-mistakes` (``COURSE_MISTAKES=all``) grades every one,
and CI runs both.
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


def _lesson_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("lesson"):
            yield importlib.import_module(f"{__name__}.{info.name}")


def all_mistakes() -> list[Mistake]:
    """Every lesson's planted mistakes, in lesson order."""
    return [m for module in _lesson_modules() for m in module.MISTAKES]


def everyday_mistakes() -> list[Mistake]:
    """The mistakes each lesson names in ``EVERYDAY``: what every `make test` grades."""
    found = []
    for module in _lesson_modules():
        named = {m.name: m for m in module.MISTAKES}
        unknown = [name for name in module.EVERYDAY if name not in named]
        if unknown:
            raise ValueError(f"{module.__name__}.EVERYDAY names no planted mistake: {unknown}")
        found.extend(named[name] for name in module.EVERYDAY)
    return found

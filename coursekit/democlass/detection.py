"""How well the similarity report finds copies it was never shown, and how often it flags honest
work: both rates, measured on every lesson with the report's own code.

* **Disguised copies** (coursekit.democlass.disguises): each lesson's solved answers, copied with
  each disguise and as half copies. A copy is *found* when the report on the original and the
  copy flags the pair.
* **Honest pairs**: notebooks of the course's independently written correct answers
  (solutions/*/alternatives.yml, with each lesson's solution), every pair of them in a lesson.
  One is *flagged* when the report flags it: a false accusation to read and dismiss.

``make grade-class`` prints both (python -m coursekit.democlass), autograde_tests/
test_similarity.py holds them to the course's goals, and book/grading.md quotes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import nbformat

from coursekit.course.lessons import all_lessons
from coursekit.course.mistakes import fill_solutions, read_alternatives
from coursekit.course.sources import source_to_notebook
from coursekit.democlass.disguises import DISGUISES, _solutions, disguised_copies, honest_notebooks
from coursekit.grading.similarity import Settings, similarity_of

HALVES = ("half-blank", "half-alternative")


@dataclass(frozen=True)
class Trial:
    lesson: str
    how: str  # a disguise, or "honest"
    first: str
    second: str
    score: float  # the whole answers'
    alike: tuple[tuple[str, float], ...]  # the exercises alike
    flagged: bool

    def __str__(self) -> str:
        alike = ", ".join(f"{n} {s:.2f}" for n, s in self.alike)
        return (f"{self.lesson} {self.how} {self.first}~{self.second}: {self.score:.2f}"
                + (f" (alike: {alike})" if alike else ""))  # fmt: skip


@dataclass
class Detection:
    copies: list[Trial] = field(default_factory=list)
    honest: list[Trial] = field(default_factory=list)

    def found(self, how: str | None = None) -> tuple[int, int]:
        trials = [t for t in self.copies if how is None or t.how == how]
        return sum(t.flagged for t in trials), len(trials)

    def lines(self) -> list[str]:
        found, made = self.found()
        flagged = [t for t in self.honest if t.flagged]
        rate = f"{100 * found / made:.0f} %" if made else "-"
        lines = [
            f"disguised copies found: {found} of {made} ({rate}), every lesson, disguises the "
            "course's own tests never planted:"
        ]
        for how in (*DISGUISES, *HALVES):
            one, all_ = self.found(how)
            if all_:
                missed = [t.lesson for t in self.copies if t.how == how and not t.flagged]
                lines.append(f"  {how}: {one} of {all_}" + (f" (missed: {', '.join(missed)})"
                                                           if missed else ""))  # fmt: skip
        lines.append(
            f"honest pairs flagged: {len(flagged)} of {len(self.honest)} (the course's "
            "independently written correct answers, alternatives.yml, notebook by notebook)"
        )
        worst = max(self.honest, key=lambda t: max([t.score, *(s for _, s in t.alike)]),
                    default=None)  # fmt: skip
        if worst is not None:
            lines.append(f"  the likest honest pair: {worst}")
        return lines + [f"  FLAGGED: {t}" for t in flagged]


def _trial(lesson: str, how: str, names, answered, stubs, settings: Settings) -> Trial:
    report = similarity_of(answered, stubs, settings)
    pair = next((p for p in report.pairs if {p.first, p.second} == set(names)), None)
    if pair is None:  # one of them holds nothing but released code
        return Trial(lesson, how, *names, 0.0, (), False)
    return Trial(lesson, how, pair.first, pair.second, pair.score, pair.alike,
                 report.is_flagged(pair))  # fmt: skip


def measure(lessons=None, settings: Settings | None = None) -> Detection:
    """Both rates on ``lessons`` (default: all) at ``settings`` (default: the report's)."""
    found, settings = Detection(), settings or Settings()
    for item in lessons or all_lessons():
        released = nbformat.read(item.student_notebook, 4)
        solved = fill_solutions(released, source_to_notebook(item.source))
        alternatives = read_alternatives(item.source.parent)
        original, stubs = _solutions(solved), _solutions(released)
        for how, copy in disguised_copies(solved, released, alternatives).items():
            answered = {"original": original, "copy": copy}
            found.copies.append(
                _trial(item.assignment, how, ("copy", "original"), answered, stubs, settings)
            )
        honest = honest_notebooks(solved, released, alternatives)
        for one, other in combinations(sorted(honest), 2):
            answered = {one: honest[one], other: honest[other]}
            found.honest.append(
                _trial(item.assignment, "honest", (one, other), answered, stubs, settings)
            )
    return found

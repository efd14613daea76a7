"""How well the similarity report finds copies it was never shown, and how often it flags honest
work: both rates, measured on every lesson with the report's own code.

* **Disguised copies** (coursekit.democlass.disguises): each lesson's solved answers, copied with
  each disguise and as half copies. A copy is *found* when the report on the original and the
  copy flags the pair.
* **Honest pairs**: notebooks of the course's independently written correct answers
  (solutions/*/alternatives.yml, with each lesson's solution), every pair of them in a lesson.
  One is *flagged* when the report flags it: a false accusation to read and dismiss.
* **Written by hand** (coursekit/democlass/handwritten/<lesson>.yml): copies an engineer who had
  read neither the report's code nor the disguises above disguised by hand, and a whole notebook
  that engineer answered blind from the exercise texts: its pairs with the solution and with
  each copy it has no part in are honest pairs. (The course's alternatives were written to
  differ; an honest learner writes the short exercises as the solution does.)

``make grade-class`` prints both (python -m coursekit.democlass), autograde_tests/
test_similarity.py holds them to the course's goals, and book/grading.md quotes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import nbformat
import yaml

from coursekit.course.lessons import all_lessons
from coursekit.course.mistakes import fill_solutions, read_alternatives
from coursekit.course.reading import source_to_notebook
from coursekit.democlass.disguises import DISGUISES, _solutions, disguised_copies, honest_notebooks
from coursekit.grading.similarity import Settings, similarity_of

HALVES = ("half-blank", "half-alternative")
HANDWRITTEN = Path(__file__).parent / "handwritten"  # <lesson>.yml: copies and an honest answer
BY_HAND = "by hand"  # the Trial.how of the hand-written copies and honest pairs begins so


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
    by_hand: list[Trial] = field(default_factory=list)  # hand-written copies
    honest_by_hand: list[Trial] = field(default_factory=list)  # ... and honest pairs

    def found(self, how: str | None = None) -> tuple[int, int]:
        trials = [t for t in self.copies if how is None or t.how == how]
        return sum(t.flagged for t in trials), len(trials)

    def hand_lines(self) -> list[str]:
        if not self.by_hand:
            return []
        found = [t for t in self.by_hand if t.flagged]
        flagged = [t for t in self.honest_by_hand if t.flagged]
        lessons = sorted({t.lesson for t in self.by_hand})
        missed = [f"{t.lesson} {t.first} {t.score:.2f}" for t in self.by_hand if not t.flagged]
        return [
            f"copies disguised by hand found: {len(found)} of {len(self.by_hand)} "
            f"({', '.join(lessons)}; coursekit/democlass/handwritten/)",
            *([f"  missed: {', '.join(missed)}"] if missed else []),
            f"honest pairs written blind flagged: {len(flagged)} of {len(self.honest_by_hand)} "
            "(a notebook answered from the exercise texts, with the solution and the copies)",
            *(f"  FLAGGED: {t}" for t in flagged),
        ]

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
        return lines + [f"  FLAGGED: {t}" for t in flagged] + self.hand_lines()


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
        _by_hand(found, item.assignment, original, stubs, settings)
    return found


def handwritten(lesson: str) -> dict:
    """``{"copies": [...], "honest": [...]}`` of coursekit/democlass/handwritten/<lesson>.yml
    (each entry a ``name``, its ``cells`` ({exercise: code}) and, for a copy, ``how`` and
    whether it ``has_honest`` code); empty lists without one."""
    path = HANDWRITTEN / f"{lesson}.yml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    return {"copies": data.get("copies", []), "honest": data.get("honest", [])}


def _by_hand(found: Detection, lesson: str, original, stubs, settings: Settings) -> None:
    """The hand-written copies of ``lesson`` with the solution, and its honest notebooks with
    the solution and with each copy that holds none of their code."""
    written = handwritten(lesson)
    notebooks = {e["name"]: stubs | e["cells"] for e in written["copies"] + written["honest"]}
    for entry in written["copies"]:
        answered = {"solution": original, entry["name"]: notebooks[entry["name"]]}
        how = f"{BY_HAND} {entry['name']}"
        found.by_hand.append(_trial(lesson, how, (entry["name"], "solution"), answered, stubs,
                                    settings))  # fmt: skip
    others = ["solution", *(e["name"] for e in written["copies"] if not e.get("has_honest"))]
    for entry in written["honest"]:
        for other in others:
            answered = {entry["name"]: notebooks[entry["name"]],
                        other: original if other == "solution" else notebooks[other]}  # fmt: skip
            found.honest_by_hand.append(
                _trial(
                    lesson, f"{BY_HAND} honest", (entry["name"], other), answered, stubs, settings
                )
            )

"""Build a synthetic class of any size for one lesson, and grade it as a real class would be.

    python -m coursekit.democlass lesson01 --students 100    # make grade-class

40 % hand in the solved lesson, 10 % the student edition as released, 30 % the solved lesson
with one of the lesson's planted mistakes, 20 % one of the broken or hostile kinds of
:mod:`coursekit.democlass.badsubmissions`. The class is graded by production class grading
(:mod:`coursekit.grading.classgrade`) in a temporary course, and the table and the throughput
are printed.
"""

from __future__ import annotations

import random
from pathlib import Path

import nbformat

from coursekit.course.lessons import Lesson
from coursekit.course.mistakes import lesson_mistakes, plant
from coursekit.democlass import badsubmissions
from coursekit.grading import tempcourse

SHARES = {"solved": 0.4, "blank": 0.1, "mistake": 0.3}  # the rest: broken or hostile


def _plan(size: int, seed: int, with_mistakes: bool) -> list[str]:
    """What each of ``size`` students hands in, in a shuffled order."""
    counts = dict(SHARES, mistake=SHARES["mistake"] if with_mistakes else 0.0)
    counts["bad"] = 1.0 - sum(counts.values())
    order = []
    for what, share in counts.items():
        order += [what] * round(share * size)
    order = (order + ["solved"] * size)[:size]
    random.Random(seed).shuffle(order)
    return order


def build_synthetic(course: Path, lesson: Lesson, size: int, seed: int = 0) -> dict[str, str]:
    """A course in ``course`` with ``size`` submissions of ``lesson`` (see the module's
    docstring). Returns {student: what they handed in}."""
    mistakes = lesson_mistakes(lesson.assignment, lesson.root)
    tempcourse.make_course(course, [lesson], root=lesson.root)
    stuff = badsubmissions.materials(
        course, lesson, mistakes, badsubmissions.other_lesson_notebook(lesson)
    )
    solved_source = nbformat.read(
        course / "solutions" / lesson.assignment / f"{lesson.name}.ipynb", 4
    )
    kinds = list(badsubmissions.KINDS)
    random.Random(seed).shuffle(kinds)
    plan, seen = {}, {"mistake": 0, "bad": 0}  # each kind of mistake and of bad submission in turn
    for i, what in enumerate(_plan(size, seed, bool(mistakes))):
        turn = seen.get(what, 0)
        if what in seen:
            seen[what] += 1
        if what == "mistake":
            m = mistakes[turn % len(mistakes)]
            name, sub = (
                f"s{i + 1:03d}-mistake-{m.name}",
                badsubmissions.Submission(plant(stuff.student, solved_source, m)),
            )
        elif what == "bad":
            k = kinds[turn % len(kinds)]
            name, sub = f"s{i + 1:03d}-bad-{k.name}", k.build(stuff)
        else:
            name = f"s{i + 1:03d}-{what}"
            sub = badsubmissions.Submission(stuff.solved if what == "solved" else stuff.student)
        badsubmissions.write(course / "submitted" / name / lesson.assignment, lesson, sub)
        plan[name] = what
    return plan

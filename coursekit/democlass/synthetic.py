"""Build a synthetic class of any size for one lesson, and grade it as a real class would be.

    python -m coursekit.democlass lesson01 --students 100    # make grade-class

35 % hand in the solved lesson, 10 % the student edition as released, 30 % the solved lesson
with one of the lesson's planted mistakes, 20 % one of the broken or hostile kinds of
:mod:`coursekit.democlass.badsubmissions`, and 5 % a classmate's notebook, disguised
(:mod:`coursekit.democlass.copies`: renamed variables, reordered functions, changed comments).
The class is graded by production class grading (:mod:`coursekit.grading.classgrade`) in a
temporary course, and the table, the throughput, what the class got wrong and the similarity
report's findings are printed.
"""

from __future__ import annotations

import random
from pathlib import Path

import nbformat

from coursekit.course.lessons import Lesson
from coursekit.course.mistakes import lesson_mistakes, plant
from coursekit.democlass import badsubmissions
from coursekit.democlass import copies as copies_module
from coursekit.grading import tempcourse

SHARES = {"solved": 0.35, "blank": 0.1, "mistake": 0.3, "copy": 0.05}  # the rest: bad


def _plan(size: int, seed: int, with_mistakes: bool) -> list[str]:
    """What each of ``size`` students hands in, in a shuffled order."""
    counts = dict(SHARES, mistake=SHARES["mistake"] if with_mistakes else 0.0)
    counts["copy"] = max(counts["copy"], 1.0 / size) if size >= 10 else 0.0  # one at least
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
    handed: dict[str, badsubmissions.Submission] = {}
    order = _plan(size, seed, bool(mistakes))
    copies = [i for i, what in enumerate(order) if what == "copy"]
    for i, what in enumerate(order):
        if what == "copy":
            continue  # copied once the originals exist
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
        plan[name], handed[name] = what, sub
    originals = [n for n, w in plan.items() if w == "mistake"] + [
        n for n, w in plan.items() if w == "solved"
    ]  # a mistake's code is its author's own; then the solved ones
    for turn, i in enumerate(copies):
        source = originals[turn % len(originals)]
        name = copies_module.copy_name(i + 1, source)
        sub = badsubmissions.Submission(copies_module.copy_of(handed[source].notebook))
        badsubmissions.write(course / "submitted" / name / lesson.assignment, lesson, sub)
        plan[name] = "copy"
    return plan

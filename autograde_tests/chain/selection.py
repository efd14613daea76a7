"""Which lessons the chain tests grade: all, or those named in COURSE_LESSONS.

    COURSE_LESSONS=lesson02,lesson03 pytest autograde_tests/chain   # while writing a lesson

and which planted mistakes: each lesson's EVERYDAY ones, or all with COURSE_MISTAKES=all
(`make test-mistakes`), which also grades every lesson's alternative correct answers
(alternatives.yml: each must get full marks, several to a notebook), or none with
COURSE_MISTAKES=none, or the alternative answers only with COURSE_MISTAKES=alternatives.

Several planted mistakes share a notebook where no test cell can tell them apart: each notebook
costs a kernel that imports torch and runs the whole lesson, and most mistakes reach only their
own exercise's tests (:func:`packed_mistakes`).
"""

from __future__ import annotations

import functools
import os
import warnings

from coursekit.course.dataflow import LessonFlow
from coursekit.course.lessons import all_lessons, missing_requirement
from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.mistakes import all_alternatives, all_mistakes, everyday_mistakes
from coursekit.course.reading import source_to_notebook


def selected_lessons():
    wanted = {
        name.strip() for name in os.environ.get("COURSE_LESSONS", "").split(",") if name.strip()
    }
    return [
        item
        for item in all_lessons()
        if (not wanted or item.assignment in wanted) and not missing_requirement(item.assignment)
    ]


def unrunnable_lessons() -> dict[str, str]:
    """{assignment: why} for the wanted lessons this machine cannot run (Triton off Linux)."""
    wanted = {
        name.strip() for name in os.environ.get("COURSE_LESSONS", "").split(",") if name.strip()
    }
    found = {item.assignment: missing_requirement(item.assignment) for item in all_lessons()}
    return {a: why for a, why in found.items() if why and (not wanted or a in wanted)}


def mistakes_wanted() -> str:
    """COURSE_MISTAKES, lower case: "all", "none", or "" (each lesson's everyday ones)."""
    return os.environ.get("COURSE_MISTAKES", "").strip().lower()


def selected_mistakes():
    """COURSE_MISTAKES=all: every one and every alternative answer; =none: none (the fastest loop
    while writing a lesson: the solved lesson and the student edition only); =alternatives: the
    alternative answers only; else the everyday."""
    names = {item.assignment for item in selected_lessons()}
    pools = {
        "none": list,
        "all": lambda: all_mistakes() + all_alternatives(),
        "alternatives": all_alternatives,
    }
    pool = pools.get(mistakes_wanted(), everyday_mistakes)()
    return [m for m in pool if m.lesson in names]


def handed_in_together(alternatives) -> dict[str, list]:
    """{student: alternatives}: a lesson's alternative answers put into as few notebooks as can
    hold them, never two answers to the same exercise in one, so that each notebook is graded
    once. Each must get full marks: every test of every exercise then passed with the answers
    written another way, each one checked by its own exercise's tests beside the others (a test
    that failed a correct answer because another exercise was answered differently would be a
    wrong test, and shows here too)."""
    notebooks: list[list] = []
    for answer in alternatives:
        free = next((n for n in notebooks if answer.cell not in {a.cell for a in n}), None)
        if free is None:
            notebooks.append(free := [])
        free.append(answer)
    return {f"alternatives-{n[0].lesson}-{i + 1}": n for i, n in enumerate(notebooks)}


@functools.cache
def _flow(assignment: str) -> LessonFlow:
    return LessonFlow(source_to_notebook(find_lesson(assignment).source))


@functools.cache
def reached_by(mistake) -> frozenset[str]:
    """The test cells the answer ``mistake`` is planted in reaches, written either way
    (coursekit.course.dataflow)."""
    flow = _flow(mistake.lesson)
    planted = flow.sources[mistake.cell].replace(mistake.old, mistake.new)
    return frozenset(flow.reached_tests(mistake.cell, (planted,)))


def reach(mistake) -> frozenset[str]:
    """The test cells ``mistake`` can change: those its answer reaches, and those it is meant to
    fail."""
    return reached_by(mistake) | mistake.fails


def packed_mistakes(mistakes) -> dict[str, list]:
    """{student: mistakes}: one lesson's planted mistakes in as few notebooks as keep them apart.
    Two share a notebook only if they are in different answers and no test cell is within reach
    of both: each then loses in it exactly what it would lose alone, and the notebook loses the
    union. Where that fails (the analysis cannot see everything an answer changes), the chain
    grades the notebook's mistakes one by one (``GradedLessons.alone``). The widest-reaching are
    placed first; a notebook of one mistake is handed in as that mistake's own student."""
    return _packed(tuple(mistakes))


@functools.cache
def _packed(mistakes: tuple) -> dict[str, list]:
    reaches = {m: reach(m) for m in mistakes}
    notebooks: list[list] = []
    for mistake in sorted(mistakes, key=lambda m: -len(reaches[m])):  # stable: the file's order
        apart = lambda n: all(  # noqa: E731
            m.cell != mistake.cell and reaches[m].isdisjoint(reaches[mistake]) for m in n
        )
        free = next((n for n in notebooks if apart(n)), None)
        if free is None:
            notebooks.append(free := [])
        free.append(mistake)
    return {
        n[0].student if len(n) == 1 else f"mistakes-{n[0].lesson}-{i + 1}": n
        for i, n in enumerate(notebooks)
    }


def handed_in_with(mistake) -> tuple[str, list]:
    """(student, the mistakes or answers in the same notebook as ``mistake``)."""
    kind = mistake.kind == "alternative"
    same_lesson = [
        m
        for m in selected_mistakes()
        if m.lesson == mistake.lesson and (m.kind == "alternative") == kind
    ]
    pack = handed_in_together if mistake.kind == "alternative" else packed_mistakes
    return next((s, n) for s, n in pack(same_lesson).items() if mistake in n)


def judged(graded, mistake) -> tuple[str, object, frozenset[str]]:
    """(student, NotebookResult, the cells it must fail) by which ``mistake`` is judged: the
    notebook it shares, which must fail the union of its mistakes' cells; where it does not, the
    mistake graded on its own (``graded.alone``), with a warning: the packing missed how the
    mistakes of that notebook meet."""
    lesson = find_lesson(mistake.lesson)
    student, together = handed_in_with(mistake)
    result = graded.results(lesson)[student]
    expected = frozenset().union(*(m.fails for m in together))
    if result.failed == expected or len(together) == 1:
        return student, result, expected
    warnings.warn(
        f"{student} ({', '.join(m.name for m in together)}) failed {sorted(result.failed)}, "
        f"not the union of its mistakes' cells {sorted(expected)}: {mistake.name} is graded on "
        "its own (coursekit/course/dataflow.py missed how these mistakes meet)",
        stacklevel=2,
    )
    return mistake.student, graded.alone(lesson, mistake), mistake.fails

"""Which lessons the chain tests grade: all, or those named in COURSE_LESSONS.

    COURSE_LESSONS=lesson02,lesson03 pytest autograde_tests/chain   # while writing a lesson

and which planted mistakes: each lesson's EVERYDAY ones, or all with COURSE_MISTAKES=all
(`make test-mistakes`), which also grades every lesson's alternative correct answers
(alternatives.yml: each must get full marks, several to a notebook), or none with
COURSE_MISTAKES=none, or the alternative answers only with COURSE_MISTAKES=alternatives.
"""

from __future__ import annotations

import os

from coursekit.course.lessons import all_lessons, missing_requirement
from coursekit.course.mistakes import all_alternatives, all_mistakes, everyday_mistakes


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


def student_of(mistake) -> str:
    """Who hands ``mistake`` in: its own student, or the notebook of answers it shares."""
    if mistake.kind != "alternative":
        return mistake.student
    same_lesson = [
        m for m in selected_mistakes() if m.kind == "alternative" and m.lesson == mistake.lesson
    ]
    return next(s for s, answers in handed_in_together(same_lesson).items() if mistake in answers)

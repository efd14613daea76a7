"""Which lessons the chain tests grade: all, or those named in COURSE_LESSONS.

    COURSE_LESSONS=lesson02,lesson03 pytest autograde_tests/chain   # while writing a lesson

and which planted mistakes: each lesson's EVERYDAY ones, or all with COURSE_MISTAKES=all
(`make test-mistakes`), which also grades every lesson's alternative correct answers
(alternatives.yml: each must get full marks), or none with COURSE_MISTAKES=none.
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
    while writing a lesson: the solved lesson and the student edition only); else the everyday."""
    names = {item.assignment for item in selected_lessons()}
    if mistakes_wanted() == "none":
        return []
    pool = (
        all_mistakes() + all_alternatives() if mistakes_wanted() == "all" else everyday_mistakes()
    )
    return [m for m in pool if m.lesson in names]

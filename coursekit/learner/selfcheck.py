"""``make check [LESSON=lesson01]``: grade your own copy of the lessons, hidden tests included.

Your notebook in work/ is handed in to a temporary copy of the course and graded by nbgrader
exactly as an instructor would grade it. The table shows each graded test cell, its points and,
for a failed one, the message it raised -- never the hidden tests' code. Your file is read,
not changed.
"""

from __future__ import annotations

import functools
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat

from coursekit.course.lessons import ROOT, all_lessons, lesson
from coursekit.grading import tempcourse as grading
from coursekit.grading.results import NotebookResult, read_results
from coursekit.learner.workspace import WORK

STUDENT = "you"


def check(assignment: str, root: Path = ROOT) -> NotebookResult | None:
    item = lesson(assignment, root)
    mine = root / WORK / item.assignment / f"{item.name}.ipynb"
    if not mine.exists():
        print(
            f"{item.assignment}: no copy of yours at {mine.relative_to(root)} yet; `make lab` "
            "makes one."
        )
        return None
    say = functools.partial(print, file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="selfcheck-") as tmp:
        say(f"{item.assignment}: setting up a private nbgrader course ...")
        course = grading.make_course(Path(tmp), [item], root=root)
        grading.submit(course, STUDENT, item, nbformat.read(mine, as_version=4))
        say(
            f"{item.assignment}: grading {mine.relative_to(root)} (runs the whole notebook, ~10 s) "
            "..."
        )
        grading.autograde(course, item)
        return read_results(course, item, [STUDENT]).get(STUDENT)


def report(result: NotebookResult) -> str:
    width = max(len(c.grade_id) for c in result.cells) + 2
    lines = [
        f"{result.lesson.assignment} ({result.lesson.name})",
        f"  {'test cell':<{width}}{'points':>9}  result",
    ]
    for cell in result.cells:
        verdict = "passed" if cell.passed else "FAILED"
        lines.append(f"  {cell.grade_id:<{width}}{cell.score:>4g} / {cell.max_score:<3g} {verdict}")
        if not cell.passed:
            message = cell.message or "(no message)"
            lines += [
                textwrap.indent(part, " " * (width + 16)) for part in message.splitlines()[:6]
            ]
    lines.append(f"  {'total':<{width}}{result.auto:>4g} / {result.max_score:<3g}")
    if result.errors:
        lines.append(
            f"  ({len(result.errors)} other cell(s) raised errors, e.g. {result.errors[0][:100]})"
        )
    if result.held:
        lines.append(
            "  An instructor's autograder would hold these points until someone reviews the "
            "notebook:"
        )
    elif result.findings:
        lines.append("  Notes from the autograder:")
    lines += [f"    {str(finding)[:160]}" for finding in result.findings[:8]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    for name in argv or [item.assignment for item in all_lessons()]:
        result = check(name)
        if result is not None:
            print(report(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Generate the student edition of lessons into notebooks/ with stock nbgrader.

``python -m coursekit.publishing.release [lesson01 ...]`` (all lessons when none is named). The
learner's own copies live in work/ and are never touched here. Each lesson's hint table
(solutions/attention_ref/hints/<lesson>.json, coursekit/course/hints.py) is written with it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from coursekit.course import hints, skipped
from coursekit.course.lessons import ROOT, Lesson, all_lessons, lesson
from coursekit.course.nbgrader_cli import nbgrader
from coursekit.course.sources import sync_sources


def release(assignment: str, root: Path = ROOT) -> None:
    """nbgrader generate_assignment: strip solutions and hidden tests, clear outputs."""
    result = nbgrader("generate_assignment", assignment, "--force", "--no-db", root=root)
    if result.returncode != 0:
        raise SystemExit(f"nbgrader generate_assignment {assignment} failed:\n{result.stderr}")


def refuse_bad_skips(item: Lesson) -> None:
    """Stop at a lesson whose cells skipped when grading something later depends on."""
    found = skipped.problems(nbformat.read(item.source_notebook, as_version=4))
    if found:
        raise SystemExit(
            f"{item.source.relative_to(item.root)}: a cell skipped when grading ({skipped.TAG}) "
            "must be one no later cell depends on:\n  " + "\n  ".join(found)
        )


def main(argv: list[str]) -> None:
    sync_sources()
    names = argv or [item.assignment for item in all_lessons()]
    for name in names:
        item = lesson(name)
        refuse_bad_skips(item)
        release(item.assignment)
        # the hints the student edition's test cells no longer show, for the kernel to find
        table = hints.write_table(item)
        print(f"wrote {item.student_notebook.relative_to(ROOT)} and {table.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])

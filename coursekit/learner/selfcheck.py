"""``make check [LESSON=lesson01]``: grade your own copy of the lessons, hidden tests included.

Your notebook in work/ is handed in to a private copy of the course and graded by nbgrader
exactly as an instructor would grade it. The copy (build/selfcheck/<lesson>/) is made on the
first check of a lesson and kept until the lesson, the course's nbgrader configuration, nbgrader
or coursekit changes: making it (nbgrader generate_assignment and a new gradebook) is nearly half
of a check's time, so a learner checking again and again waits only for the grading.

The table shows each graded test cell, its points and, for a failed one, the message it
raised -- never the hidden tests' code. Your file is read, not changed.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import functools
import hashlib
import importlib.metadata
import os
import shutil
import sys
import textwrap
from pathlib import Path

import nbformat

from coursekit.course.lessons import ROOT, Lesson, all_lessons, lesson
from coursekit.grading import bwrap
from coursekit.grading import tempcourse as grading
from coursekit.grading.results import NotebookResult, read_results
from coursekit.learner.workspace import WORK

STUDENT = "you"
COURSES = Path("build") / "selfcheck"  # under the course's root: one private course per lesson
CODE = Path(__file__).resolve().parents[1]  # coursekit/: its preprocessors shape the release


def check(
    assignment: str, root: Path = ROOT, options: tuple[str, ...] = ()
) -> NotebookResult | None:
    """Grade the learner's copy of ``assignment``; ``options`` are more nbgrader flags."""
    item = lesson(assignment, root)
    mine = root / WORK / item.assignment / f"{item.name}.ipynb"
    if not mine.exists():
        print(
            f"{item.assignment}: no copy of yours at {mine.relative_to(root)} yet; `make lab` "
            "makes one."
        )
        return None
    say = functools.partial(print, file=sys.stderr, flush=True)
    folder = root / COURSES / item.assignment
    folder.parent.mkdir(parents=True, exist_ok=True)
    # One check of a lesson at a time: a second `make check` waits rather than grading into
    # the same gradebook or rebuilding the course under the first.
    with open(folder.parent / f"{item.assignment}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        course = _private_course(folder, item, root, say)
        grading.submit(course, STUDENT, item, nbformat.read(mine, as_version=4))
        say(
            f"{item.assignment}: grading {mine.relative_to(root)} (runs the whole notebook, ~10 s) "
            "..."
        )
        grading.autograde(course, item, *_sandbox_flags(), *options)
        return read_results(course, item, [STUDENT]).get(STUDENT)


def _private_course(folder: Path, item: Lesson, root: Path, say) -> Path:
    """The lesson's course in ``folder``, made afresh when what its release is generated from has
    changed since it was made (or it was never finished: the stamp is written last)."""
    stamp = folder / ".made-from"
    wanted = _release_inputs(item, root)
    if stamp.exists() and stamp.read_text() == wanted:
        return folder
    say(
        f"{item.assignment}: setting up a private nbgrader course in {folder.relative_to(root)} ..."
    )
    shutil.rmtree(folder, ignore_errors=True)
    course = grading.make_course(folder, [item], root=root)
    stamp.write_text(wanted)
    return course


def _release_inputs(item: Lesson, root: Path) -> str:
    """A digest of everything `nbgrader generate_assignment` makes the lesson's release from: its
    source, the course's nbgrader_config.py, nbgrader's version and coursekit's code."""
    digest = hashlib.sha256(importlib.metadata.version("nbgrader").encode())
    for path in [item.source, root / "nbgrader_config.py", *sorted(CODE.rglob("*.py"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _sandbox_flags() -> tuple[str, ...]:
    """Bubblewrap, as an instructor grades; where it cannot run (a laptop without it, not Linux)
    the Python-only sandbox, with a one-line notice (once): you are grading your own code."""
    reason = bwrap.unavailable()
    if reason is None:
        return ()
    print(f"note: grading in the Python-only sandbox ({reason})", file=sys.stderr, flush=True)
    return (bwrap.PYTHON_ONLY_FLAG,)


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
    if result.sandbox:
        lines.append(f"  (graded in {result.sandbox})")
    return "\n".join(lines)


def main(argv: list[str], root: Path = ROOT) -> int:
    """Check the lessons named (all without names), as many side by side as there are cores, each
    in its own private course, and print their reports in course order."""
    names = argv or [item.assignment for item in all_lessons(root)]
    # `make check` at once on every lesson: one kernel per core, each with one thread (two
    # kernels with two torch threads each on two cores wait on each other at every product).
    side_by_side = max(1, min(len(names), os.cpu_count() or 1))  # as cluster.py counts them
    options = ("--SandboxKernelManager.threads=1",) if side_by_side > 1 else ()
    _sandbox_flags()  # its notice (if any) once, before the checks start
    with concurrent.futures.ThreadPoolExecutor(side_by_side) as pool:
        checks = [pool.submit(check, name, root, options) for name in names]
        for done in checks:  # in course order, each as soon as it and those before it are done
            result = done.result()
            if result is not None:
                print(report(result) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``make check [LESSON=lesson01]``: grade your own copy of the lessons, hidden tests included.

Your notebook in work/ is handed in to a private copy of the course and graded by nbgrader
exactly as an instructor would grade it. The copy (build/selfcheck/<lesson>/) is made on the
first check of a lesson and kept until the lesson, the course's nbgrader configuration, nbgrader
or coursekit changes: making it (nbgrader generate_assignment and a new gradebook) is nearly half
of a check's time, so a learner checking again and again waits only for the grading.

The table shows each graded test cell, its points and, for a failed one, the message it
raised -- never the hidden tests' code -- and whether a hidden test found it; a lesson with no
answer written yet is "not started" and not graded; a summary of every lesson ends the output
(coursekit/learner/summary.py). Your file is read, not changed.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import nbformat

from coursekit.course.lessons import ROOT, Lesson, all_lessons, lesson
from coursekit.grading import bwrap
from coursekit.grading import tempcourse as grading
from coursekit.grading.results import NotebookResult, read_results
from coursekit.learner import summary
from coursekit.learner.summary import LessonCheck
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
        started = time.monotonic()
        course = _private_course(folder, item, root, say)
        grading.submit(course, STUDENT, item, nbformat.read(mine, as_version=4))
        took, where = _last_time(root, item), mine.relative_to(root)
        say(f"{item.assignment}: grading {where} (runs the whole notebook{took}) ...")
        graded = time.monotonic()
        grading.autograde(course, item, *_sandbox_flags(), *options)
        _record_time(root, item, graded - started, time.monotonic() - graded)
        say(f"{item.assignment}: graded in {time.monotonic() - started:.0f} s")
        return read_results(course, item, [STUDENT]).get(STUDENT)


TIMES = COURSES / "times.json"  # how long each lesson's last check took: the next one's estimate
_times_lock = threading.Lock()


def _last_time(root: Path, item: Lesson) -> str:
    found = _read_times(root).get(item.assignment)
    return f"; {found['grade']:.0f} s last time" if found else ""


def _read_times(root: Path) -> dict:
    try:
        return json.loads((root / TIMES).read_text())
    except (OSError, ValueError):
        return {}


def _record_time(root: Path, item: Lesson, setup: float, grade: float) -> None:
    with _times_lock:
        times = _read_times(root)
        times[item.assignment] = {"setup": round(setup, 1), "grade": round(grade, 1)}
        (root / TIMES).write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")


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
    print(
        f"note: your notebook is graded without the operating system's sandbox an instructor "
        f"uses ({reason}); the points are the same",
        file=sys.stderr,
        flush=True,
    )
    return (bwrap.PYTHON_ONLY_FLAG,)


SAVE_FIRST = (
    "make check grades your notebooks in work/ as they are saved on disk: save them first "
    "(Ctrl+S in JupyterLab)."
)


def examine(assignment: str, root: Path = ROOT) -> LessonCheck:
    """The lesson as the learner left it: not started (nothing written into an answer cell: it
    is not graded), no copy yet, or to be graded."""
    item = lesson(assignment, root)
    edition = nbformat.read(item.student_notebook, as_version=4)
    found = LessonCheck(item, summary.points(edition), state="graded")
    mine = root / WORK / item.assignment / f"{item.name}.ipynb"
    if not mine.exists():
        found.state = "no copy"
    elif not summary.started(nbformat.read(mine, as_version=4), edition):
        found.state = "not started"
    return found


def grade(found: LessonCheck, root: Path, options: tuple[str, ...]) -> LessonCheck:
    """Grade a lesson ``examine`` found started, and read what its graded notebook says."""
    found.result = check(found.lesson.assignment, root, options)
    if found.result is not None:
        graded = found.lesson.in_course(root / COURSES / found.lesson.assignment)
        path = graded.autograded(STUDENT)
        if path.exists():
            summary.read_graded(found, nbformat.read(path, as_version=4))
    return found


def report(result: NotebookResult, root: Path = ROOT) -> str:
    """The table of one graded lesson (``check``'s result)."""
    found = LessonCheck(result.lesson, result.max_score, result)
    path = result.lesson.in_course(root / COURSES / result.lesson.assignment).autograded(STUDENT)
    if path.exists():
        summary.read_graded(found, nbformat.read(path, as_version=4))
    return summary.lesson_table(found)


def _skipped(found: LessonCheck) -> str:
    where = f"{WORK}/{found.lesson.assignment}/{found.lesson.name}.ipynb"
    if found.state == "no copy":
        return f"{found.lesson.assignment}: no copy of yours at {where} yet (`make lab` makes one)"
    return f"{found.lesson.assignment}: not started (no answer written in {where}): not graded"


def _estimate(started: list[LessonCheck], side_by_side: int, root: Path) -> str:
    """How long the checks will take, from how long each lesson's last check took here (a first
    check of a lesson has no record: it also sets up the lesson's course)."""
    times = _read_times(root)
    known = [times.get(f.lesson.assignment, {}).get("grade") for f in started]
    what = (
        f"{len(started)} lesson{'s' if len(started) > 1 else ''} to grade, {side_by_side} at a time"
    )
    if None in known:
        return f"{what}; a first check of a lesson also sets up its course."
    # side by side, the checks share the cores: no sooner than the longest one alone, nor than
    # all of them over the cores
    seconds = max(max(known), sum(known) / side_by_side)
    return f"{what}: about {seconds:.0f} s, as the last checks took here."


def main(argv: list[str], root: Path = ROOT) -> int:
    """Check the lessons named (all without names): those started, as many side by side as there
    are cores, each in its own private course; print their tables in course order, then a
    summary."""
    names = argv or [item.assignment for item in all_lessons(root)]
    print(SAVE_FIRST, flush=True)
    found = [examine(name, root) for name in names]
    started = [f for f in found if f.state == "graded"]
    # One kernel per core, each with one thread (two kernels with two torch threads each on two
    # cores wait on each other at every product).
    side_by_side = max(1, min(len(started), os.cpu_count() or 1))  # as cluster.py counts them
    options = ("--SandboxKernelManager.threads=1",) if side_by_side > 1 else ()
    if started:
        _sandbox_flags()  # its notice (if any) once, before the checks start
        print(_estimate(started, side_by_side, root), flush=True)
    with concurrent.futures.ThreadPoolExecutor(side_by_side) as pool:
        graded = {id(f): pool.submit(grade, f, root, options) for f in started}
        for each in found:  # in course order, each as soon as it and those before it are done
            if id(each) in graded and graded[id(each)].result().result is not None:
                print(summary.lesson_table(each) + "\n", flush=True)
            elif each.state != "graded" and len(found) == 1:  # else the summary says it
                print(_skipped(each), flush=True)
    if len(found) > 1:
        print("\n" + summary.summary(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One course of broken and hostile submissions, graded once per session through real nbgrader.

Every kind of coursekit.democlass.badsubmissions is handed in by a student named after it, beside an
honest ``solved`` and an honest ``wrong`` (the lesson's costliest planted mistake). The class is
graded with ``python -m coursekit.grading.classgrade`` -- killed after its first batch is merged,
then resumed -- so that one session proves the defences, the parallel grading, the consistency of an
interrupted run and the resumption at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.mistakes import all_mistakes
from coursekit.democlass import badsubmissions
from coursekit.grading import classgrade
from coursekit.grading import tempcourse as grading
from coursekit.grading.gradebook import open_gradebook
from coursekit.grading.ledger import tree_digest

LESSON = find_lesson("lesson01")  # the fastest lesson: every kind works on any lesson
# Short enough for the suite, long enough for a loaded 2-core machine; a small memory limit
# stops the memory bomb quickly.
OPTIONS = ["--timeout", "10", "--memory", "1536"]
EXTRA = ["--Execute.timeout=10", "--SandboxKernelManager.memory_limit_mb=1536"]


def pytest_collection_modifyitems(config, items):
    """COURSE_LESSONS=lesson05 (work on another lesson): leave this suite out, do not skip it."""
    wanted = {n.strip() for n in os.environ.get("COURSE_LESSONS", "").split(",") if n.strip()}
    if wanted and LESSON.assignment not in wanted:
        here = Path(__file__).parent
        keep = [item for item in items if here not in Path(str(item.fspath)).parents]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


@dataclass
class HostileClass:
    course: Path
    report: classgrade.ClassReport  # after the interrupted run was resumed
    interrupted: dict  # what the gradebook and the ledger held right after the kill
    submitted_before: dict  # digest of submitted/ before any grading
    materials: badsubmissions.Materials
    seconds: float  # wall time of the whole grading (both runs)


def _gradebook_state(course: Path) -> dict:
    """{student: [auto scores]} of every submission in the gradebook."""
    with open_gradebook(course / "gradebook.db") as gradebook:
        return {
            s.student.id: [g.auto_score for g in s.notebooks[0].grades]
            for s in gradebook.find_assignment(LESSON.assignment).submissions
        }


@pytest.fixture(scope="session")
def hostile(tmp_path_factory) -> HostileClass:
    course = grading.make_course(tmp_path_factory.mktemp("hostile"), [LESSON])
    stuff = badsubmissions.materials(
        course, LESSON, all_mistakes(), badsubmissions.other_lesson_notebook(LESSON)
    )
    for kind in badsubmissions.KINDS:
        badsubmissions.write(
            course / "submitted" / kind.name / LESSON.assignment, LESSON, kind.build(stuff)
        )
    for name, nb in (("solved", stuff.solved), ("wrong", stuff.wrong)):
        badsubmissions.write(
            course / "submitted" / name / LESSON.assignment, LESSON, badsubmissions.Submission(nb)
        )
    before = tree_digest(course / "submitted")

    start = time.monotonic()
    ledger = course / "reports" / LESSON.assignment / "ledger.json"
    log = (course / "interrupted-run.log").open("w")
    run = subprocess.Popen(
        # small batches: little work lost to the kill
        [
            sys.executable,
            "-m",
            "coursekit.grading.classgrade",
            LESSON.assignment,
            "--course",
            str(course),
            "--batch",
            "2",
            *OPTIONS,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    while run.poll() is None and time.monotonic() - start < 900:
        entries = json.loads(ledger.read_text()) if ledger.exists() else {}
        if any(e["status"] == "graded" for e in entries.values()):
            break
        time.sleep(0.5)
    assert run.poll() is None, (
        "the run ended before it could be "
        f"interrupted:\n{(course / 'interrupted-run.log').read_text()[-3000:]}"
    )
    os.killpg(run.pid, signal.SIGKILL)  # no clean-up of any kind
    run.wait()
    interrupted = {"gradebook": _gradebook_state(course), "ledger": json.loads(ledger.read_text())}

    report = classgrade.grade_class(course, LESSON, extra=EXTRA, progress=False)
    print("\n" + report.table())
    return HostileClass(course, report, interrupted, before, stuff, time.monotonic() - start)

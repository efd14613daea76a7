"""One course of broken and hostile submissions, graded once per session through real nbgrader.

Every kind of coursekit.democlass.badsubmissions is handed in by a student named after it, beside an
honest ``solved`` and an honest ``wrong`` (the lesson's costliest planted mistake). The class is
graded with ``python -m coursekit.grading.classgrade`` -- killed after its first batch is merged,
then resumed -- so that one session proves the defences, the parallel grading, the consistency of an
interrupted run and the resumption at once.

The attacks on the operating-system boundary aim at bait (:class:`Bait`): a secret in the grader's
environment and in a file in the grader's home, a course file to overwrite and a TCP server on
127.0.0.1 that counts its connections.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import signal
import socketserver
import subprocess
import sys
import threading
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

from ..sandboxes import nbgrader_flags
from ..shared import leave_out_unless_selected

LESSON = find_lesson("lesson01")  # the fastest lesson: every kind works on any lesson
# Short enough for the suite, long enough for a loaded 2-core machine; a small memory limit
# stops the memory bomb quickly.
OPTIONS = ["--timeout", "10", "--memory", "1536"]
EXTRA = ["--Execute.timeout=10", "--SandboxKernelManager.memory_limit_mb=1536"]


def pytest_collection_modifyitems(config, items):
    leave_out_unless_selected(config, items, LESSON.assignment, Path(__file__).parent)


SECRET_VARIABLE = "COURSE_GRADER_SECRET"
VICTIM_TEXT = "the grader's notes: nobody may change them\n"


@dataclass
class Bait:
    secret: str  # in the grader's environment and in home_file
    home_file: Path
    server: socketserver.TCPServer  # on 127.0.0.1; counts the connections it accepts
    connections: list  # one entry per connection accepted

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def targets(self, course: Path, other: str = "solved") -> badsubmissions.Targets:
        """The attacks' targets in ``course``, its victim file written afresh."""
        targets = badsubmissions.Targets.in_course(course, LESSON, other=other, port=self.port)
        Path(targets.victim).write_text(VICTIM_TEXT)
        return dataclasses.replace(targets, home_file=str(self.home_file))


@pytest.fixture(scope="session")
def bait():
    secret = secrets.token_hex(16)
    home_file = Path.home() / f".coursekit-grader-secret-{secret[:8]}"
    home_file.write_text(f"grader secret {secret}\n")
    connections: list = []

    class Count(socketserver.BaseRequestHandler):
        def handle(self):
            connections.append(self.client_address)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Count)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ[SECRET_VARIABLE] = secret  # the grading processes inherit it
    try:
        yield Bait(secret, home_file, server, connections)
    finally:
        os.environ.pop(SECRET_VARIABLE, None)
        server.shutdown()
        server.server_close()
        home_file.unlink(missing_ok=True)


@dataclass
class HostileClass:
    course: Path
    report: classgrade.ClassReport  # after the interrupted run was resumed
    interrupted: dict  # what the gradebook and the ledger held right after the kill
    submitted_before: dict  # digest of submitted/ before any grading
    materials: badsubmissions.Materials
    seconds: float  # wall time of the whole grading (both runs)
    bait: Bait


def _gradebook_state(course: Path) -> dict:
    """{student: [auto scores]} of every submission in the gradebook."""
    with open_gradebook(course / "gradebook.db") as gradebook:
        return {
            s.student.id: [g.auto_score for g in s.notebooks[0].grades]
            for s in gradebook.find_assignment(LESSON.assignment).submissions
        }


@pytest.fixture(scope="session")
def hostile(tmp_path_factory, bait) -> HostileClass:
    course = grading.make_course(tmp_path_factory.mktemp("hostile"), [LESSON])
    other = badsubmissions.other_lesson_notebook(LESSON)
    stuff = badsubmissions.materials(course, LESSON, all_mistakes(), other, bait.targets(course))
    sandbox = nbgrader_flags()  # bubblewrap (none), or the Python-only sandbox where it cannot run
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
            *(["--python-only-sandbox"] if sandbox else []),
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

    report = classgrade.grade_class(course, LESSON, extra=EXTRA + sandbox, progress=False)
    print("\n" + report.table())
    seconds = time.monotonic() - start
    return HostileClass(course, report, interrupted, before, stuff, seconds, bait)

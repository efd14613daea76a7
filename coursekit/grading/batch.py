"""One batch of class grading, as a Dask task: what a worker does, and what it hands back.

A task runs ``nbgrader autograde`` on a few students of the course, which it reads on the shared
folder (every worker sees the course at the same path). It writes only into places of its own:

* a temporary copy of the gradebook on the worker's disk (one SQLite file takes one writer);
* its **attempt folder**, ``reports/<lesson>/work-*/batch-N/attempt-<random>/``, where nbgrader
  puts the autograded notebooks (``CourseDirectory.autograded_directory``) and its log.

What it graded comes back as plain data (:class:`BatchResult`: the gradebook rows of its
students, and where their autograded notebooks are). The client -- the one process that writes
the course's gradebook and its ``autograded/`` folder -- merges it. So a task may run twice
without anything counted twice or lost: Dask reruns the batches of a worker that died on another
worker, and a worker only presumed dead may still be writing; each attempt writes only its own
folder, and only the attempt whose result reaches the client is merged, once.

:func:`course_visible` is the probe the client runs on every worker before grading anything.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course.lessons import Lesson
from coursekit.course.nbgrader_cli import BINDIR, nbgrader_command, nbgrader_env
from coursekit.grading import bwrap, deadlines, gradebook

CONFIG = "nbgrader_config.py"  # its digest says "the same course" on every machine


class CourseNotVisible(RuntimeError):
    """A worker does not see the course folder as the client does (no shared filesystem)."""


def config_digest(course: Path) -> str:
    """sha256 of the course's nbgrader_config.py ('' when there is none)."""
    config = Path(course) / CONFIG
    return hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else ""


def course_visible(course: str, digest: str, folder: str, bubblewrap: bool = False) -> str:
    """'' when this machine sees the course at ``course`` as the client does (its
    nbgrader_config.py has ``digest``), can write in ``folder`` (reports/<lesson>) and, when
    ``bubblewrap``, start grading kernels in it; otherwise what is wrong. Cheap: the client runs
    it on every worker before anything is graded."""
    root = Path(course)
    if bubblewrap and bwrap.unavailable():
        return f"{bwrap.unavailable()} ({bwrap.INSTALL_HINT})"
    try:
        if not root.is_dir():
            return f"there is no folder {root} on this worker (is the course on a shared volume?)"
        found = config_digest(root)
        if not found:
            return f"{root / CONFIG} is missing on this worker"
        if found != digest:
            return f"{root / CONFIG} on this worker is not the client's (another course?)"
        if not (root / gradebook.FILENAME).is_file():
            return f"{root / gradebook.FILENAME} is missing on this worker"
        if not (BINDIR / "nbgrader").exists():
            return f"nbgrader is not installed beside this worker's Python ({BINDIR})"
        probe = Path(folder) / f".probe-{uuid.uuid4().hex}"
        probe.write_text("")  # the worker writes its autograded notebooks in there
        probe.unlink()
    except OSError as problem:
        return f"cannot use the course folder {root}: {problem}"
    return ""


@dataclass(frozen=True)
class BatchSpec:
    """What a task needs to grade one batch: plain values, sent to the worker."""

    lesson: Lesson  # in the course, on the shared folder
    number: int
    students: tuple[str, ...]
    work: Path  # the run's work folder (in reports/<lesson>/); attempts go in there
    digest: str  # the course's config_digest, as the client sees it
    extra: tuple[str, ...] = ()  # more nbgrader flags
    threads: int = 0  # torch/BLAS threads per grading kernel (0: their default)
    deadlines: str = ""  # what the client read of the class's deadlines (deadlines.hand_over)


@dataclass
class BatchResult:
    """What a task hands back: nothing in it refers to the worker's own disk."""

    number: int
    students: list[str]
    graded: list[str]  # completely graded by nbgrader
    records: list[tuple] = field(default_factory=list)  # gradebook.records of ``graded``
    attempt: Path | None = None  # its autograded/<student>/<lesson> folders are in here
    returncode: int = 0
    log_tail: str = ""
    worker: str = ""  # the address of the worker that graded it
    seconds: float = 0.0

    def autograded(self, lesson: Lesson, student: str) -> Path:
        """Where this attempt left ``student``'s autograded folder."""
        return lesson.in_course(self.attempt).student_folder("autograded", student)


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # called outside a Dask worker (a test, a debugger)
        return "this process"


def grade_batch(spec: BatchSpec) -> BatchResult:
    """``nbgrader autograde`` of the batch's students (runs on a Dask worker)."""
    start = time.monotonic()
    lesson = spec.lesson
    if config_digest(lesson.root) != spec.digest:  # joined the cluster after the probe
        raise CourseNotVisible(
            f"worker {_worker_address()} does not see the course folder {lesson.root} "
            f"as the client does: {course_visible(str(lesson.root), spec.digest, str(spec.work))}"
        )
    attempt = spec.work / f"batch-{spec.number}" / f"attempt-{uuid.uuid4().hex[:12]}"
    attempt.parent.mkdir(exist_ok=True)  # not parents: a run that ended took its work folder
    attempt.mkdir()
    local = Path(tempfile.mkdtemp(prefix="coursekit-gradebook-"))
    try:
        db = local / gradebook.FILENAME
        shutil.copy2(lesson.root / gradebook.FILENAME, db)
        others = set(lesson.students()) - set(spec.students)  # nbgrader grades all but these
        command = nbgrader_command(
            "autograde",
            lesson.assignment,
            "--force",
            f"--db=sqlite:///{db}",
            f"--CourseDirectory.student_id_exclude={','.join(sorted(others))}",
            f"--CourseDirectory.autograded_directory={attempt / 'autograded'}",
            *spec.extra,
        )
        env = nbgrader_env(
            **({"COURSE_SANDBOX_THREADS": str(spec.threads)} if spec.threads else {}),
            **({deadlines.HANDED: spec.deadlines} if spec.deadlines else {}),
        )
        log = attempt / "nbgrader.log"
        with log.open("w") as handle:
            returncode = subprocess.run(
                command,
                cwd=lesson.root,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                check=False,
            ).returncode
        graded = gradebook.graded_in(db, lesson.in_course(attempt), list(spec.students))
        records = gradebook.records(db, lesson.assignment, graded) if graded else []
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return BatchResult(
        spec.number,
        list(spec.students),
        graded,
        records,
        attempt,
        returncode,
        log.read_text(errors="replace")[-3000:],
        _worker_address(),
        time.monotonic() - start,
    )

"""Grade a whole class with nbgrader, on every core, and say what happened to each student.

    make autograde LESSON=lesson01         # grade submitted/*/lesson01
    make accept LESSON=lesson01 STUDENT=s  # release a held submission after review (--accept)
    python -m coursekit.grading.classgrade lesson01 --report   # the table again, without grading

What it adds to ``nbgrader autograde`` (which does the grading, with the preprocessors that
nbgrader_config.py installs: screening, the sandbox kernel, the guard, holds for review):

* **Screening first.** A submission nbgrader cannot read (no notebook, a renamed, empty or
  malformed file, another assignment's notebook, a symbolic link) is recorded with 0 points, a
  flag and a note saying what to do; it never reaches nbgrader.
* **Both cores.** nbgrader grades one student after another. Here, batches of students are
  graded by parallel ``nbgrader autograde`` processes, each with its own copy of the gradebook
  (one SQLite file cannot take parallel writers); each finished batch is merged into the course's
  gradebook. A batch whose nbgrader process fails is retried one student at a time, so one
  submission can only ever fail itself.
* **Nothing lost.** Each merge writes a new gradebook beside the old one and renames it over it
  (atomic), so an interrupted run leaves the gradebook as it was after the last merge; a ledger
  (reports/<lesson>/ledger.json) records which submission (by content hash) is in it. Running
  again grades only what is missing or was handed in again (``--force``: everything), so a
  second run is a no-op and an interrupted one resumes. Submissions and the course's own files
  are hashed before and after: grading must change neither.
* **A report.** A per-student table (score, the autograder's score, status, notes), written to
  reports/<lesson>/grades.csv, and reports/<lesson>/review.md listing every submission whose
  points are held or that could not be graded, with the reasons (coursekit.grading.report).

The pieces: coursekit.grading.gradebook (copies, merges, atomic changes), .ledger (what is in
the gradebook, digests), .results (what each student got), .holds (held and accepted).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course.lessons import ROOT, Lesson
from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.nbgrader_cli import nbgrader_command, nbgrader_env
from coursekit.course.sources import sync_sources
from coursekit.grading import gradebook, integrity
from coursekit.grading.holds import accepted_path, load_accepted, release, submission_digest
from coursekit.grading.integrity import Finding
from coursekit.grading.ledger import changed as changed_paths
from coursekit.grading.ledger import course_digest, folder_digest, read_json, write_json
from coursekit.grading.report import REPORTS, ClassReport, write_reports
from coursekit.grading.results import read_results
from coursekit.grading.tempcourse import GradingError

LEDGER = "ledger.json"  # in reports/<lesson>/


@dataclass
class _Run:
    """One class-grading run of one lesson: where things are and what it has done so far."""

    lesson: Lesson  # in the course being graded
    workers: int
    extra: list[str]  # more nbgrader flags
    everyone: list[str] = field(default_factory=list)  # who handed the lesson in
    digests: dict[str, str] = field(default_factory=dict)  # their submissions' digests
    ledger: dict = field(default_factory=dict)  # what is in the gradebook, with status
    graded: int = 0  # notebooks executed by this run

    @property
    def course(self) -> Path:
        return self.lesson.root

    @property
    def gradebook(self) -> Path:
        return self.course / gradebook.FILENAME

    @property
    def folder(self) -> Path:
        return self.course / REPORTS / self.lesson.assignment

    def record(self, student: str, status: str, findings=()) -> None:
        entry = {"sha256": self.digests[student], "status": status}
        if findings:
            entry["findings"] = [f.to_dict() for f in findings]
        self.ledger[student] = entry

    def save_ledger(self) -> None:
        write_json(self.folder / LEDGER, self.ledger)


def _open_run(course: Path, lesson: Lesson, workers: int | None, extra) -> _Run:
    """Check the course can be graded and list who handed the lesson in."""
    course = Path(course).resolve()
    sync_sources(course)  # now, not by parallel nbgrader processes at once
    run = _Run(lesson.in_course(course), workers or min(os.cpu_count() or 1, 8), list(extra or []))
    try:
        gradebook.require_assignment(run.gradebook, lesson.assignment)
    except (FileNotFoundError, LookupError) as problem:
        raise GradingError(str(problem)) from None
    run.everyone = run.lesson.students()
    commas = [s for s in run.everyone if "," in s]
    if commas:
        raise GradingError(f"student ids with commas cannot be graded in batches: {commas}")
    submitted = course / "submitted"
    run.digests = {s: folder_digest(submitted / s / lesson.assignment) for s in run.everyone}
    run.ledger = read_json(run.folder / LEDGER)
    return run


def _to_grade(run: _Run, force: bool, only: list[str] | None) -> list[str]:
    """Who needs grading: new or handed in again (``force``: everyone; ``only``: just these)."""
    known = gradebook.known_students(run.gradebook, run.lesson.assignment)
    return [
        s
        for s in run.everyone
        if (only is None or s in only)
        and (force or s not in known or run.ledger.get(s, {}).get("sha256") != run.digests[s])
    ]


def _screen(run: _Run, students: list[str]) -> list[str]:
    """Record what nbgrader cannot read as invalid (0, flagged, a note); return the rest."""
    lesson = run.lesson
    ref = integrity.Reference.from_course(run.course, lesson.assignment, lesson.name)
    invalid, valid = {}, []
    for student in students:
        folder = lesson.student_folder("submitted", student)
        nb, found = integrity.read_submission(folder, lesson.name)
        if nb is not None:
            found = [f for f in integrity.structure(nb, ref, ROOT) if f.severity == "invalid"]
        if found:
            invalid[student] = found
        else:
            valid.append(student)
    if invalid:
        gradebook.record_zero(run.gradebook, lesson, sorted(invalid))
        for student, found in invalid.items():
            shutil.rmtree(lesson.student_folder("autograded", student), ignore_errors=True)
            run.record(student, "invalid", found)
        run.save_ledger()
    return valid


# ---------------------------------------------------------------- batches of nbgrader autograde


@dataclass
class _Batch:
    students: list[str]
    number: int
    worker_db: Path
    returncode: int = 0
    log_tail: str = ""


def _autograde_batch(run: _Run, batch: _Batch, work: Path, threads: int) -> _Batch:
    """``nbgrader autograde`` of the batch's students, on a copy of the gradebook."""
    shutil.copy2(run.gradebook, batch.worker_db)
    exclude = [s for s in run.everyone if s not in set(batch.students)]
    command = nbgrader_command(
        "autograde",
        run.lesson.assignment,
        "--force",
        f"--db=sqlite:///{batch.worker_db}",
        f"--CourseDirectory.student_id_exclude={','.join(exclude)}",
        *run.extra,
    )
    env = nbgrader_env(**({"COURSE_SANDBOX_THREADS": str(threads)} if threads else {}))
    log = work / f"batch-{batch.number}.log"
    with log.open("w") as handle:
        result = subprocess.run(
            command, cwd=run.course, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False
        )
    batch.returncode = result.returncode
    batch.log_tail = log.read_text(errors="replace")[-3000:]
    return batch


def _absorb(run: _Run, batch: _Batch) -> list[str]:
    """Merge what a finished batch graded into the gradebook; return the students to grade again
    one at a time (a batch whose nbgrader failed: find the one submission that broke it)."""
    ok = gradebook.graded_in(batch.worker_db, run.lesson, batch.students)
    if ok:
        gradebook.merge(run.gradebook, batch.worker_db, run.lesson.assignment, ok)
        for student in ok:
            run.record(student, "graded")
        run.graded += len(ok)
    lost = [s for s in batch.students if s not in ok]
    retry = lost if len(batch.students) > 1 else []
    if lost and not retry:
        _record_failed(run, lost[0], batch)
    run.save_ledger()
    batch.worker_db.unlink(missing_ok=True)
    return retry


def _record_failed(run: _Run, student: str, batch: _Batch) -> None:
    """nbgrader could not grade this one submission: 0, flagged, with nbgrader's last words."""
    shutil.rmtree(run.lesson.student_folder("autograded", student), ignore_errors=True)
    gradebook.record_zero(run.gradebook, run.lesson, [student])
    tail = batch.log_tail.strip()
    last = tail.splitlines()[-1] if tail else ""
    message = f"nbgrader could not grade it (exit code {batch.returncode}): {last}"
    run.record(student, "failed", [Finding("grading-failed", "invalid", message)])


class _Progress:
    """A progress bar that counts autograded notebooks as nbgrader writes them."""

    def __init__(self, run: _Run, students: list[str], show: bool):
        from tqdm.auto import tqdm

        self.paths = [run.lesson.autograded(s) for s in students]
        self.started = time.time()
        self.bar = tqdm(
            total=len(students),
            desc=f"grading {run.lesson.assignment}",
            unit="nb",
            disable=not show,
            file=sys.stderr,
            mininterval=2.0,
        )

    def update(self) -> None:
        done = sum(p.exists() and p.stat().st_mtime >= self.started for p in self.paths)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.update()
        self.bar.close()


def _grade_batches(run: _Run, students: list[str], size: int | None, show: bool) -> None:
    """Grade ``students`` in batches on ``run.workers`` parallel nbgrader processes, merging each
    finished batch into the gradebook (the only writer) as it comes."""
    size = size or max(1, min(8, math.ceil(len(students) / (2 * run.workers))))
    work = Path(tempfile.mkdtemp(prefix="work-", dir=run.folder))
    threads = 1 if run.workers > 1 else 0  # parallel kernels: one thread each, no oversubscription
    numbers, lock = iter(range(10**9)), threading.Lock()
    progress = _Progress(run, students, show)
    try:
        with concurrent.futures.ThreadPoolExecutor(run.workers) as pool:

            def submit(group: list[str]):
                with lock:
                    number = next(numbers)
                batch = _Batch(group, number, work / f"batch-{number}.db")
                return pool.submit(_autograde_batch, run, batch, work, threads)

            pending = {submit(students[i : i + size]) for i in range(0, len(students), size)}
            while pending:
                done, pending = concurrent.futures.wait(
                    pending, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED
                )
                progress.update()
                for future in done:
                    pending |= {submit([s]) for s in _absorb(run, future.result())}
    finally:
        progress.close()
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- a run


def grade_class(
    course: Path,
    lesson: Lesson,
    workers: int | None = None,
    force: bool = False,
    batch_size: int | None = None,
    extra: list[str] | None = None,
    progress: bool = True,
    students: list[str] | None = None,
) -> ClassReport:
    """Grade every ``submitted/<student>/<lesson>`` of ``course`` (``students``: only these);
    see the module's docstring. One run at a time per course and lesson (a lock file)."""
    import fcntl

    folder = Path(course).resolve() / REPORTS / lesson.assignment
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GradingError(f"another run is grading {lesson.assignment} in {course}") from None
        for stale in folder.glob("work-*"):  # left by an interrupted run
            shutil.rmtree(stale, ignore_errors=True)
        run = _open_run(course, lesson, workers, extra)
        before = course_digest(run.course, run.lesson)
        valid = _screen(run, _to_grade(run, force, students))
        start = time.monotonic()
        if valid:
            _grade_batches(run, valid, batch_size, progress)
        seconds = time.monotonic() - start
        problems = [
            f"{path} changed during grading"
            for path in changed_paths(before, course_digest(run.course, run.lesson))
        ]
        rows = list(read_results(run.course, run.lesson, run.everyone, run.ledger).values())
        report = ClassReport(run.lesson, rows, run.graded, seconds, run.workers, problems)
        write_reports(run.course, report)
        return report


def accept(course: Path, lesson: Lesson, student: str) -> None:
    """An instructor reviewed ``student``'s held submission: count its points (also after
    regrading)."""
    course = Path(course).resolve()
    accepted = load_accepted(course, lesson.assignment)
    accepted[student] = submission_digest(lesson.in_course(course).submitted(student))
    write_json(accepted_path(course, lesson.assignment), accepted)
    gradebook.replace_gradebook(
        course / gradebook.FILENAME,
        lambda gb: release(gb, lesson.assignment, lesson.name, student),
    )


def report_only(course: Path, lesson: Lesson) -> ClassReport:
    lesson = lesson.in_course(Path(course).resolve())
    ledger = read_json(lesson.root / REPORTS / lesson.assignment / LEDGER)
    return ClassReport(lesson, list(read_results(lesson.root, lesson, None, ledger).values()))


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.grading.classgrade", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("lesson", help="the assignment, e.g. lesson01")
    parser.add_argument(
        "--course", type=Path, default=ROOT, help="the course folder (default: this repository)"
    )
    parser.add_argument(
        "--workers", type=int, help="parallel nbgrader processes (default: one per core, <= 8)"
    )
    parser.add_argument("--batch", type=int, help="students per nbgrader process")
    parser.add_argument("--force", action="store_true", help="grade every submission again")
    parser.add_argument(
        "--timeout", type=int, help="seconds a cell may run (default: the config's)"
    )
    parser.add_argument("--memory", type=int, help="memory limit of a grading kernel, MiB")
    parser.add_argument("--report", action="store_true", help="print the table, grade nothing")
    parser.add_argument(
        "--accept",
        metavar="STUDENT",
        action="append",
        default=[],
        help="release a held submission after reviewing it (repeatable)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    item = find_lesson(args.lesson)
    extra = [f"--Execute.timeout={args.timeout}"] if args.timeout else []
    if args.memory:
        extra.append(f"--SandboxKernelManager.memory_limit_mb={args.memory}")
    for student in args.accept:
        accept(args.course, item, student)
        print(f"released the hold on {student}")
    if args.accept or args.report:
        print(report_only(args.course, item).table())
        return 0
    report = grade_class(args.course, item, args.workers, args.force, args.batch, extra)
    print(report.table())
    print(f"reports: {args.course / REPORTS / item.assignment}/grades.csv and review.md")
    return 1 if report.problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GradingError as problem:
        sys.exit(f"classgrade: {problem}")

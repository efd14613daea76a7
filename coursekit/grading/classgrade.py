"""Grade a whole class with nbgrader, on every core, and say what happened to each student.

    make autograde LESSON=lesson01         # grade submitted/*/lesson01
    python -m coursekit.grading.classgrade lesson01 --scheduler tcp://HOST:8786  # on a cluster
    make accept LESSON=lesson01 STUDENT=s  # release a held submission after review (--accept)
    python -m coursekit.grading.classgrade lesson01 --report   # the table again, without grading

What it adds to ``nbgrader autograde`` (which does the grading, with the preprocessors that
nbgrader_config.py installs: screening, the sandbox kernel, the guard, holds for review):

* **Screening first.** A submission nbgrader cannot read (no notebook, a renamed, empty or
  malformed file, another assignment's notebook, a symbolic link) is recorded with 0 points, a
  flag and a note saying what to do; it never reaches nbgrader.
* **Every core, or a cluster.** nbgrader grades one student after another. Here, batches of
  students are Dask tasks (coursekit.grading.cluster): on a LocalCluster of this machine by
  default, or on an existing Dask cluster (``--scheduler tcp://HOST:8786`` or
  ``DASK_SCHEDULER_ADDRESS``) whose workers see the course folder; every worker is checked for
  that before anything is graded. A batch is an ``nbgrader autograde`` process with its own copy
  of the gradebook (one SQLite file cannot take parallel writers) that writes into a folder of its
  own (coursekit.grading.batch); what it graded comes back as data, and this process -- the only
  writer of the gradebook and of autograded/ -- merges each finished batch. A batch whose
  nbgrader process fails is retried one student at a time, so one submission can only ever fail
  itself; a batch whose worker died is rerun by Dask elsewhere, counted once, and reported.
* **Nothing lost.** Each merge writes a new gradebook beside the old one and renames it over it
  (atomic), so an interrupted run leaves the gradebook as it was after the last merge; a ledger
  (reports/<lesson>/ledger.json) records which submission (by content hash) is in it. Running
  again grades only what is missing or was handed in again (``--force``: everything), so a
  second run is a no-op and an interrupted one resumes. Submissions and the course's own files
  are hashed before and after: grading must change neither.
* **Due dates and late work.** The class's course.toml (coursekit.grading.deadlines) is read
  once, before anything is graded; with ``[late] counts = "best-on-time"`` the best hand-in
  before each student's due date is put into submitted/ first (coursekit.grading.handins).
  A bad date, policy or extension stops the run with a
  message; the due date goes into the gradebook, and every batch gets what was read, so that
  nbgrader's own AssignLatePenalties takes each penalty. A student whose due date, extension or
  the policy changed since they were graded is graded again.
* **What the class got wrong, and how alike its answers are** (coursekit.grading.failures and
  .similarity): per test cell the share that lost its points and the commonest messages (a
  table and a plot), and the most similar pairs of answers side by side; printed in short.
* **A report.** A per-student table (score, the autograder's score, status, notes), written to
  reports/<lesson>/grades.csv, and reports/<lesson>/review.md listing every submission whose
  points are held or that could not be graded, with the reasons (coursekit.grading.report).

The pieces: coursekit.grading.gradebook (copies, merges, atomic changes), .ledger (what is in
the gradebook, digests), .results (what each student got), .holds (held and accepted), .cluster
(where batches run) and .batch (what a worker does with one).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course.coursefile import CourseFileError
from coursekit.course.lessons import ROOT, Lesson
from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.sources import sync_sources
from coursekit.grading import (
    bwrap,
    deadlines,
    failures,
    gradebook,
    handins,
    integrity,
    similarity,
    tempcourse,
)
from coursekit.grading.batch import BatchResult, BatchSpec, config_digest
from coursekit.grading.cluster import (
    Dispatch,
    add_cluster_arguments,
    open_cluster,
    probe,
    scheduler_address,
)
from coursekit.grading.deadlines import Deadlines
from coursekit.grading.holds import accepted_path, load_accepted, release, submission_digest
from coursekit.grading.integrity import Finding
from coursekit.grading.ledger import changed as changed_paths
from coursekit.grading.ledger import course_digest, folder_digest, read_json, write_json
from coursekit.grading.report import REPORTS, ClassReport, write_reports, write_tables
from coursekit.grading.results import read_results
from coursekit.grading.tempcourse import GradingError

LEDGER = "ledger.json"  # in reports/<lesson>/


@dataclass
class _Run:
    """One class-grading run of one lesson: where things are and what it has done so far."""

    lesson: Lesson  # in the course being graded
    extra: list[str]  # more nbgrader flags
    workers: int = 0  # batches graded at once (the Dask workers' threads)
    where: str = ""  # the cluster, for the report
    reruns: list[str] = field(default_factory=list)  # batches Dask gave to another worker
    everyone: list[str] = field(default_factory=list)  # who handed the lesson in
    digests: dict[str, str] = field(default_factory=dict)  # their submissions' digests
    ledger: dict = field(default_factory=dict)  # what is in the gradebook, with status
    graded: int = 0  # notebooks executed by this run
    deadlines: Deadlines | None = None  # course.toml's due dates, extensions and late policy
    threshold: float = similarity.THRESHOLD  # course.toml's similarity threshold

    @property
    def course(self) -> Path:
        return self.lesson.root

    @property
    def gradebook(self) -> Path:
        return self.course / gradebook.FILENAME

    @property
    def folder(self) -> Path:
        return self.course / REPORTS / self.lesson.assignment

    def deadline(self, student: str) -> str:
        """What the student's late penalty depends on, besides the submission."""
        return self.deadlines.key(student, self.lesson.assignment) if self.deadlines else ""

    def record(self, student: str, status: str, findings=()) -> None:
        entry = {"sha256": self.digests[student], "status": status}
        if self.deadline(student):
            entry["deadline"] = self.deadline(student)
        if findings:
            entry["findings"] = [f.to_dict() for f in findings]
        self.ledger[student] = entry

    def save_ledger(self) -> None:
        write_json(self.folder / LEDGER, self.ledger)


def _open_run(course: Path, lesson: Lesson, extra, settle: bool = True) -> _Run:
    """Check the course can be graded, put the hand-in that counts into submitted/ (course.toml's
    ``[late] counts``; not for a scratch course, ``settle``) and list who handed the lesson in."""
    course = Path(course).resolve()
    sync_sources(course)  # now, not by parallel nbgrader processes at once
    run = _Run(lesson.in_course(course), list(extra or []))
    try:
        gradebook.require_assignment(run.gradebook, lesson.assignment)
        run.deadlines = deadlines.load(course)  # a bad course.toml stops here, not per student
        run.threshold = similarity.threshold(course)
    except (FileNotFoundError, LookupError, CourseFileError) as problem:
        raise GradingError(str(problem)) from None
    if settle and run.deadlines and run.deadlines.counts == "best-on-time":
        handins.settle(course, run.lesson, run.deadlines, lambda found: _grade_hand_ins(run, found))
    if run.deadlines:  # the due date formgrader and nbgrader export show, before any grading
        gradebook.replace_gradebook(
            run.gradebook, lambda gb: deadlines.write(gb, run.deadlines, lesson.assignment)
        )
    run.everyone = run.lesson.students()
    commas = [s for s in run.everyone if "," in s]
    if commas:
        raise GradingError(f"student ids with commas cannot be graded in batches: {commas}")
    submitted = course / "submitted"
    run.digests = {s: folder_digest(submitted / s / lesson.assignment) for s in run.everyone}
    run.ledger = read_json(run.folder / LEDGER)
    return run


def _to_grade(run: _Run, force: bool, only: list[str] | None) -> list[str]:
    """Who needs grading: new, handed in again, or whose due date, extension or late policy
    changed (``force``: everyone; ``only``: just these)."""
    known = gradebook.known_students(run.gradebook, run.lesson.assignment)

    def changed(s: str) -> bool:
        entry = run.ledger.get(s, {})
        return entry.get("sha256") != run.digests[s] or entry.get("deadline", "") != run.deadline(s)

    return [
        s
        for s in run.everyone
        if (only is None or s in only) and (force or s not in known or changed(s))
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


# ---------------------------------------------------------------- batches on a Dask cluster


def _install(run: _Run, result: BatchResult, student: str) -> None:
    """Move a student's autograded folder from the batch's attempt folder into autograded/."""
    target = run.lesson.student_folder("autograded", student)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(result.autograded(run.lesson, student), target)


def _absorb(run: _Run, result: BatchResult) -> list[str]:
    """Merge what a finished batch graded into autograded/ and the gradebook (this process is
    their only writer); return the students to grade again one at a time (a batch whose nbgrader
    failed: find the one submission that broke it)."""
    ok = result.graded
    if ok:
        for student in ok:
            _install(run, result, student)
        gradebook.merge_records(run.gradebook, run.lesson.assignment, result.records)
        for student in ok:
            run.record(student, "graded")
        run.graded += len(ok)
    lost = [s for s in result.students if s not in ok]
    retry = lost if len(result.students) > 1 else []
    if lost and not retry:
        _record_failed(run, lost[0], result)
    run.save_ledger()
    if result.attempt:
        shutil.rmtree(result.attempt, ignore_errors=True)
    return retry


def _record_failed(run: _Run, student: str, result: BatchResult) -> None:
    """nbgrader could not grade this one submission: 0, flagged, with nbgrader's last words."""
    shutil.rmtree(run.lesson.student_folder("autograded", student), ignore_errors=True)
    gradebook.record_zero(run.gradebook, run.lesson, [student])
    tail = result.log_tail.strip()
    last = tail.splitlines()[-1] if tail else ""
    message = f"nbgrader could not grade it (exit code {result.returncode}): {last}"
    run.record(student, "failed", [Finding("grading-failed", "invalid", message)])


class _Progress:
    """A progress bar that counts autograded notebooks as nbgrader writes them (in the batches'
    attempt folders) and as they are merged."""

    def __init__(self, run: _Run, work: Path, students: list[str], show: bool):
        from tqdm.auto import tqdm

        self.work, self.wanted, self.merged = work, set(students), set()
        self.pattern = (
            f"batch-*/attempt-*/autograded/*/{run.lesson.assignment}/{run.lesson.name}.ipynb"
        )
        self.started = time.time()
        self.bar = tqdm(
            total=len(students),
            desc=f"grading {run.lesson.assignment}",
            unit="nb",
            disable=not show,
            file=sys.stderr,
            mininterval=2.0,
        )

    def _written(self) -> set[str]:
        found = set()
        for path in self.work.glob(self.pattern):
            try:
                if path.stat().st_mtime >= self.started:
                    found.add(path.parts[-3])
            except FileNotFoundError:  # merged meanwhile
                continue
        return found

    def update(self, merged=()) -> None:
        self.merged |= set(merged)
        done = len((self.merged | self._written()) & self.wanted)
        self.bar.update(max(0, done - self.bar.n))

    def close(self) -> None:
        self.update()
        self.bar.close()


def _grade_batches(run: _Run, students: list[str], size: int | None, show: bool, cluster) -> None:
    """Grade ``students`` in batches on the Dask ``cluster``, merging each finished batch into
    the gradebook (the only writer) as it comes."""
    size = size or max(1, min(8, math.ceil(len(students) / (2 * cluster.workers))))
    work = Path(tempfile.mkdtemp(prefix="work-", dir=run.folder))
    threads = 1 if cluster.workers > 1 else 0  # parallel kernels: one thread each
    digest, numbers = config_digest(run.course), itertools.count()
    handed = str(deadlines.hand_over(run.deadlines, work))  # one reading for every batch
    progress = _Progress(run, work, students, show)
    dispatch = Dispatch(cluster, tick=progress.update)

    def submit(group: list[str]) -> None:
        number = next(numbers)
        dispatch.submit(
            BatchSpec(
                run.lesson, number, tuple(group), work, digest, tuple(run.extra), threads, handed
            )
        )

    finished: dict[int, BatchResult] = {}
    try:
        for i in range(0, len(students), size):
            submit(students[i : i + size])
        for result in dispatch.results():
            finished[result.number] = result
            for student in _absorb(run, result):
                submit([student])
            progress.update(result.graded)
        run.reruns = [
            f"batch {n} ({', '.join(finished[n].students)}): {' and '.join(workers)} was lost "
            f"while it held the batch; graded again by {finished[n].worker}"
            for n, workers in sorted(dispatch.reruns().items())
            # not one whose result was collected just before its worker was lost
            if n in finished and finished[n].worker not in workers
        ]
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
    scheduler: str | None = None,
    processes: bool = False,
    python_only: bool = False,
    settle: bool = True,
) -> ClassReport:
    """Grade every ``submitted/<student>/<lesson>`` of ``course`` (``students``: only these);
    see the module's docstring. ``scheduler``: a Dask scheduler's address (default: Dask's
    DASK_SCHEDULER_ADDRESS, else a cluster of ``workers`` on this machine, threads unless
    ``processes``). One run at a time per course and lesson (a lock file). Every kernel runs in
    bubblewrap; where it cannot, grading refuses to start unless ``python_only`` accepts the
    Python-only sandbox."""
    import fcntl

    python_only = python_only or bwrap.PYTHON_ONLY_FLAG in (extra or [])
    extra = [flag for flag in extra or [] if flag != bwrap.PYTHON_ONLY_FLAG]
    try:  # (given twice, nbgrader would refuse the flag)
        extra = bwrap.nbgrader_flags(python_only) + extra
    except bwrap.Unavailable as refused:
        raise GradingError(str(refused)) from None
    folder = Path(course).resolve() / REPORTS / lesson.assignment
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GradingError(f"another run is grading {lesson.assignment} in {course}") from None
        for stale in folder.glob("work-*"):  # left by an interrupted run
            shutil.rmtree(stale, ignore_errors=True)
        run = _open_run(course, lesson, extra, settle)
        before = course_digest(run.course, run.lesson)
        todo = _to_grade(run, force, students)
        seconds = 0.0
        if todo:  # no cluster for a run with nothing to do
            address = scheduler_address(scheduler)
            with open_cluster(address, workers, processes) as cluster:
                seconds = _grade_on(cluster, run, todo, batch_size, progress)
        problems = [
            f"{path} changed during grading"
            for path in changed_paths(before, course_digest(run.course, run.lesson))
        ]
        rows = list(read_results(run.course, run.lesson, run.everyone, run.ledger).values())
        report = ClassReport(run.lesson, rows, run.graded, seconds, run.workers, problems)
        report.where, report.reruns = run.where, run.reruns
        _after_deadline(run, report)
        write_reports(run.course, report)
        return report


def _grade_hand_ins(run: _Run, found: dict[str, Path]) -> dict[str, float]:
    """{name: what the tests gave} of hand-ins ({name: folder}), graded in a scratch course
    beside the reports, with the run's sandbox and flags (coursekit.grading.handins)."""
    scratch = Path(tempfile.mkdtemp(prefix="handins-", dir=run.folder)) / "course"
    try:
        tempcourse.make_course(scratch, [run.lesson], root=run.course)
        for name, folder in found.items():
            shutil.copytree(folder, run.lesson.in_course(scratch).student_folder("submitted", name))
        report = grade_class(scratch, run.lesson, extra=run.extra, progress=False, settle=False)
        return {row.student: row.auto for row in report.rows}
    finally:
        shutil.rmtree(scratch.parent, ignore_errors=True)


def _after_deadline(run: _Run, report: ClassReport) -> None:
    """What the class got wrong, and how alike the graded submissions' answers are."""
    report.failures = failures.tally(report.rows)
    graded = [r.student for r in report.rows if r.status in ("graded", "held")]
    report.similarity = similarity.class_similarity(run.course, run.lesson, graded, run.threshold)


def _grade_on(cluster, run: _Run, todo: list[str], size: int | None, show: bool) -> float:
    """Check every worker sees the course, screen, grade; return the seconds grading took."""
    # before anything is graded (or screened); bubblewrap unless the Python-only was accepted
    probe(cluster, run.course, run.folder, bwrap.PYTHON_ONLY_FLAG not in run.extra)
    run.workers, run.where = cluster.workers, cluster.describe()
    if show:
        print(f"grading {run.lesson.assignment} on {run.where}", file=sys.stderr, flush=True)
    valid = _screen(run, todo)
    start = time.monotonic()
    if valid:
        _grade_batches(run, valid, size, show, cluster)
    return time.monotonic() - start


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
    write_tables(course, report_only(course, lesson))  # grades.csv and review.md say so now


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
    add_cluster_arguments(parser)
    parser.add_argument("--batch", type=int, help="students per nbgrader process")
    parser.add_argument("--force", action="store_true", help="grade every submission again")
    parser.add_argument(
        "--timeout", type=int, help="seconds a cell may run (default: the config's)"
    )
    parser.add_argument("--memory", type=int, help="memory limit of a grading kernel, MiB")
    parser.add_argument("--report", action="store_true", help="print the table, grade nothing")
    parser.add_argument(
        "--python-only-sandbox",
        action="store_true",
        help="where bubblewrap cannot run: accept the weaker Python-only sandbox (the kernel then "
        "runs as you, sees your files and the network below Python)",
    )
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
    report = grade_class(
        args.course,
        item,
        args.workers,
        args.force,
        args.batch,
        extra,
        scheduler=args.scheduler,
        processes=args.processes,
        python_only=args.python_only_sandbox,
    )
    print(report.table())
    print("\n".join(report.after_deadline()))
    print(f"reports: {args.course / REPORTS / item.assignment}/grades.csv and review.md")
    return 1 if report.problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GradingError as problem:
        sys.exit(f"classgrade: {problem}")

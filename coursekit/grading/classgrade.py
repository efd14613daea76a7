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
  points are held or that could not be graded, with the reasons.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from coursekit.course.lessons import ROOT, Lesson
from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.nbgrader_cli import nbgrader_command, nbgrader_env
from coursekit.grading import integrity
from coursekit.grading.autograder import (
    META,
    accepted_path,
    load_accepted,
    release,
    submission_digest,
)
from coursekit.grading.integrity import Finding
from coursekit.grading.tempcourse import GradingError

REPORTS = "reports"


# ---------------------------------------------------------------- hashing


def tree_digest(root: Path, skip=("__pycache__", ".ipynb_checkpoints")) -> dict[str, str]:
    """{relative path: sha256 (or "-> target" for a link)} of every file under ``root``."""
    root, out = Path(root), {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        if any(part in skip for part in path.parts):
            continue
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def folder_digest(folder: Path) -> str:
    return hashlib.sha256(json.dumps(tree_digest(folder), sort_keys=True).encode()).hexdigest()


def course_digest(course: Path, lesson: Lesson) -> dict[str, str]:
    """What grading must never change: the submissions and the course's own files."""
    out = {}
    for part in ("submitted", "solutions", f"notebooks/{lesson.assignment}"):
        out |= {f"{part}/{k}": v for k, v in tree_digest(course / part).items()}
    config = course / "nbgrader_config.py"
    if config.exists():
        out["nbgrader_config.py"] = hashlib.sha256(config.read_bytes()).hexdigest()
    return out


def _write_json(path: Path, data) -> None:
    """Write atomically: a file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


# ---------------------------------------------------------------- the gradebook


def _gradebook(path: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{path}")


def _replace_gradebook(main: Path, change) -> None:
    """Apply ``change(gradebook)`` to a copy of ``main``, then rename the copy over it."""
    import warnings

    from sqlalchemy.exc import SAWarning

    tmp = main.with_name(main.name + ".merging")
    shutil.copy2(main, tmp)
    with _gradebook(tmp) as gradebook, warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", SAWarning
        )  # nbgrader's add_submission autoflushes early; harmless
        change(gradebook)
        gradebook.db.commit()
    os.replace(tmp, main)


def merge(main: Path, worker: Path, assignment: str, students: list[str]) -> None:
    """Copy ``students``' submissions of ``assignment`` from the ``worker`` gradebook into
    ``main``."""
    with _gradebook(worker) as source:
        records = []
        for student in students:
            person = source.find_student(student)
            submission = source.find_submission(assignment, student)
            notebooks = []
            for nb in submission.notebooks:
                grades = {
                    g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
                    for g in nb.grades
                }
                comments = {c.name: (c.auto_comment, c.manual_comment) for c in nb.comments}
                notebooks.append(
                    (nb.name, nb.flagged, nb.late_submission_penalty, grades, comments)
                )
            records.append(
                (
                    student,
                    {k: getattr(person, k) for k in ("first_name", "last_name", "email")},
                    submission.timestamp,
                    notebooks,
                )
            )

    def change(gradebook):
        for student, person, timestamp, notebooks in records:
            gradebook.update_or_create_student(student, **person)
            gradebook.update_or_create_submission(assignment, student, timestamp=timestamp)
            for name, flagged, penalty, grades, comments in notebooks:
                nb = gradebook.find_submission_notebook(name, assignment, student)
                nb.flagged, nb.late_submission_penalty = flagged, penalty
                for grade in nb.grades:
                    (
                        grade.auto_score,
                        grade.manual_score,
                        grade.extra_credit,
                        grade.needs_manual_grade,
                    ) = grades[grade.name]
                for comment in nb.comments:
                    comment.auto_comment, comment.manual_comment = comments[comment.name]

    _replace_gradebook(main, change)


def record_zero(main: Path, lesson: Lesson, students: list[str]) -> None:
    """Students whose submission could not be graded: 0 points, flagged."""

    def change(gradebook):
        for student in students:
            gradebook.update_or_create_student(student)
            gradebook.update_or_create_submission(lesson.assignment, student)
            nb = gradebook.find_submission_notebook(lesson.name, lesson.assignment, student)
            nb.flagged = True
            for grade in nb.grades:
                grade.auto_score, grade.manual_score, grade.needs_manual_grade = 0.0, None, False

    _replace_gradebook(main, change)


def _graded_in(worker: Path, lesson: Lesson, course: Path, students: list[str]) -> list[str]:
    """The students of a batch that nbgrader graded completely."""
    done = []
    with _gradebook(worker) as gradebook:
        for student in students:
            autograded = (
                course / "autograded" / student / lesson.assignment / f"{lesson.name}.ipynb"
            )
            try:
                nb = gradebook.find_submission_notebook(lesson.name, lesson.assignment, student)
            except Exception:  # noqa: BLE001 -- MissingEntry: not graded
                continue
            if autograded.exists() and all(g.auto_score is not None for g in nb.grades):
                done.append(student)
    return done


# ---------------------------------------------------------------- the report


@dataclass
class Row:
    student: str
    status: str  # graded, held, invalid or failed
    score: float  # what the gradebook counts (0 while held)
    auto: float  # what the autograder's tests gave
    max_score: float
    findings: list[Finding] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # test cells that lost points

    def notes(self, width: int = 70) -> str:
        kinds = list(
            dict.fromkeys(
                f.kind for f in self.findings if f.severity != "note" or self.status != "held"
            )
        )
        text = ", ".join(kinds)
        return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class ClassReport:
    lesson: Lesson
    rows: list[Row]
    graded: int = 0  # notebooks executed by this run
    seconds: float = 0.0
    workers: int = 1
    problems: list[str] = field(default_factory=list)

    @property
    def per_minute(self) -> float:
        return 60.0 * self.graded / self.seconds if self.seconds else 0.0

    def row(self, student: str) -> Row:
        return next(r for r in self.rows if r.student == student)

    def table(self) -> str:
        width = max([len(r.student) for r in self.rows] + [7])
        lines = [
            f"{'student':<{width}}  {'score':>7}  {'tests':>7}  {'status':<8} notes",
            "-" * (width + 40),
        ]
        for r in self.rows:
            lines.append(
                f"{r.student:<{width}}  {r.score:>7g}  {r.auto:>7g}  {r.status:<8} {r.notes()}"
            )
        counts = {
            s: sum(r.status == s for r in self.rows)
            for s in ("graded", "held", "invalid", "failed")
        }
        maximum = max((r.max_score for r in self.rows), default=0)
        lines.append("-" * (width + 40))
        lines.append(
            f"{len(self.rows)} submissions of {self.lesson.assignment} (max {maximum:g} points): "
            + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        )
        if self.graded:
            lines.append(
                f"graded {self.graded} notebooks in {self.seconds:.0f} s on {self.workers} "
                "worker(s): "
                f"{self.per_minute:.1f} notebooks per minute"
            )
        for problem in self.problems:
            lines.append(f"PROBLEM: {problem}")
        return "\n".join(lines)


def collect(course: Path, lesson: Lesson, students: list[str], ledger: dict) -> list[Row]:
    """Each student's row, from the gradebook, the autograded notebooks and the ledger."""
    from nbgrader.api import MissingEntry

    rows = []
    with _gradebook(course / "gradebook.db") as gradebook:
        maximum = sum(
            c.max_score for c in gradebook.find_notebook(lesson.name, lesson.assignment).grade_cells
        )
        for student in students:
            entry = ledger.get(student, {})
            findings = [Finding.from_dict(f) for f in entry.get("findings", [])]
            if entry.get("status") in ("invalid", "failed"):
                rows.append(Row(student, entry["status"], 0.0, 0.0, maximum, findings))
                continue
            try:
                nb = gradebook.find_submission_notebook(lesson.name, lesson.assignment, student)
            except MissingEntry:
                rows.append(
                    Row(
                        student,
                        "failed",
                        0.0,
                        0.0,
                        maximum,
                        [Finding("not-graded", "invalid", "not in the gradebook (yet)")],
                    )
                )
                continue
            path = course / "autograded" / student / lesson.assignment / f"{lesson.name}.ipynb"
            meta = nbformat.read(path, 4).metadata.get(META, {}) if path.exists() else {}
            findings += [Finding.from_dict(f) for f in meta.get("findings", [])]
            score = sum(g.score or 0.0 for g in nb.grades)
            auto = sum(g.auto_score or 0.0 for g in nb.grades)
            failed = [g.name for g in nb.grades if (g.auto_score or 0.0) < g.max_score]
            held = nb.flagged and any(g.manual_score == 0 for g in nb.grades) and score < auto
            status = "held" if held or (nb.flagged and meta.get("held")) else "graded"
            rows.append(
                Row(student, status, score, auto, maximum, list(dict.fromkeys(findings)), failed)
            )
    return rows


def write_reports(course: Path, report: ClassReport) -> None:
    folder = course / REPORTS / report.lesson.assignment
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "grades.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            ["student", "status", "score", "autograder_score", "max_score", "failed_tests", "notes"]
        )
        for r in report.rows:
            out.writerow(
                [
                    r.student,
                    r.status,
                    r.score,
                    r.auto,
                    r.max_score,
                    " ".join(r.failed),
                    "; ".join(str(f) for f in r.findings),
                ]
            )
    lines = [f"# {report.lesson.assignment}: submissions to review", ""]
    todo = [r for r in report.rows if r.status != "graded"]
    if not todo:
        lines.append("Nothing to review: every submission was graded as handed in.")
    for r in todo:
        lines += [
            f"## {r.student}: {r.status}",
            "",
            f"score {r.score:g} / {r.max_score:g}; the tests gave {r.auto:g}",
            "",
        ]
        lines += [
            f"- **{f.severity}** `{f.kind}`: {f.message}" + (f" -- `{f.where}`" if f.where else "")
            for f in r.findings
        ]
        if r.status == "held":
            lines += [
                "",
                "After reviewing, release the points with "
                f"`make accept LESSON={report.lesson.assignment} STUDENT={r.student}`.",
            ]
        lines.append("")
    for problem in report.problems:
        lines.append(f"**PROBLEM**: {problem}")
    (folder / "review.md").write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- grading


def _nbgrader_command(
    lesson: Lesson, worker_db: Path, exclude: list[str], extra: list[str]
) -> list[str]:
    return nbgrader_command(
        "autograde",
        lesson.assignment,
        "--force",
        f"--db=sqlite:///{worker_db}",
        f"--CourseDirectory.student_id_exclude={','.join(exclude)}",
        *extra,
    )


def _run_batch(
    course: Path,
    lesson: Lesson,
    batch: list[str],
    everyone: list[str],
    work: Path,
    number: int,
    extra: list[str],
    threads: int,
) -> tuple[list[str], Path, int, str]:
    import subprocess

    worker_db = work / f"batch-{number}.db"
    shutil.copy2(course / "gradebook.db", worker_db)
    exclude = [s for s in everyone if s not in set(batch)]
    env = nbgrader_env(**({"COURSE_SANDBOX_THREADS": str(threads)} if threads else {}))
    log = work / f"batch-{number}.log"
    with log.open("w") as handle:
        result = subprocess.run(
            _nbgrader_command(lesson, worker_db, exclude, extra),
            cwd=course,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
    tail = log.read_text(errors="replace")[-3000:]
    return batch, worker_db, result.returncode, tail


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
        return _grade_class(
            Path(course), lesson, workers, force, batch_size, extra, progress, students
        )


def _grade_class(course, lesson, workers, force, batch_size, extra, progress, only) -> ClassReport:
    from tqdm.auto import tqdm

    from coursekit.course.sources import sync_sources

    course = Path(course).resolve()
    sync_sources(course)  # now, not by parallel nbgrader processes at once
    main = course / "gradebook.db"
    workers = workers or min(os.cpu_count() or 1, 8)
    extra = list(extra or [])
    folder = course / REPORTS / lesson.assignment
    if not main.exists():
        raise GradingError(
            f"{main} does not exist: run `nbgrader generate_assignment {lesson.assignment}` first"
        )
    with _gradebook(main) as gradebook:
        try:
            gradebook.find_assignment(lesson.assignment)
        except Exception as missing:  # noqa: BLE001 -- MissingEntry
            raise GradingError(
                f"{lesson.assignment} is not in {main}: run "
                f"`nbgrader generate_assignment {lesson.assignment}` first"
            ) from missing
    submitted = course / "submitted"
    everyone = sorted(d.parent.name for d in submitted.glob(f"*/{lesson.assignment}") if d.is_dir())
    if any("," in s for s in everyone):
        raise GradingError(
            "student ids with commas cannot be graded in batches: "
            + ", ".join(s for s in everyone if "," in s)
        )
    before = course_digest(course, lesson)
    ledger_path = folder / "ledger.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    with _gradebook(main) as gradebook:
        known = {s.student.id for s in gradebook.find_assignment(lesson.assignment).submissions}
    digests = {s: folder_digest(submitted / s / lesson.assignment) for s in everyone}
    todo = [
        s
        for s in everyone
        if (only is None or s in only)
        and (force or s not in known or ledger.get(s, {}).get("sha256") != digests[s])
    ]

    ref = integrity.Reference.from_course(course, lesson.assignment, lesson.name)
    invalid, valid = {}, []
    for student in todo:
        nb, found = integrity.read_submission(submitted / student / lesson.assignment, lesson.name)
        if nb is not None:
            found = [
                f for f in integrity.structure(nb, ref, lesson.root) if f.severity == "invalid"
            ]
        (invalid.__setitem__(student, found) if found else valid.append(student))
    if invalid:
        record_zero(main, lesson, sorted(invalid))
        for student, found in invalid.items():
            shutil.rmtree(course / "autograded" / student / lesson.assignment, ignore_errors=True)
            ledger[student] = {
                "sha256": digests[student],
                "status": "invalid",
                "findings": [f.to_dict() for f in found],
            }
        _write_json(ledger_path, ledger)

    start, graded = time.monotonic(), 0
    if valid:
        size = batch_size or max(1, min(8, math.ceil(len(valid) / (2 * workers))))
        batches = [valid[i : i + size] for i in range(0, len(valid), size)]
        work = Path(tempfile.mkdtemp(prefix="work-", dir=folder))
        threads = 1 if workers > 1 else 0
        lock, counter = threading.Lock(), iter(range(10**9))
        bar = tqdm(
            total=len(valid),
            desc=f"grading {lesson.assignment}",
            unit="nb",
            disable=not progress,
            file=sys.stderr,
            mininterval=2.0,
        )
        started = time.time()

        def finished() -> int:
            return sum(
                (
                    p := course / "autograded" / s / lesson.assignment / f"{lesson.name}.ipynb"
                ).exists()
                and p.stat().st_mtime >= started
                for s in valid
            )

        try:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:

                def submit(batch):
                    with lock:
                        number = next(counter)
                    return pool.submit(
                        _run_batch, course, lesson, batch, everyone, work, number, extra, threads
                    )

                pending = {submit(b) for b in batches}
                while pending:
                    done, pending = concurrent.futures.wait(
                        pending, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED
                    )
                    bar.update(finished() - bar.n)
                    for future in done:
                        batch, worker_db, code, tail = future.result()
                        ok = _graded_in(worker_db, lesson, course, batch)
                        if ok:
                            merge(main, worker_db, lesson.assignment, ok)
                            for student in ok:
                                ledger[student] = {"sha256": digests[student], "status": "graded"}
                            graded += len(ok)
                        lost = [s for s in batch if s not in ok]
                        if (
                            lost and len(batch) > 1
                        ):  # find the one that broke nbgrader: one at a time
                            pending |= {submit([s]) for s in lost}
                        elif lost:
                            shutil.rmtree(
                                course / "autograded" / lost[0] / lesson.assignment,
                                ignore_errors=True,
                            )
                            record_zero(main, lesson, lost)
                            ledger[lost[0]] = {
                                "sha256": digests[lost[0]],
                                "status": "failed",
                                "findings": [
                                    Finding(
                                        "grading-failed",
                                        "invalid",
                                        f"nbgrader could not grade it (exit code {code}): "
                                        f"{tail.strip().splitlines()[-1] if tail.strip() else ''}",
                                    ).to_dict()
                                ],
                            }
                        _write_json(ledger_path, ledger)
                        worker_db.unlink(missing_ok=True)
        finally:
            bar.update(finished() - bar.n)
            bar.close()
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - start

    after = course_digest(course, lesson)
    problems = [
        f"{path} changed during grading"
        for path in sorted(set(before) | set(after))
        if before.get(path) != after.get(path)
    ]
    report = ClassReport(
        lesson, collect(course, lesson, everyone, ledger), graded, seconds, workers, problems
    )
    write_reports(course, report)
    return report


def accept(course: Path, lesson: Lesson, student: str) -> None:
    """An instructor reviewed ``student``'s held submission: count its points (also after
    regrading)."""
    course = Path(course).resolve()
    path = course / "submitted" / student / lesson.assignment / f"{lesson.name}.ipynb"
    accepted = load_accepted(course, lesson.assignment)
    accepted[student] = submission_digest(path)
    _write_json(accepted_path(course, lesson.assignment), accepted)
    _replace_gradebook(
        course / "gradebook.db", lambda gb: release(gb, lesson.assignment, lesson.name, student)
    )


def report_only(course: Path, lesson: Lesson) -> ClassReport:
    course = Path(course).resolve()
    ledger_path = course / REPORTS / lesson.assignment / "ledger.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    everyone = sorted(
        d.parent.name for d in (course / "submitted").glob(f"*/{lesson.assignment}") if d.is_dir()
    )
    return ClassReport(lesson, collect(course, lesson, everyone, ledger))


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.grading.classgrade", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("lesson", help="the assignment, e.g. lesson01")
    parser.add_argument(
        "--course", type=Path, default=ROOT, help="the course folder (default: this repository)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel nbgrader processes (default: one per core, at most 8)",
    )
    parser.add_argument("--batch", type=int, default=None, help="students per nbgrader process")
    parser.add_argument("--force", action="store_true", help="grade every submission again")
    parser.add_argument(
        "--timeout", type=int, default=None, help="seconds a cell may run (default: the config's)"
    )
    parser.add_argument(
        "--memory", type=int, default=None, help="memory limit of a grading kernel, MiB"
    )
    parser.add_argument("--report", action="store_true", help="print the table, grade nothing")
    parser.add_argument(
        "--accept",
        metavar="STUDENT",
        action="append",
        default=[],
        help="release a held submission after reviewing it (repeatable)",
    )
    args = parser.parse_args(argv)
    item = find_lesson(args.lesson)
    extra = []
    if args.timeout:
        extra.append(f"--Execute.timeout={args.timeout}")
    if args.memory:
        extra.append(f"--SandboxKernelManager.memory_limit_mb={args.memory}")
    if args.accept:
        for student in args.accept:
            accept(args.course, item, student)
            print(f"released the hold on {student}")
        print(report_only(args.course, item).table())
        return 0
    if args.report:
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

"""Regrade requests: a learner asks, with a reason; an instructor answers; the points change
through nbgrader's own manual grade, and a record of both stays beside the gradebook.

    python -m coursekit.grading.regrades request lesson01 ann test_soft_lookup \\
        --reason "my soft_lookup is right for a batch of keys: see cell 12"
    python -m coursekit.grading.regrades answer lesson01 ann test_soft_lookup \\
        --points 3 --reply "right: the hidden test's tolerance was too tight for float32"
    python -m coursekit.grading.regrades answer lesson01 ann test_soft_lookup --keep \\
        --reply "the batch case returns the wrong shape: (2, 3, 4) for (3, 4)"
    python -m coursekit.grading.regrades list lesson01        # open requests first

The record is reports/<lesson>/regrades.csv: one row per request (when it was asked, by whom,
for which test cell, why; when and how it was answered, the cell's points and the late penalty
before and after). An answer with ``--points`` writes that test cell's manual score in the
gradebook, as formgrader does: nbgrader export, formgrader and the course's table then count
it, and grading the submission again keeps it (nbgrader never overwrites a manual score). The
late penalty is taken again from the new score, with the class's policy (course.toml), so that a
point given back is not penalised at the old score. A submission held for review is refused:
review it first (reports/<lesson>/review.md; ``make accept``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

from coursekit.course.lessons import ROOT, Lesson
from coursekit.course.lessons import lesson as find_lesson
from coursekit.grading import deadlines, gradebook
from coursekit.grading.holds import is_held
from coursekit.grading.report import REPORTS, write_tables

RECORD = "regrades.csv"  # in reports/<lesson>/


class RegradeError(ValueError):
    """The request or answer cannot be recorded; the message says why."""


@dataclass
class Request:
    requested: str  # when (UTC, ISO 8601)
    student: str
    cell: str  # the test cell's grade_id
    reason: str
    status: str = "open"  # open, changed or kept
    answered: str = ""
    reply: str = ""
    points_before: str = ""
    points_after: str = ""
    penalty_before: str = ""
    penalty_after: str = ""


def record_path(course: Path, lesson: Lesson) -> Path:
    return Path(course) / REPORTS / lesson.assignment / RECORD


def read(course: Path, lesson: Lesson) -> list[Request]:
    path = record_path(course, lesson)
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return [Request(**row) for row in csv.DictReader(handle)]


def _write(course: Path, lesson: Lesson, requests: list[Request]) -> None:
    path = record_path(course, lesson)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as handle:
        out = csv.DictWriter(handle, [f.name for f in fields(Request)])
        out.writeheader()
        out.writerows(asdict(r) for r in requests)
    tmp.replace(path)


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _grade(book, lesson: Lesson, student: str, cell: str):
    """The gradebook's notebook and grade of ``student``'s test cell ``cell``, checked."""
    from nbgrader.api import MissingEntry

    try:
        notebook = book.find_submission_notebook(lesson.name, lesson.assignment, student)
    except MissingEntry:
        raise RegradeError(f"{student} has no graded submission of {lesson.assignment}") from None
    grades = {g.name: g for g in notebook.grades}
    if cell not in grades:
        raise RegradeError(f"{lesson.assignment} has no test cell {cell!r}: {', '.join(grades)}")
    return notebook, grades[cell]


def request(course: Path, lesson: Lesson, student: str, cell: str, reason: str) -> Request:
    """Record ``student``'s request about test cell ``cell``, with their ``reason``."""
    if not reason.strip():
        raise RegradeError("a request needs a reason: what should be looked at, and why")
    with gradebook.open_gradebook(Path(course) / gradebook.FILENAME) as book:
        _grade(book, lesson, student, cell)
    requests = read(course, lesson)
    if any(r.student == student and r.cell == cell and r.status == "open" for r in requests):
        raise RegradeError(f"{student} already has an open request about {cell}")
    made = Request(_now(), student, cell, reason.strip())
    _write(course, lesson, [*requests, made])
    return made


def answer(course: Path, lesson: Lesson, student: str, cell: str, reply: str,
           points: float | None = None) -> Request:  # fmt: skip
    """Answer the open request of ``student`` about ``cell``: ``points`` (None: unchanged) as the
    cell's manual score in the gradebook, the late penalty taken again from the new score."""
    requests = read(course, lesson)
    found = [r for r in requests if r.student == student and r.cell == cell and r.status == "open"]
    if not found:
        raise RegradeError(f"{student} has no open request about {cell} ({RECORD})")
    if not reply.strip():
        raise RegradeError("an answer needs a reply: what was looked at, and what was decided")
    done = found[-1]

    def change(book) -> None:
        notebook, grade = _grade(book, lesson, student, cell)
        if is_held(notebook):
            accept = f"make accept LESSON={lesson.assignment} STUDENT={student}"
            raise RegradeError(
                f"{student}'s submission is held for review: review it first ({accept})"
            )
        if points is not None and not 0 <= points <= grade.max_score:
            raise RegradeError(f"{cell} is worth 0 to {grade.max_score:g} points, not {points:g}")
        done.points_before, done.penalty_before = f"{grade.score:g}", _penalty(notebook)
        if points is not None:
            grade.manual_score = float(points)
            grade.needs_manual_grade = False
            book.db.flush()
            book.db.expire_all()  # the scores nbgrader computes in SQL, read again
            notebook, grade = _grade(book, lesson, student, cell)
            notebook.late_submission_penalty = _new_penalty(course, book, lesson, student)
        done.points_after, done.penalty_after = f"{grade.score:g}", _penalty(notebook)

    gradebook.replace_gradebook(Path(course) / gradebook.FILENAME, change)
    done.status = "changed" if done.points_after != done.points_before else "kept"
    done.answered, done.reply = _now(), reply.strip()
    _write(course, lesson, requests)
    from coursekit.grading.classgrade import report_only  # (it imports much: only here)

    write_tables(course, report_only(course, lesson))  # grades.csv and points.csv say so now
    return done


def _penalty(notebook) -> str:
    return f"{float(notebook.late_submission_penalty or 0):g}"


def _new_penalty(course: Path, book, lesson: Lesson, student: str) -> float | None:
    """The class's late penalty on the notebook's score now (as AssignLatePenalties takes it)."""
    found = deadlines.load(course)
    submission = book.find_submission(lesson.assignment, student)
    notebook = book.find_submission_notebook(lesson.name, lesson.assignment, student)
    if found is None:
        return notebook.late_submission_penalty
    late = float(submission.total_seconds_late or 0.0)
    score = float(notebook.score)
    return min(score, max(0.0, found.policy.penalty(score, late))) if late > 0 else None


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coursekit.grading.regrades",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--course", type=Path, default=ROOT, help="the course folder")
    commands = parser.add_subparsers(dest="command", required=True)
    ask = commands.add_parser("request", help="record a learner's request")
    reply = commands.add_parser("answer", help="answer an open request")
    show = commands.add_parser("list", help="the requests of a lesson, open ones first")
    for command in (ask, reply, show):
        command.add_argument("lesson", help="the assignment, e.g. lesson01")
    for command in (ask, reply):
        command.add_argument("student")
        command.add_argument("cell", help="the test cell's grade_id, e.g. test_soft_lookup")
    ask.add_argument("--reason", required=True)
    reply.add_argument("--reply", required=True)
    how = reply.add_mutually_exclusive_group(required=True)
    how.add_argument("--points", type=float, help="the cell's points from now on")
    how.add_argument("--keep", action="store_true", help="the points stay as they are")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    item = find_lesson(args.lesson).in_course(Path(args.course).resolve())
    try:
        if args.command == "request":
            made = request(args.course, item, args.student, args.cell, args.reason)
        elif args.command == "answer":
            made = answer(args.course, item, args.student, args.cell, args.reply, args.points)
        else:
            print("\n".join(_listed(read(args.course, item))))
            return 0
    except RegradeError as problem:
        print(f"regrades: {problem}", file=sys.stderr)
        return 1
    print(_listed([made])[0])
    print(f"recorded in {record_path(args.course, item)}")
    return 0


def _listed(requests: list[Request]) -> list[str]:
    """One line per request, the open ones first."""
    lines = []
    for r in sorted(requests, key=lambda r: (r.status != "open", r.requested)):
        line = f"{r.status:8} {r.requested} {r.student} {r.cell}: {r.reason}"
        if r.answered:
            line += (f" -> points {r.points_before} to {r.points_after}, late penalty "
                     f"{r.penalty_before} to {r.penalty_after}: {r.reply}")  # fmt: skip
        lines.append(line)
    return lines


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m coursekit.democlass LESSON --students N``: build a synthetic class and grade it."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from coursekit.course.lessons import lesson as find_lesson
from coursekit.democlass.synthetic import build_synthetic
from coursekit.grading.classgrade import REPORTS, grade_class
from coursekit.grading.cluster import add_cluster_arguments
from coursekit.grading.tempcourse import GradingError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.democlass", description="grade a synthetic class of one lesson"
    )
    parser.add_argument(
        "lesson", nargs="?", default="lesson01", help="the assignment (default lesson01)"
    )
    parser.add_argument("--students", type=int, default=100, help="size of the class (default 100)")
    add_cluster_arguments(parser)  # --workers, --scheduler, --processes
    parser.add_argument("--batch", type=int, default=None, help="students per nbgrader process")
    parser.add_argument(
        "--timeout",
        type=int,
        default=10,
        help="seconds a cell may run (default 10: the class has infinite loops in it)",
    )
    parser.add_argument("--keep", type=Path, help="build the class here and keep it")
    args = parser.parse_args(argv)
    item = find_lesson(args.lesson)
    course = args.keep or Path(tempfile.mkdtemp(prefix="class-"))
    if course.exists() and any(course.iterdir()):
        raise SystemExit(f"{course} is not empty")
    print(
        f"building a synthetic class of {args.students} in {course} ...",
        file=sys.stderr,
        flush=True,
    )
    plan = build_synthetic(course, item, args.students)
    report = grade_class(
        course,
        item,
        args.workers,
        True,
        args.batch,
        [f"--Execute.timeout={args.timeout}"],
        scheduler=args.scheduler,
        processes=args.processes,
    )
    mix = {w: sum(v == w for v in plan.values()) for w in ("solved", "blank", "mistake", "bad")}
    print(report.table())
    print(
        "class: "
        + ", ".join(f"{n} {w}" for w, n in mix.items())
        + f"; reports in {course / REPORTS}"
    )
    if not args.keep:
        shutil.rmtree(course, ignore_errors=True)
    return 1 if report.problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GradingError as problem:
        sys.exit(f"democlass: {problem}")

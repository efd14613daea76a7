"""``python -m coursekit.democlass LESSON --students N``: build a synthetic class and grade it.

``--compare-sandboxes`` grades the same class in turns in bubblewrap and in the Python-only
sandbox (B, P, B, P: the machine's load drifts alike for both) and prints notebooks per minute
of each round with the load average, to measure what the operating-system boundary costs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from coursekit.course.lessons import lesson as find_lesson
from coursekit.democlass import copies, detection
from coursekit.democlass.synthetic import build_synthetic
from coursekit.grading.classgrade import REPORTS, grade_class
from coursekit.grading.cluster import add_cluster_arguments
from coursekit.grading.tempcourse import GradingError


def _parser() -> argparse.ArgumentParser:
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
    parser.add_argument(
        "--python-only-sandbox",
        action="store_true",
        help="grade in the Python-only sandbox (where bubblewrap cannot run)",
    )
    parser.add_argument(
        "--compare-sandboxes",
        action="store_true",
        help="grade the class in bubblewrap and in the Python-only sandbox, in turns, twice each",
    )
    return parser


def _grade(course: Path, item, args, python_only: bool, progress: bool = True):
    """The whole class graded again (--force), in the sandbox chosen, on the cluster chosen."""
    return grade_class(
        course,
        item,
        args.workers,
        True,
        args.batch,
        [f"--Execute.timeout={args.timeout}"],
        progress=progress,
        scheduler=args.scheduler,
        processes=args.processes,
        python_only=python_only,
    )


def _compare(course: Path, item, args) -> int:
    """Grade the class four times (bubblewrap, Python-only, bubblewrap, Python-only) and print
    each round's throughput beside the load average it ran under."""
    rates: dict[bool, list[float]] = {False: [], True: []}
    for python_only in (False, True, False, True):
        report = _grade(course, item, args, python_only, progress=False)
        what = report.sandboxes()[0] if report.sandboxes() else "?"
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"{what}: {report.per_minute:.1f} notebooks per minute (load {load})", flush=True)
        rates[python_only].append(report.per_minute)
        if report.problems:
            print("\n".join(f"PROBLEM: {p}" for p in report.problems))
            return 1
    mean = {k: sum(v) / len(v) for k, v in rates.items()}
    print(
        f"mean: bubblewrap {mean[False]:.1f}, Python-only {mean[True]:.1f} notebooks per minute "
        f"(bubblewrap at {100 * mean[False] / mean[True]:.0f} % of the Python-only throughput)"
    )
    return 0


def _similarity_measured(report) -> list[str]:
    """How the similarity report did: the planted copies it found in this class; then, on every
    lesson, the disguised copies the course's tests never planted that it finds and the honest
    pairs it flags (coursekit.democlass.detection), and how alike the course's independently
    written answers to one exercise come out."""
    found, planted = copies.planted_found(report.similarity)
    honest = copies.independent_answers()
    near = [p for p in honest if p.score >= report.similarity.threshold]
    alike = [p for p in honest if p.score >= report.similarity.exercise_threshold]
    worst = max(honest, key=lambda p: p.score, default=None)
    lines = [
        "(every answer of this synthetic class is the course's solution, or a small edit of it: "
        "most pairs are alike by construction; what counts here is the planted copies)",
        f"planted copies found: {found} of {planted} (renamed variables, reordered functions, "
        "changed comments: the pair of copy and original flagged)",
        *detection.measure().lines(),
        f"independent correct answers to one exercise: {len(alike)} of {len(honest)} pairs at "
        f"the exercise threshold {report.similarity.exercise_threshold:g}, {len(near)} at "
        f"{report.similarity.threshold:g} (each lesson's solution and alternatives.yml)",
    ]
    if worst:
        lines.append(
            f"  the most similar of them: {worst.score:.0%}, {worst.lesson} {worst.cell} "
            f"({worst.first} and {worst.second})"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    item = find_lesson(args.lesson)
    course = args.keep or Path(tempfile.mkdtemp(prefix="class-"))
    if course.exists() and any(course.iterdir()):
        raise SystemExit(f"{course} is not empty")
    say = f"building a synthetic class of {args.students} in {course} ..."
    print(say, file=sys.stderr, flush=True)
    plan = build_synthetic(course, item, args.students)
    if args.compare_sandboxes:
        code = _compare(course, item, args)
    else:
        report = _grade(course, item, args, args.python_only_sandbox)
        print(report.table())
        print("\n".join(report.after_deadline()))
        print("\n".join(_similarity_measured(report)))
        code = 1 if report.problems else 0
    kinds = ("solved", "blank", "mistake", "copy", "bad")
    mix = {w: sum(v == w for v in plan.values()) for w in kinds}
    mixed = ", ".join(f"{n} {w}" for w, n in mix.items())
    print(f"class: {mixed}; reports in {course / REPORTS}")
    if not args.keep:
        shutil.rmtree(course, ignore_errors=True)
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GradingError as problem:
        sys.exit(f"democlass: {problem}")

"""``python -m coursekit.bench.quotes --condition unpinned-2 lesson08``: execute solved lessons
under one condition (CPU kernels pinned or the machine's own, N threads) and list every string
their text quotes that no cell printed, and every cell that raised.

The book checks its quotes on one path (pinned kernels, one thread); a learner's machine takes
another. A quote that this finds missing under any condition is a number the text should not
state as printed (print it from the experiments' record, or from a deterministic computation).
Exits 1 when any quote is missing.
"""

from __future__ import annotations

import argparse
import sys

from coursekit.bench import conditions
from coursekit.bench.cells import raised
from coursekit.bench.lessons import execute_seconds
from coursekit.course import quoted
from coursekit.course.lessons import all_lessons, lesson
from coursekit.course.numerics import Condition, parse_condition


def missing_quotes(item, condition: Condition) -> tuple[float, list[str]]:
    """(seconds, the quotes of lesson ``item`` that no earlier cell printed) under ``condition``."""
    from coursekit.course.reading import source_to_notebook

    nb = source_to_notebook(item.source)
    with conditions.environment(condition):
        took = execute_seconds(nb, item.source.parent, keep_going=True)
    return took, raised(nb) + quoted.output_problems(nb)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.bench.quotes", description=__doc__)
    parser.add_argument("lessons", nargs="*", help="e.g. lesson08 (default: every lesson)")
    parser.add_argument(
        "--condition",
        action="append",
        type=parse_condition,
        help="pinned-N or unpinned-N (N threads); repeat for several (default: unpinned-2)",
    )
    args = parser.parse_args(argv)
    items = [lesson(name) for name in args.lessons] or all_lessons()
    status = 0
    for condition in args.condition or [parse_condition("unpinned-2")]:
        for item in items:
            took, found = missing_quotes(item, condition)
            status = status or int(bool(found))
            print(f"{item.assignment} ({condition.label}, {took:.0f} s): {len(found)} missing")
            print("".join(f"  - {line}\n" for line in found), end="", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

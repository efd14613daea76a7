"""``python -m coursekit.bench.cells lesson11 lesson12``: execute solved lessons top to bottom on
this machine, every cell even after one raised, and list the cells that raised.

For a machine the course has not met yet (a lent GPU, a Mac): ``make bench`` stops a lesson at its
first error, and one run here shows them all. Exits 1 when any cell raised.

``--slow SECONDS`` also lists every cell that took at least that long, with its time, whether it is
tagged ``experiment`` or ``slow``, and whether the text above it says how long it takes
(autograde_tests/test_long_cells.py holds the tagged ones to that): what to tag and describe.
Compare times on a quiet machine; the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import sys

from coursekit.bench.lessons import execute_seconds
from coursekit.course.lessons import all_lessons, lesson


def raised(nb) -> list[str]:
    """One line for each code cell of an executed notebook that raised: its index, its grade id
    (if it is a graded cell) and the error."""
    lines = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
                where = f"cell {index}" + (f" ({grade_id})" if grade_id else "")
                lines.append(f"  {where}: {output['ename']}: {output['evalue'][:600]}")
    return lines


def _seconds(cell) -> float | None:
    """How long a cell ran, from the times nbclient recorded in its metadata."""
    from datetime import datetime

    times = cell.get("metadata", {}).get("execution", {})
    start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def slow(nb, seconds: float) -> list[str]:
    """One line for each code cell that ran ``seconds`` or longer."""
    from coursekit.course.long_cells import is_long, says_how_long

    lines, above = [], ""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            above = cell.source
            continue
        took = _seconds(cell)
        if took is None or took < seconds:
            continue
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        where = f"cell {index}" + (f" ({grade_id})" if grade_id else "")
        tagged = "tagged" if is_long(cell) else "NOT tagged experiment or slow"
        said = "its time is said above" if says_how_long(above) else "NO time said above"
        lines.append(f"  {where}: {took:.1f} s; {tagged}; {said}")
    return lines


def main(argv: list[str] | None = None) -> int:
    from coursekit.course.reading import source_to_notebook

    parser = argparse.ArgumentParser(prog="python -m coursekit.bench.cells", description=__doc__)
    parser.add_argument("lessons", nargs="*", help="e.g. lesson11 (default: every lesson)")
    parser.add_argument("--slow", type=float, help="list the cells that took this many seconds")
    args = parser.parse_args(argv)
    if args.slow is not None:
        print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    items = [lesson(name) for name in args.lessons] or all_lessons()
    failed = 0
    for item in items:
        nb = source_to_notebook(item.source)
        took = execute_seconds(nb, item.source.parent, keep_going=True)
        lines = raised(nb)
        failed += bool(lines)
        print(
            f"{item.assignment}: {took:.1f} s, {len(lines)} cell{'s' * (len(lines) != 1)} raised",
            flush=True,
        )
        print("\n".join(lines), end="\n" if lines else "", flush=True)
        if args.slow is not None:
            print("\n".join(slow(nb, args.slow)) or "  no cell that slow", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

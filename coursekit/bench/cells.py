"""``python -m coursekit.bench.cells lesson11 lesson12``: execute solved lessons top to bottom on
this machine, every cell even after one raised, and list the cells that raised.

For a machine the course has not met yet (a lent GPU, a Mac): ``make bench`` stops a lesson at its
first error, and one run here shows them all. Exits 1 when any cell raised.
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    from coursekit.course.reading import source_to_notebook

    parser = argparse.ArgumentParser(prog="python -m coursekit.bench.cells", description=__doc__)
    parser.add_argument("lessons", nargs="*", help="e.g. lesson11 (default: every lesson)")
    args = parser.parse_args(argv)
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

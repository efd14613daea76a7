"""``make bench-book``: how long the book takes to build, from nothing and after an edit.

Prints three wall times for the solutions edition:
  full     from an empty book/_build/solutions (every lesson executed),
  no-op    a rebuild with nothing changed,
  one edit a rebuild after one lesson's code changed (that lesson alone is re-executed; the
           page is edited in book/lessons/, the generated copy, and restored afterwards).
"""

from __future__ import annotations

import shutil
import time

import nbformat

from coursekit.course.lessons import all_lessons
from coursekit.publishing.book import BOOK, PAGES, build, write_pages


def _timed(label: str, **kwargs) -> float:
    print(f"  building: {label} ...", flush=True)
    start = time.perf_counter()
    build("solutions", quiet=True, **kwargs)
    return time.perf_counter() - start


def main() -> None:
    lessons = all_lessons()
    print(f"Book build times, solutions edition, {len(lessons)} lesson(s):", flush=True)
    shutil.rmtree(BOOK / "_build" / "solutions", ignore_errors=True)
    full = _timed("full, from an empty build folder")
    noop = _timed("no-op rebuild")
    page = PAGES / f"{lessons[0].name}.ipynb"
    nb = nbformat.read(page, as_version=4)
    first_code = next(cell for cell in nb.cells if cell.cell_type == "code")
    first_code.source += "\n# edited by the benchmark"
    nbformat.write(nb, page)
    try:
        edit = _timed(f"after editing the code of {lessons[0].name}", pages=False)
    finally:
        write_pages("solutions")
        build("solutions", quiet=True)  # leave the cache as the sources say
    print(f"\n  {'build':<28}{'seconds':>8}")
    for label, seconds in (
        ("full (fresh)", full),
        ("no-op rebuild", noop),
        ("one lesson edited", edit),
    ):
        print(f"  {label:<28}{seconds:>8.1f}")


if __name__ == "__main__":
    main()

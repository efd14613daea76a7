"""Check the text the lessons quote from their output against the outputs of the book's build.

    python -m coursekit.publishing.quoted_output [lesson ...]             # after `make book`
    python -m coursekit.publishing.quoted_output --unmarked [lesson ...]  # numbers to look at

`make book` executes every lesson (every cell, the demonstrations that grading skips included)
and keeps each page's outputs in its jupyter-cache; this reads them there, so checking the
quotes executes nothing again. The cache answers only for a page whose code is the lesson's
current code: after an edit the check asks for `make book` rather than trust old outputs. The
format and its rules are coursekit.course.quoted's.

``--unmarked`` lists numbers in a lesson's prose that an earlier cell also printed but no
``<!-- from output: ... -->`` comment lists: candidates to mark (or to leave, when the prose
states a constant the code merely prints). It is for a writer to read, not a test.
"""

from __future__ import annotations

import argparse
import re
import sys

import nbformat

from coursekit.course import quoted
from coursekit.course.lessons import Lesson, all_lessons
from coursekit.publishing.book import BOOK, lesson_page

CACHE = BOOK / "_build" / "solutions" / "_build" / ".jupyter_cache"  # myst-nb's, in the build
# A number in prose worth a look: a decimal or scientific one with two significant digits or more,
# or a count with thousands separators; whole numbers alone are mostly the paper's constants.
NUMBER = re.compile(r"(?<![\w.,])[-\u2212]?\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])(?!\.\d)")


class NotExecuted(LookupError):
    """The book's cache holds no execution of the lesson's current code."""


def executed_lesson(item: Lesson) -> nbformat.NotebookNode:
    """The lesson's book page with the outputs the book's last build gave it."""
    from jupyter_cache import get_cache  # the book's own dependency (myst-nb)

    if not CACHE.is_dir():  # jupyter-cache would make an empty one
        raise NotExecuted(f"{item.assignment}: the book has not been built here: run `make book`")
    page = lesson_page(item, "solutions")
    try:
        _, executed = get_cache(CACHE).merge_match_into_notebook(page)
    except KeyError:
        raise NotExecuted(
            f"{item.assignment}: the book's cache ({CACHE.relative_to(item.root)}) has no"
            " execution of this lesson's current code: run `make book`"
        ) from None
    return executed


def problems(item: Lesson) -> list[str]:
    """Every problem with the lesson's quotes: their form, the text, the outputs."""
    found = quoted.source_problems(lesson_page(item, "solutions"))
    return found + quoted.output_problems(executed_lesson(item))


def _value(number: str) -> tuple[float, int] | None:
    """(value, significant digits) of a number as written, None for one not worth a look."""
    plain = number.replace("\u2212", "-").replace(",", "")
    mantissa = plain.lstrip("-").split("e")[0]
    digits = len(mantissa.replace(".", "").lstrip("0"))
    value = float(plain)
    if not ("." in plain or "e" in plain or "," in number) or digits < 2:
        return None
    if "," not in number and (2 * value).is_integer():  # 1.0, 1.5, 2.0: constants, not results
        return None
    return value, digits


def _printed_values(text: str) -> set[float]:
    return {float(n.replace("\u2212", "-").replace(",", "")) for n in NUMBER.findall(text)}


def unmarked(executed: nbformat.NotebookNode) -> list[str]:
    """Numbers in prose equal, at the precision the prose writes them, to a number an earlier
    cell printed ("0.28" and a printed "2.8e-01"), that no comment of their cell lists."""
    found, printed = [], set()
    for index, cell in enumerate(executed.cells):
        if cell.cell_type == "code":
            printed |= _printed_values(quoted.printed_text(cell))
        elif cell.cell_type == "markdown":
            listed = " ".join(quoted.quotes(cell.source)[0])
            for number in dict.fromkeys(NUMBER.findall(quoted.visible_text(cell.source))):
                value = _value(number)
                if value is None or quoted.contains(listed, number):
                    continue
                if any(float(f"{x:.{value[1]}g}") == value[0] for x in printed):
                    found.append(
                        f"{quoted.where(executed.cells, index)}: {number!r} is printed above"
                    )
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="e.g. lesson10 (default: every lesson)")
    parser.add_argument("--unmarked", action="store_true", help="list unmarked quoted numbers")
    args = parser.parse_args(argv)
    chosen = [it for it in all_lessons() if not args.lessons or it.assignment in args.lessons]
    status = 0
    for item in chosen:
        try:
            found = unmarked(executed_lesson(item)) if args.unmarked else problems(item)
        except NotExecuted as error:
            found, status = [str(error)], 1
        status = status or int(bool(found) and not args.unmarked)
        print(f"{item.assignment}: " + ("ok" if not found else f"{len(found)}"))
        print("".join(f"  - {line}\n" for line in found), end="")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

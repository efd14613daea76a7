"""nbgrader's cell metadata, read in one place (a cell without it reads as an empty dict)."""

from __future__ import annotations


def nbgrader_meta(cell) -> dict:
    """The cell's ``metadata.nbgrader`` (``{}`` when it has none or it is not a dict)."""
    meta = (cell.get("metadata") or {}).get("nbgrader") or {}
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    return nbgrader_meta(cell).get("grade_id")


def is_solution(cell) -> bool:
    """A cell the learner answers (its source is replaced by a stub in the student edition)."""
    return bool(nbgrader_meta(cell).get("solution"))


def is_autograded_answer(cell) -> bool:
    """An exercise the tests grade: a code cell the learner answers that earns no points itself
    (nbgrader's "Autograded answer": solution, not graded). Its points are in the test cells
    after it. A manually graded answer (graded and a solution: free text, or code a person
    reads) is not one."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("solution")) and not meta.get("grade")


def is_test(cell) -> bool:
    """A graded test cell (graded, not a solution)."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_graded(cell) -> bool:
    """A cell that earns points (a test cell, or a manually graded answer)."""
    return bool(nbgrader_meta(cell).get("grade"))


BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def split_hidden(sources) -> tuple[list[str], list[str]]:
    """(hidden, visible): the stripped, non-empty lines of ``sources`` (cell sources, or the text
    of a lesson's source file) inside and outside nbgrader's hidden-test markers, in order."""
    hidden, visible = [], []
    for source in [sources] if isinstance(sources, str) else sources:
        inside = False
        for line in source.splitlines():
            if BEGIN_HIDDEN in line:
                inside = True
            elif END_HIDDEN in line:
                inside = False
            elif line.strip():
                (hidden if inside else visible).append(line.strip())
    return hidden, visible

"""What ``make check`` prints: each lesson's table, then a summary of every lesson.

Written for the learner who reads it: an exercise never attempted reads "not attempted" (its
stub still raises NotImplementedError), a lesson never opened "not started" (and is not graded at
all), a failure that only a hidden test found says so (the learner saw the visible tests pass in
the notebook), and the other cells that raised are named by where they are in the lesson.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

import nbformat

from attention_ref.hints import defined_names
from coursekit.course.cells import grade_id, is_graded, is_solution, nbgrader_meta
from coursekit.course.lessons import Lesson
from coursekit.grading.feedback import hidden_outcome
from coursekit.grading.results import NotebookResult

NOT_ATTEMPTED = "NotImplementedError"
_HEADING = re.compile(r"^#{1,3} +(.+)$", re.MULTILINE)


@dataclass
class LessonCheck:
    """One lesson as ``make check`` found it."""

    lesson: Lesson
    max_score: float  # the lesson's points, from its student edition
    result: NotebookResult | None = None  # None: not graded (not started, or no copy)
    state: str = "graded"  # graded, not started, no copy
    hidden: set[str] = field(default_factory=set)  # test cells that failed in a hidden test
    others: list[str] = field(default_factory=list)  # other cells that raised, named
    # {name: the cell that should have defined it, and what it raised}
    broken: dict[str, str] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.result.auto if self.result is not None else 0.0


def points(nb: nbformat.NotebookNode) -> float:
    return float(sum(nbgrader_meta(c).get("points", 0) for c in nb.cells if is_graded(c)))


def started(mine: nbformat.NotebookNode, edition: nbformat.NotebookNode) -> bool:
    """Whether the learner wrote anything into an answer cell of their copy."""
    stubs = {grade_id(c): c.source.strip() for c in edition.cells if is_solution(c)}
    return any(
        is_solution(c) and c.source.strip() != stubs.get(grade_id(c), c.source.strip())
        for c in mine.cells
    )


def read_graded(check: LessonCheck, autograded: nbformat.NotebookNode) -> None:
    """Which failures came from hidden tests, and which other cells raised (named as the grader's
    notes name cells: by grade_id, else "cell N", counting every cell from 1)."""
    heading = "the top of the lesson"
    for number, cell in enumerate(autograded.cells, 1):
        if cell.cell_type == "markdown":
            found = _HEADING.findall(cell.source)
            heading = found[-1].strip() if found else heading
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if not errors:
            continue
        if is_graded(cell):
            if "BEGIN HIDDEN TESTS" in cell.source and hidden_outcome(cell)[0] == "failed":
                check.hidden.add(grade_id(cell))
            continue
        name = grade_id(cell) or f"cell {number}"
        message = f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}"
        check.others.append(f'{name}, in "{heading}": {message.splitlines()[0][:90]}')
        for defined in defined_names(cell.source):
            check.broken.setdefault(defined, f'{name}, in "{heading}"')


def _verdict(check: LessonCheck, cell) -> str:
    if cell.passed:
        return "passed"
    if cell.message.startswith(NOT_ATTEMPTED):
        return "not attempted"
    if cell.grade_id in check.hidden:
        return "FAILED in a hidden test (the visible ones passed)"
    return "FAILED"


def _broken_cell(check: LessonCheck, message: str) -> list[str]:
    """For a test that failed on a name its cell never defined: that cell raised (below)."""
    found = re.match(r"NameError: name '(\w+)' is not defined", message)
    if not found or found.group(1) not in check.broken:
        return []
    name = found.group(1)
    return [
        f"(the cell that defines {name} raised before it did: {check.broken[name]},",
        "listed below; fix that cell first)",
    ]


def lesson_table(check: LessonCheck) -> str:
    """The lesson's test cells, their points and what happened, with each failure's message."""
    result = check.result
    width = max(len(c.grade_id) for c in result.cells) + 2
    lines = [
        f"{result.lesson.assignment} ({result.lesson.name})",
        f"  {'test cell':<{width}}{'points':>9}  result",
    ]
    for cell in result.cells:
        verdict = _verdict(check, cell)
        lines.append(f"  {cell.grade_id:<{width}}{cell.score:>4g} / {cell.max_score:<3g} {verdict}")
        if verdict.startswith("FAILED"):
            message = cell.message or "(no message)"
            lines += [" " * (width + 16) + part for part in message.splitlines()[:6]]
            lines += [" " * (width + 16) + part for part in _broken_cell(check, message)]
    lines.append(f"  {'total':<{width}}{result.auto:>4g} / {result.max_score:<3g}")
    if check.others:
        lines.append("  Other cells that raised (a figure or demo that runs an unfinished answer):")
        lines += [f"    {line}" for line in check.others[:8]]
    if result.held:
        lines.append("  An instructor's grader would hold these points until someone reads it:")
    elif result.findings:
        lines.append("  Notes from the grader:")
    for finding in result.findings[:8]:  # whole words, over lines: never cut mid-word
        lines += textwrap.wrap(
            str(finding), 100, initial_indent="    ", subsequent_indent="      ",
            break_long_words=False, max_lines=4, placeholder=" ...",
        )  # fmt: skip
    return "\n".join(lines)


def _state(check: LessonCheck) -> str:
    if check.result is None:
        return check.state
    failed = [c for c in check.result.cells if not c.passed]
    blank = sum(c.message.startswith(NOT_ATTEMPTED) for c in failed)
    hidden = len(check.hidden & {c.grade_id for c in failed})
    parts = [f"{len(failed) - blank} failed"] if len(failed) > blank else []
    parts += [f"of which {hidden} in hidden tests"] if hidden else []
    parts += [f"{blank} not attempted"] if blank else []
    return ", ".join(parts) or "all passed"


def summary(checks: list[LessonCheck]) -> str:
    """A line per lesson and the total, over the lessons started and over all of them."""
    lines = ["Summary", f"  {'lesson':<10}{'points':>13}  state"]
    for check in checks:
        got = f"{check.score:g}" if check.result is not None else "-"
        lines.append(
            f"  {check.lesson.assignment:<10}{got:>6} / {check.max_score:<5g} {_state(check)}"
        )
    graded = [c for c in checks if c.result is not None]
    total = sum(c.score for c in graded)
    mine = sum(c.max_score for c in graded)
    started = (
        f"({len(graded)} of {len(checks)} lessons started: {total:g} / {mine:g} of theirs)"
        if graded
        else "(no lesson started yet: write an answer in work/, save, then make check)"
    )
    lines.append(f"  {'overall':<10}{total:>6g} / {sum(c.max_score for c in checks):<5g} {started}")
    return "\n".join(lines)

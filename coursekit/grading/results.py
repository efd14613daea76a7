"""What grading gave each student: the one reader of graded results.

It reads the gradebook (the scores that count, holds), the autograded notebook (each test cell's
message, errors in other cells, the grader's findings) and the class-grading ledger (submissions
that could not be graded at all). ``make check``, the chain tests and the class report all read
results here.

Status of a submission: ``graded`` (points as earned), ``held`` (graded, points withheld until
reviewed: coursekit.grading.holds), ``invalid`` (nothing gradable: 0 and a note saying what to
do) or ``failed`` (nbgrader itself could not grade it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import nbformat

from coursekit.course.cells import grade_id, is_graded
from coursekit.course.lessons import Lesson
from coursekit.grading.gradebook import FILENAME, open_gradebook
from coursekit.grading.holds import is_held
from coursekit.grading.integrity import META, Finding


@dataclass
class CellResult:
    grade_id: str
    score: float  # what the tests gave
    max_score: float
    message: str = ""  # "ExceptionName: message" of a failed test cell; never its code
    manual: float | None = None  # an instructor's grade (formgrader, a regrade), if any

    @property
    def passed(self) -> bool:
        return self.score == self.max_score


@dataclass
class NotebookResult:
    student: str
    lesson: Lesson
    status: str  # graded, held, invalid or failed
    score: float  # what the gradebook counts (0 while held), less the late penalty
    max_score: float
    cells: list[CellResult] = field(default_factory=list)  # in the notebook's order
    errors: list[str] = field(default_factory=list)  # errors in cells that are not test cells
    findings: list[Finding] = field(default_factory=list)  # coursekit.grading.integrity
    sandbox: str = ""  # what the notebook was graded in: bubblewrap or the Python-only sandbox
    submitted: datetime | None = None  # nbgrader's timestamp of the submission (UTC)
    seconds_late: float = 0.0  # after the due date and the student's extension
    late_penalty: float = 0.0  # points nbgrader's AssignLatePenalties took (coursekit.deadlines)

    @property
    def auto(self) -> float:
        """What the autograder's tests gave (also while the points are held)."""
        return sum(cell.score for cell in self.cells)

    @property
    def held(self) -> bool:
        return self.status == "held"

    @property
    def failed(self) -> set[str]:
        """Test cells that lost points."""
        return {cell.grade_id for cell in self.cells if not cell.passed}


def cell_messages(notebook) -> tuple[dict[str, str], list[str]]:
    """Messages of failed test cells by grade_id, and errors raised in other cells."""
    by_id, others = {}, []
    for cell in notebook.cells:
        errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
        if not errors:
            continue
        text = "; ".join(
            f"{err.get('ename', 'Error')}: {err.get('evalue', '')}".strip() for err in errors
        )
        if is_graded(cell):
            by_id[grade_id(cell)] = text
        else:
            others.append(text)
    return by_id, others


def findings_of(notebook) -> list[Finding]:
    """What the grader recorded in an autograded notebook's metadata."""
    return [Finding.from_dict(f) for f in notebook.metadata.get(META, {}).get("findings", [])]


def _graded(gradebook, lesson: Lesson, student: str, maximum: float) -> NotebookResult:
    """A submission nbgrader graded: scores from the gradebook, messages from the notebook."""
    nb = gradebook.find_submission_notebook(lesson.name, lesson.assignment, student)
    submission = gradebook.find_submission(lesson.assignment, student)
    penalty = float(nb.late_submission_penalty or 0.0)
    path = lesson.autograded(student)
    notebook = nbformat.read(path, as_version=4) if path.exists() else nbformat.v4.new_notebook()
    messages, errors = cell_messages(notebook)
    order = [grade_id(c) for c in notebook.cells if is_graded(c)]
    grades = sorted(nb.grades, key=lambda g: order.index(g.name) if g.name in order else len(order))
    held = is_held(nb)
    cells = [
        CellResult(g.name, float(g.auto_score or 0.0), float(g.max_score), messages.get(g.name, ""),
                   None if held or g.manual_score is None else float(g.manual_score))
        for g in grades
    ]  # fmt: skip
    return NotebookResult(
        student,
        lesson,
        "held" if held else "graded",
        # as nbgrader's export counts it: never below 0
        score=max(0.0, float(sum(g.score or 0.0 for g in nb.grades)) - penalty),
        max_score=maximum,
        cells=cells,
        errors=errors,
        findings=list(dict.fromkeys(findings_of(notebook))),
        sandbox=notebook.metadata.get(META, {}).get("sandbox", ""),
        submitted=submission.timestamp,
        seconds_late=float(submission.total_seconds_late or 0.0),
        late_penalty=penalty,
    )


def _read_one(gradebook, lesson: Lesson, student: str, entry: dict, maximum: float):
    from nbgrader.api import MissingEntry

    findings = [Finding.from_dict(f) for f in entry.get("findings", [])]
    if entry.get("status") in ("invalid", "failed"):
        return NotebookResult(student, lesson, entry["status"], 0.0, maximum, findings=findings)
    try:
        result = _graded(gradebook, lesson, student, maximum)
    except MissingEntry:
        missing = Finding("not-graded", "invalid", "not in the gradebook (yet)")
        return NotebookResult(student, lesson, "failed", 0.0, maximum, findings=[missing])
    result.findings = list(dict.fromkeys(findings + result.findings))
    return result


def read_results(
    course: Path, lesson: Lesson, students: list[str] | None = None, ledger: dict | None = None
) -> dict[str, NotebookResult]:
    """{student: NotebookResult} of ``lesson`` in ``course`` (default: everyone who handed it
    in); ``ledger`` is class grading's record of submissions that never reached nbgrader."""
    lesson = lesson.in_course(course)
    ledger = ledger or {}
    with open_gradebook(Path(course) / FILENAME) as gradebook:
        cells = gradebook.find_notebook(lesson.name, lesson.assignment).grade_cells
        maximum = float(sum(c.max_score for c in cells))
        names = lesson.students() if students is None else students
        return {s: _read_one(gradebook, lesson, s, ledger.get(s, {}), maximum) for s in names}

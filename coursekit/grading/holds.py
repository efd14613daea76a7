"""Holding a submission's points for review, and releasing them: the one definition of "held".

A submission is **held** when the autograder found something an instructor must look at
(coursekit.grading.integrity's ``review`` findings): it is graded, but its points are withheld.
In the gradebook that is: the notebook is flagged and every grade has a manual score of 0 that
"needs manual grading" (formgrader lists it). An instructor either grades it by hand in
formgrader (a real manual score ends the hold) or accepts it (``make accept``), which records the
submission's hash so that regrading the same file does not hold it again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ACCEPTED = "accepted.json"  # in reports/<lesson>/: {student: sha256 of the accepted notebook}


def is_held(submission_notebook) -> bool:
    """Whether a gradebook ``SubmittedNotebook`` is held (see the module's docstring)."""
    grades = list(submission_notebook.grades)
    return bool(
        submission_notebook.flagged
        and grades
        and all(g.manual_score == 0 and g.needs_manual_grade for g in grades)
    )


def hold(gradebook, assignment: str, notebook: str, student: str) -> None:
    """Withhold a submission's points until reviewed: manual score 0 on every grade, flagged."""
    submission = gradebook.find_submission_notebook(notebook, assignment, student)
    submission.flagged = True
    for grade in submission.grades:
        grade.manual_score = 0.0
        grade.needs_manual_grade = True
    gradebook.db.commit()


def release(gradebook, assignment: str, notebook: str, student: str) -> bool:
    """Undo :func:`hold`: the autograder's scores count again. Also clears the flag an earlier
    invalid hand-in left. Never touches a real manual grade (an instructor's, not 0). Returns
    whether there was anything to undo."""
    submission = gradebook.find_submission_notebook(notebook, assignment, student)
    grades = list(submission.grades)
    if not submission.flagged or any(g.manual_score not in (None, 0) for g in grades):
        return False
    submission.flagged = False
    for grade in grades:
        grade.manual_score = None
        grade.needs_manual_grade = grade.auto_score is None
    gradebook.db.commit()
    return True


def submission_digest(path: Path) -> str:
    """sha256 of a submitted notebook: what an instructor's acceptance refers to."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def accepted_path(root: Path, assignment: str) -> Path:
    return Path(root) / "reports" / assignment / ACCEPTED


def load_accepted(root: Path, assignment: str) -> dict[str, str]:
    path = accepted_path(root, assignment)
    return json.loads(path.read_text()) if path.exists() else {}


def is_accepted(root: Path, assignment: str, student: str, submitted: Path) -> bool:
    """Whether an instructor accepted exactly this submitted file."""
    digest = submission_digest(submitted) if Path(submitted).exists() else ""
    return bool(digest) and load_accepted(root, assignment).get(student) == digest

"""The course's gradebook (nbgrader's SQLite file): opened, changed atomically, merged.

One SQLite file takes one writer, so class grading gives every parallel ``nbgrader autograde``
process its own copy; the students it graded come back as plain values (:func:`records`, read on
the Dask worker that graded them) and are merged into the course's gradebook here, by one process.
Every change is made to a copy that is then renamed over the gradebook, so an interrupted run
leaves it as it was after the last complete change.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

from coursekit.course.lessons import Lesson

FILENAME = "gradebook.db"


def open_gradebook(path: Path):
    """nbgrader's ``Gradebook`` on the SQLite file ``path`` (a context manager)."""
    from nbgrader.api import Gradebook  # slow to import: only where a gradebook is opened

    return Gradebook(f"sqlite:///{path}")


# What SQLite keeps beside a database file while a transaction is open: a run killed mid-change
# leaves them behind, a journal with the pages as they were before that change.
_SIDE_FILES = ("-journal", "-wal", "-shm")


def replace_gradebook(main: Path, change) -> None:
    """Apply ``change(gradebook)`` to a copy of ``main``, then rename the copy over it."""
    from sqlalchemy.exc import SAWarning

    tmp = main.with_name(main.name + ".merging")
    # A merge killed mid-transaction leaves gradebook.db.merging-journal. SQLite takes a journal
    # beside a file for that file's and, on the next open, writes its old pages back: into the
    # fresh copy made below, undoing every grade merged since (found by the hostile class's
    # interrupted run: a student's comments gone, feedback refused). Nothing of an earlier copy
    # may stay.
    for leftover in [tmp, *(tmp.with_name(tmp.name + side) for side in _SIDE_FILES)]:
        leftover.unlink(missing_ok=True)
    _copy_database(main, tmp)
    with open_gradebook(tmp) as gradebook, warnings.catch_warnings():
        # nbgrader's add_submission autoflushes early; harmless
        warnings.simplefilter("ignore", SAWarning)
        change(gradebook)
        gradebook.db.commit()
    os.replace(tmp, main)


def _copy_database(source: Path, target: Path) -> None:
    """``source`` as SQLite reads it, into a new file ``target``: through SQLite's backup, so a
    journal a killed writer (nbgrader's formgrader writes the gradebook in place) left beside
    ``source`` is rolled back first, as it belongs, instead of being left out of a byte copy."""
    import sqlite3

    reading, writing = sqlite3.connect(source), sqlite3.connect(target)
    try:
        reading.backup(writing)
    finally:
        reading.close()
        writing.close()
    shutil.copymode(source, target)  # as the byte copy did: who may read the grades stays


def require_assignment(main: Path, assignment: str) -> None:
    """A clear error when the gradebook or the assignment in it is missing."""
    from nbgrader.api import MissingEntry

    todo = f"run `nbgrader generate_assignment {assignment}` first"
    if not main.exists():
        raise FileNotFoundError(f"{main} does not exist: {todo}")
    with open_gradebook(main) as gradebook:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            raise LookupError(f"{assignment} is not in {main}: {todo}") from None


def known_students(main: Path, assignment: str) -> set[str]:
    """Students with a submission of ``assignment`` in the gradebook."""
    with open_gradebook(main) as gradebook:
        return {s.student.id for s in gradebook.find_assignment(assignment).submissions}


def records(worker: Path, assignment: str, students: list[str]) -> list[tuple]:
    """Everything the ``worker`` gradebook knows about these students' submissions, as plain
    values (names, timestamp, extension, flags, late penalties, scores, comments): what a
    grading task hands back to the one process that writes the course's gradebook
    (:func:`merge_records`)."""
    with open_gradebook(worker) as source:
        return [_record(source, assignment, student) for student in students]


def _record(source, assignment: str, student: str) -> tuple:
    person = source.find_student(student)
    submission = source.find_submission(assignment, student)
    notebooks = []
    for nb in submission.notebooks:
        grades = {
            g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
            for g in nb.grades
        }
        comments = {c.name: (c.auto_comment, c.manual_comment) for c in nb.comments}
        notebooks.append((nb.name, nb.flagged, nb.late_submission_penalty, grades, comments))
    names = {k: getattr(person, k) for k in ("first_name", "last_name", "email")}
    return (student, names, submission.timestamp, submission.extension, notebooks)


def merge_records(main: Path, assignment: str, records: list[tuple]) -> None:
    """Write :func:`records` (read from a worker's gradebook) into the ``main`` gradebook."""

    def change(gradebook):
        for student, person, timestamp, extension, notebooks in records:
            gradebook.update_or_create_student(student, **person)
            gradebook.update_or_create_submission(
                assignment, student, timestamp=timestamp, extension=extension
            )
            for name, flagged, penalty, grades, comments in notebooks:
                nb = gradebook.find_submission_notebook(name, assignment, student)
                nb.flagged, nb.late_submission_penalty = flagged, penalty
                for grade in nb.grades:
                    values = grades[grade.name]
                    grade.auto_score, grade.manual_score = values[0], values[1]
                    grade.extra_credit, grade.needs_manual_grade = values[2], values[3]
                for comment in nb.comments:
                    comment.auto_comment, comment.manual_comment = comments[comment.name]

    replace_gradebook(main, change)


def record_zero(main: Path, lesson: Lesson, students: list[str]) -> None:
    """Students whose submission could not be graded: 0 points, flagged."""

    def change(gradebook):
        for student in students:
            gradebook.update_or_create_student(student)
            gradebook.update_or_create_submission(lesson.assignment, student)
            nb = gradebook.find_submission_notebook(lesson.name, lesson.assignment, student)
            nb.flagged = True
            for grade in nb.grades:
                grade.auto_score, grade.manual_score, grade.needs_manual_grade = 0.0, None, False

    replace_gradebook(main, change)


def graded_in(worker: Path, lesson: Lesson, students: list[str]) -> list[str]:
    """The students of a batch that nbgrader graded completely (``lesson`` in its course)."""
    from nbgrader.api import MissingEntry

    done = []
    with open_gradebook(worker) as gradebook:
        for student in students:
            try:
                nb = gradebook.find_submission_notebook(lesson.name, lesson.assignment, student)
            except MissingEntry:
                continue
            if lesson.autograded(student).exists() and all(
                g.auto_score is not None for g in nb.grades
            ):
                done.append(student)
    return done

"""Grades into the LMS: nbgrader exporters for Canvas's and Moodle's gradebook import files.

    nbgrader export --exporter=coursekit.grading.lms.CanvasExport --to=canvas.csv
    nbgrader export --exporter=coursekit.grading.lms.MoodleExport --to=moodle.csv

Both are nbgrader ``ExportPlugin`` subclasses, so they read the gradebook exactly as stock
``nbgrader export`` does: one score per student and lesson, the late penalty taken off and never
below 0, and 0 for a lesson not handed in once it is due. A submission whose points are held for
review (coursekit.grading.holds) gets no grade (Canvas: blank; Moodle: ``-``, its "no grade":
Moodle reads a blank cell as 0 for a new grade item), and is named in the log: the LMS would
otherwise show a failing grade for work that is only waiting for a look. A lesson that is not
due yet (its due date plus every extension, course.toml) is left out, with a note in the log,
unless it is asked for by name (``--assignment lesson02``): then work not handed in yet gets no
grade either.

The LMS knows its students by its own ids, which the class's roster (classroom/roster.csv, read
by coursekit.course.coursefile) carries beside the account names: ``name``, ``email``,
``lms_id``, ``sis_user_id``, ``sis_login_id``, ``section``. A student in the gradebook who is
not in the roster, or a rostered student without the id the LMS matches on, stops the export
with a message that names them: a grade the LMS cannot place is a grade lost.

* **Canvas** (Grades > Import): the columns ``Student, ID, SIS User ID, SIS Login ID, Section``,
  then one column per lesson named ``lesson01`` or, when ``[lms.canvas_assignments]`` in
  course.toml gives the Canvas assignment's id, ``lesson01 (12345)``; a second row ``Points
  Possible`` with each lesson's maximum. Canvas matches a row on ID, then SIS User ID, then SIS
  Login ID: a student needs one of ``lms_id``, ``sis_user_id``, ``sis_login_id``.
* **Moodle** (Grades > Import > CSV file): one identifier column and one column per lesson;
  on import, "Map from" the identifier column "Map to" the same user field and map each lesson
  column to its grade item, made first with the lesson's maximum as its maximum grade (the log
  names each maximum): a grade item the import makes is out of 100, and the file cannot say
  otherwise. One student Moodle does not know by that field (or two who share it) stops the
  whole import: export only those it knows (``--student``). ``[lms] moodle_identifier`` picks
  the identifier:
  ``email`` (the default; the roster's ``email``), ``username`` (the roster's ``username``) or
  ``idnumber`` (the roster's ``sis_user_id``).

Examples of both files, for the class in autograde_tests/test_after_deadline.py, are in
docs/lms/.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import ExportPlugin

from coursekit.course import coursefile
from coursekit.course.coursefile import CourseFileError, Member
from coursekit.grading import deadlines
from coursekit.grading.holds import is_held

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "Points Possible"
# [lms] moodle_identifier -> (the column's header, as Moodle's own export names it; the field)
MOODLE_IDENTIFIERS = {
    "email": ("Email address", "email"),
    "username": ("Username", "username"),
    "idnumber": ("ID number", "sis_user_id"),
}


class ExportError(ValueError):
    """The grades cannot be exported as asked; the message says why and for whom."""


@dataclass
class Grades:
    """What the gradebook holds, as stock nbgrader export counts it."""

    assignments: list[tuple[str, float]]  # (name, maximum), in the gradebook's order
    scores: dict[tuple[str, str], float | None]  # (student, assignment) -> score; None: no grade
    students: list[str]  # every student in the gradebook
    held_ones: set[tuple[str, str]] = field(default_factory=set)  # (student, assignment)
    open_ones: frozenset[str] = frozenset()  # assignments not due yet

    def held(self) -> list[str]:
        return sorted(f"{s} ({a})" for s, a in self.held_ones)

    def score(self, student: str, assignment: str) -> float | None:
        """What ``student`` gets for ``assignment`` (also a student the gradebook does not know:
        nothing handed in)."""
        missing = None if assignment in self.open_ones else 0.0
        return self.scores.get((student, assignment), missing)


def read_grades(gradebook, assignments=None, students=(), open_ones=()) -> Grades:
    """The scores of ``gradebook`` (nbgrader's Gradebook), only the ``assignments`` (default:
    all; none if it is empty) and ``students`` (default: all) named; no grade (None) for what is
    held, and for what is not handed in of an assignment in ``open_ones`` (not due yet)."""
    from nbgrader.api import MissingEntry

    chosen = [a for a in gradebook.assignments if assignments is None or a.name in assignments]
    people = [s.id for s in gradebook.students if not students or s.id in students]
    scores: dict[tuple[str, str], float | None] = {}
    held_ones = set()
    for assignment in chosen:
        for student in people:
            try:
                submission = gradebook.find_submission(assignment.name, student)
            except MissingEntry:  # nothing handed in: 0 once it is due
                scores[student, assignment.name] = None if assignment.name in open_ones else 0.0
                continue
            held = any(is_held(nb) for nb in submission.notebooks)
            penalty = submission.late_submission_penalty or 0.0
            score = max(0.0, submission.score - penalty)
            scores[student, assignment.name] = None if held else score
            if held:
                held_ones.add((student, assignment.name))
    return Grades([(a.name, float(a.max_score)) for a in chosen], scores, people, held_ones,
                  frozenset(open_ones))  # fmt: skip


def _number(value: float | None, none: str = "") -> str:
    return none if value is None else f"{round(value, 2):g}"


def not_due(course: Path, names: list[str]) -> dict[str, datetime]:
    """{assignment: when it is due, with every extension} of ``names`` not due yet."""
    found = deadlines.load(course)
    now = datetime.now(UTC)
    due = {name: found.last_due(name) for name in names} if found else {}
    return {name: when for name, when in due.items() if when is not None and when > now}


class _LmsExport(ExportPlugin):
    """What both exporters share: the class's roster and settings, the checks, the file."""

    default_file = "lms.csv"

    def export(self, gradebook) -> None:
        try:
            course = Path(CourseDirectory(config=self.config).root)
            path = coursefile.course_file(course)
            settings = coursefile.table(coursefile.read(path), "lms", path, required=False)
            roster = coursefile.read_roster(coursefile.roster_path(path))
            asked = [str(a) for a in self.assignment]
            waiting = not_due(course, [a.name for a in gradebook.assignments])
            left_out = {a: w for a, w in waiting.items() if not asked}
            chosen = asked or [a.name for a in gradebook.assignments if a.name not in left_out]
            grades = read_grades(gradebook, chosen, [str(s) for s in self.student], waiting)
            people = _rostered(grades, roster, path)
            if self.student:  # nbgrader export --student [...]: only these
                people = [m for m in people if m.username in {str(s) for s in self.student}]
            rows = self.rows(grades, people, settings, path)
        except (ExportError, CourseFileError) as problem:
            self.log.error("%s", problem)
            sys.exit(1)
        for name, when in left_out.items():
            self.log.warning(
                "%s left out: it is due, with every extension, at %s UTC (name it with "
                "--assignment %s to export it anyway)", name, f"{when:%Y-%m-%d %H:%M}", name
            )  # fmt: skip
        if grades.held():
            self.log.warning(
                "no grade, held for review (make accept after a look): %s",
                ", ".join(grades.held()),
            )
        self.announce(grades)
        destination = self.to or self.default_file
        with open(destination, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)
        self.log.info("wrote the grades of %d students to %s", len(people), destination)

    def rows(self, grades: Grades, people: list[Member], settings: dict, path: Path):
        raise NotImplementedError

    def announce(self, grades: Grades) -> None:
        """What the instructor must do in the LMS before importing (nothing by default)."""


def _rostered(grades: Grades, roster: list[Member], path: Path) -> list[Member]:
    """The roster's students, in its order; everyone graded must be among them."""
    students = [m for m in roster if m.role == "student"]
    missing = sorted(set(grades.students) - {m.username for m in students})
    if missing:
        raise ExportError(
            f"the gradebook has grades for {len(missing)} student(s) missing from the roster "
            f"{coursefile.roster_path(path)}: {', '.join(missing)}. Add them to the roster with "
            "the ids the LMS knows them by (or remove them from the gradebook) and export again."
        )
    return students


def _require(people: list[Member], fields: tuple[str, ...], lms: str, path: Path) -> None:
    lacking = [m.username for m in people if not any(getattr(m, f) for f in fields)]
    if lacking:
        raise ExportError(
            f"{lms} cannot tell who these students are: the roster "
            f"{coursefile.roster_path(path)} gives none of {', '.join(fields)} for "
            f"{', '.join(lacking)}"
        )


class CanvasExport(_LmsExport):
    """Canvas's gradebook import file (see the module's docstring)."""

    default_file = "canvas_grades.csv"

    def rows(self, grades: Grades, people: list[Member], settings: dict, path: Path):
        _require(people, ("lms_id", "sis_user_id", "sis_login_id"), "Canvas", path)
        ids = coursefile.table(settings, "canvas_assignments", path, required=False)
        titles = []
        for name, _ in grades.assignments:
            known = coursefile.get(ids, name, (int, str), path, "")
            titles.append(f"{name} ({known})" if known != "" else name)
        rows = [CANVAS_COLUMNS + titles]
        blank = [""] * (len(CANVAS_COLUMNS) - 1)
        rows.append(
            [f"    {POINTS_POSSIBLE}", *blank] + [_number(m) for _, m in grades.assignments]
        )
        for m in people:
            who = [m.name or m.username, m.lms_id, m.sis_user_id, m.sis_login_id, m.section]
            rows.append(who + [_number(grades.score(m.username, a)) for a, _ in grades.assignments])
        return rows


class MoodleExport(_LmsExport):
    """Moodle's grade import CSV file (see the module's docstring)."""

    default_file = "moodle_grades.csv"

    def rows(self, grades: Grades, people: list[Member], settings: dict, path: Path):
        key = coursefile.get(settings, "moodle_identifier", str, path, "email")
        if key not in MOODLE_IDENTIFIERS:
            raise ExportError(
                f"{path}: [lms] moodle_identifier {key!r} is not one of "
                f"{', '.join(MOODLE_IDENTIFIERS)}"
            )
        header, field = MOODLE_IDENTIFIERS[key]
        _require(people, (field,), "Moodle", path)
        rows = [[header] + [name for name, _ in grades.assignments]]
        for m in people:
            rows.append([getattr(m, field)] + [_number(grades.score(m.username, a), "-")
                                               for a, _ in grades.assignments])  # fmt: skip
        return rows

    def announce(self, grades: Grades) -> None:
        maxima = ", ".join(f"{name} {maximum:g}" for name, maximum in grades.assignments)
        self.log.warning(
            "Moodle: map each lesson to a grade item made first with the lesson's maximum grade "
            "(%s); a grade item the import makes is out of 100", maxima
        )  # fmt: skip

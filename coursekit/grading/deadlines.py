"""Due dates, the late policy and extensions: read from course.toml, applied by nbgrader.

The class's course.toml (coursekit.course.coursefile) holds each lesson's due date, one late
policy and the name of the extensions file beside it::

    [deadlines]
    timezone = "Europe/Berlin"             # optional: date-times without an offset are local
    lesson01 = 2026-03-02T23:59:00         # ... so this is 23:59 in Berlin, summer or winter
    lesson02 = 2026-03-09T23:59:00+01:00   # a date-time with its offset (or the same, quoted)

    [late]
    policy = "per-day"      # none | per-hour | per-day | zero
    percent = 10            # per-hour, per-day: this % of the score for each hour or day begun
    cap = 50                # ... at most this % in all
    cutoff_hours = 168      # later than this after the due date (and any extension): zero
    extensions = "extensions.csv"   # username,lesson,extension (e.g. 48h, 3d, 2d12h)
    counts = "latest"       # the hand-in that counts: latest | best-on-time (handins.py)

nbgrader does the rest with its own mechanisms, so that formgrader, ``nbgrader export`` and the
course's own table (reports/<lesson>/) agree: the due date is the gradebook's assignment due
date, an extension is the gradebook's ``SubmittedAssignment.extension``, the time of a submission
is the ``timestamp.txt`` nbgrader's collect writes beside it, and the penalty is computed by
nbgrader's ``AssignLatePenalties`` with :class:`CoursePenalty` as its late-submission plugin
(``c.AssignLatePenalties.plugin_class``). :class:`ApplyDeadlines`, just before it in autograde,
writes the due date and the student's extension into the gradebook from course.toml, the one
place they are kept; :func:`write` does the same for a whole class before it is graded.

Without a course.toml (a temporary course, a learner's ``make check``) nothing is late and the
gradebook's due dates are left alone. The penalty is fixed, in points, when autograde runs: a
grade changed by hand in formgrader afterwards keeps it (a regrade through
coursekit.grading.regrades takes it again). Keep nbgrader's ``Exchange.timezone`` at UTC: its
timestamps are read back in that zone (``CEST`` would be misread as UTC).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

from coursekit.course import coursefile
from coursekit.course.coursefile import CourseFileError
from coursekit.course.lessons import ROOT, all_lessons
from coursekit.grading.holds import is_held, release

POLICIES = ("none", "per-hour", "per-day", "zero")
COUNTS = ("latest", "best-on-time")  # [late] counts
UNIT = {"per-hour": 3600.0, "per-day": 86400.0}
EXTENSIONS_HEADER = ["username", "lesson", "extension"]
_SPAN = re.compile(r"^(?:(?P<d>\d+(?:\.\d+)?)\s*d)?\s*(?:(?P<h>\d+(?:\.\d+)?)\s*h)?$", re.I)


@dataclass(frozen=True)
class LatePolicy:
    kind: str = "none"
    percent: float = 0.0  # of the score, for each hour or day begun (per-hour, per-day)
    cap: float = 100.0  # percent of the score at most
    cutoff_hours: float | None = None  # later than this: the whole score (zero's default: 0)

    def penalty(self, score: float, seconds_late: float) -> float:
        """Points taken from ``score`` for a submission ``seconds_late`` after its due date."""
        if seconds_late <= 0 or self.kind == "none":
            return 0.0
        cutoff = self.cutoff_hours
        if cutoff is None:
            cutoff = 0.0 if self.kind == "zero" else math.inf
        if seconds_late > cutoff * 3600:
            return float(score)
        if self.kind == "zero":
            return 0.0
        begun = math.ceil(seconds_late / UNIT[self.kind])
        return float(score) * min(self.cap, self.percent * begun) / 100.0

    def describe(self) -> str:
        if self.kind == "none":
            return "no late penalty"
        cutoff = (
            f"; zero after {self.cutoff_hours:g} h late" if self.cutoff_hours is not None else ""
        )
        if self.kind == "zero":
            return f"zero after {self.cutoff_hours or 0:g} h late"
        unit = self.kind.removeprefix("per-")
        return f"{self.percent:g} % of the score per {unit} begun, at most {self.cap:g} %{cutoff}"


@dataclass(frozen=True)
class Deadlines:
    """The class's due dates (UTC), late policy and extensions, as course.toml says."""

    source: Path
    due: dict[str, datetime] = field(default_factory=dict)  # {assignment: due date, UTC}
    policy: LatePolicy = LatePolicy()
    extensions: dict[tuple[str, str], timedelta] = field(default_factory=dict)
    zone: str = "UTC"  # [deadlines] timezone: where the class reads its due dates
    counts: str = "latest"  # [late] counts: which hand-in counts (coursekit.grading.handins)

    def local(self, moment: datetime) -> str:
        """``moment`` as the class reads it: in its time zone, named."""
        here = moment.astimezone(ZoneInfo(self.zone))
        return f"{here:%Y-%m-%d %H:%M} {here.tzname() if self.zone != 'UTC' else 'UTC'}"

    def due_date(self, assignment: str) -> datetime | None:
        return self.due.get(assignment)

    def extension(self, student: str, assignment: str) -> timedelta | None:
        return self.extensions.get((student, assignment))

    def student_due(self, student: str, assignment: str) -> datetime | None:
        due = self.due_date(assignment)
        return due + (self.extension(student, assignment) or timedelta()) if due else None

    def last_due(self, assignment: str) -> datetime | None:
        """The due date with the longest extension anyone has: when everyone's work is in."""
        due = self.due_date(assignment)
        if due is None:
            return None
        longest = [e for (_, a), e in self.extensions.items() if a == assignment]
        return due + max(longest, default=timedelta())

    def key(self, student: str, assignment: str) -> str:
        """What a student's penalty depends on besides the submission: graded again when it
        changes (coursekit.grading.classgrade)."""
        due = self.student_due(student, assignment)
        return f"{due.isoformat()} {self.policy}" if due else ""


# ---------------------------------------------------------------- reading course.toml


def load(course: Path | None = None) -> Deadlines | None:
    """The deadlines of the class whose course folder is ``course`` (its classroom/course.toml,
    or $CLASSROOM_COURSE); None when there is no course.toml (nothing is then late). In a batch
    of class grading: what the grading client read (:func:`hand_over`)."""
    if os.environ.get(HANDED):
        return _from_json(Path(os.environ[HANDED]))
    path = coursefile.course_file(course)
    if not path.exists() and not _named():
        return None
    data = coursefile.read(path)
    lessons = {item.assignment for item in all_lessons(Path(course or ROOT))}
    table = dict(coursefile.table(data, "deadlines", path, required=False))
    zone = _zone(table.pop("timezone", "UTC"), path)
    due = _due_dates(table, path, lessons, zone)
    late = coursefile.table(data, "late", path, required=False)
    policy = _policy(late, path)
    extensions = {}
    if "extensions" in late:
        name = coursefile.get(late, "extensions", str, path)
        roster = coursefile.read_roster(coursefile.roster_path(path))
        students = {m.username for m in roster if m.role == "student"}
        extensions = read_extensions(path.parent / name, students, set(due))
    counts = coursefile.get(late, "counts", str, path, "latest")
    if counts not in COUNTS:
        raise CourseFileError(f"{path}: [late] counts {counts!r} is not one of {', '.join(COUNTS)}")
    return Deadlines(path, due, policy, extensions, zone, counts)


def _named() -> bool:
    return bool(os.environ.get(coursefile.ENVIRONMENT))


def _zone(name, path: Path) -> str:
    """``[deadlines] timezone``: an IANA time zone name (Europe/Berlin, America/New_York)."""
    where = f"{path}: [deadlines] timezone"
    if not isinstance(name, str):
        raise CourseFileError(f'{where} = {name!r}: give a name in quotes, e.g. "Europe/Berlin"')
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CourseFileError(
            f"{where} = {name!r} is no time zone this machine knows (an IANA name such as "
            '"Europe/Berlin" or "America/New_York"; `pip install tzdata` where the system '
            "has none)"
        ) from None
    return name


def _due_dates(table: dict, path: Path, lessons: set[str], zone: str) -> dict[str, datetime]:
    due = {}
    for lesson, value in table.items():
        where = f"{path}: [deadlines] {lesson}"
        if lessons and lesson not in lessons:
            raise CourseFileError(f"{where}: no such lesson (the lessons: {sorted(lessons)})")
        due[lesson] = parse_date(value, where, zone)
    return due


def _localised(value: datetime, zone: str, where: str) -> datetime:
    """A date-time without an offset, in ``zone``: refused where that local time does not exist
    (the hour skipped when clocks go forward) or exists twice (the hour repeated)."""
    here = ZoneInfo(zone)
    first, second = value.replace(tzinfo=here, fold=0), value.replace(tzinfo=here, fold=1)
    exists = first.astimezone(UTC).astimezone(here).replace(tzinfo=None) == value
    if not exists:
        raise CourseFileError(f"{where}: {value} does not exist in {zone} (the clocks skip it)")
    if first.utcoffset() != second.utcoffset():
        raise CourseFileError(
            f"{where}: {value} happens twice in {zone} (the clocks go back): give the offset, "
            f"e.g. {first.isoformat()} or {second.isoformat()}"
        )
    return first


def parse_date(value, where: str, zone: str = "UTC") -> datetime:
    """A due date, as a TOML date-time or an ISO 8601 string, in UTC: with its offset, or,
    without one, in the class's time ``zone`` when course.toml names one."""
    example = "e.g. 2026-03-02T23:59:00+01:00, ...Z for UTC, or [deadlines] timezone"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CourseFileError(
                f"{where}: {value!r} is not a date and time ({example})"
            ) from None
    if isinstance(value, date) and not isinstance(value, datetime):
        raise CourseFileError(f"{where}: {value} has no time of day ({example})")
    if not isinstance(value, datetime):
        raise CourseFileError(f"{where}: {value!r} is not a date and time ({example})")
    if (value.tzinfo is None or value.utcoffset() is None) and zone != "UTC":
        value = _localised(value, zone, where)
    if value.tzinfo is None or value.utcoffset() is None:
        raise CourseFileError(f"{where}: {value} has no time zone ({example})")
    return value.astimezone(UTC)


def _number(late: dict, key: str, path: Path, default, low: float, high: float):
    value = coursefile.get(late, key, (int, float), path, default)
    if value is not None and not low <= value <= high:
        raise CourseFileError(f"{path}: [late] {key} = {value}: must be from {low:g} to {high:g}")
    return None if value is None else float(value)


def _policy(late: dict, path: Path) -> LatePolicy:
    kind = coursefile.get(late, "policy", str, path, "none")
    if kind not in POLICIES:
        raise CourseFileError(f"{path}: [late] policy {kind!r} is not one of {', '.join(POLICIES)}")
    known = {"policy", "percent", "cap", "cutoff_hours", "extensions", "counts"}
    if set(late) - known:
        raise CourseFileError(f"{path}: [late] has unknown keys {sorted(set(late) - known)}")
    percent = _number(late, "percent", path, None, 0, 100)
    if kind in UNIT and percent is None:
        raise CourseFileError(f"{path}: [late] policy {kind!r} needs percent (e.g. 10)")
    ignored = {"none": ("percent", "cap", "cutoff_hours"), "zero": ("percent", "cap")}
    for key in [k for k in ignored.get(kind, ()) if k in late]:
        hint = ('policy = "zero" with cutoff_hours takes the whole score after that many hours'
                if kind == "none" and key == "cutoff_hours" else "leave it out")  # fmt: skip
        warnings.warn(f"{path}: [late] policy {kind!r} ignores {key} = {late[key]} ({hint})",
                      CourseFileWarning, stacklevel=3)  # fmt: skip
    return LatePolicy(
        kind,
        percent or 0.0,
        _number(late, "cap", path, 100, 0, 100),
        _number(late, "cutoff_hours", path, None, 0, math.inf),
    )


LONGEST = timedelta(days=366)  # an extension longer than this is a typo


def parse_span(text: str, where: str) -> timedelta:
    """``48h``, ``3d``, ``2d12h``, ``1.5d``: a positive length of time, a year at most."""
    found = _SPAN.match(text.strip())
    if not text.strip() or not found or not any(found.groups()):
        raise CourseFileError(f"{where}: {text!r} is not a length of time (e.g. 48h, 3d, 2d12h)")
    days = float(found["d"] or 0) + float(found["h"] or 0) / 24
    if days > LONGEST.days:
        raise CourseFileError(f"{where}: an extension of {text!r} is more than a year")
    span = timedelta(days=float(found["d"] or 0), hours=float(found["h"] or 0))
    if span <= timedelta():
        raise CourseFileError(f"{where}: an extension of {text!r} extends nothing")
    return span


def read_extensions(path: Path, students: set[str], lessons: set[str]):
    """{(student, lesson): extension} from ``username,lesson,extension`` rows; every student in
    the roster, every lesson one with a due date, each pair once."""
    try:
        # utf-8-sig: Excel saves "CSV UTF-8" with a byte-order mark before the header
        rows = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))
    except FileNotFoundError:
        raise CourseFileError(f"{path}: no such extensions file") from None
    if not rows or [c.strip().lower() for c in rows[0]] != EXTENSIONS_HEADER:
        raise CourseFileError(f"{path}: the first line must be 'username,lesson,extension'")
    found = {}
    for number, row in enumerate(rows[1:], start=2):
        if not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        where = f"{path}, line {number}"
        if len(row) != 3:
            raise CourseFileError(f"{where}: expected 'username,lesson,extension', got {row}")
        student, lesson, span = (cell.strip() for cell in row)
        if student not in students:
            raise CourseFileError(f"{where}: {student!r} is not a student in the roster")
        if lesson not in lessons:
            raise CourseFileError(f"{where}: {lesson!r} has no due date in [deadlines]")
        if (student, lesson) in found:
            raise CourseFileError(f"{where}: {student} already has an extension for {lesson}")
        found[(student, lesson)] = parse_span(span, where)
    return found


# ---------------------------------------------------------------- to the grading batches

# Class grading (coursekit.grading.classgrade) reads the deadlines once and hands what it read to
# every batch, whose nbgrader reads them here instead of a course.toml: a Dask worker on another
# machine sees the course folder, not necessarily the class's course.toml, and one run must not
# grade half the class by one version of the file and half by another.
HANDED = "COURSE_DEADLINES"


def hand_over(deadlines: Deadlines | None, folder: Path) -> Path:
    """``deadlines`` (None: nothing is late) as JSON in ``folder``, for :data:`HANDED`."""
    data = None
    if deadlines is not None:
        data = {
            "source": str(deadlines.source),
            "due": {a: d.isoformat() for a, d in deadlines.due.items()},
            "policy": [deadlines.policy.kind, deadlines.policy.percent, deadlines.policy.cap,
                       deadlines.policy.cutoff_hours],
            "extensions": [[s, a, e.total_seconds()] for (s, a), e in deadlines.extensions.items()],
            "zone": deadlines.zone,
            "counts": deadlines.counts,
        }  # fmt: skip
    path = Path(folder) / "deadlines.json"
    path.write_text(json.dumps(data))
    return path


def _from_json(path: Path) -> Deadlines | None:
    data = json.loads(path.read_text())
    if data is None:
        return None
    return Deadlines(
        Path(data["source"]),
        {a: datetime.fromisoformat(d) for a, d in data["due"].items()},
        LatePolicy(*data["policy"]),
        {(s, a): timedelta(seconds=e) for s, a, e in data["extensions"]},
        data.get("zone", "UTC"),
        data.get("counts", "latest"),
    )


# ---------------------------------------------------------------- into nbgrader's gradebook


def _naive(moment: datetime | None) -> datetime | None:
    """nbgrader's gradebook keeps naive UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment else None


def write(gradebook, deadlines: Deadlines, assignment: str, students=None) -> None:
    """The due date of ``assignment`` and the extensions of ``students`` (default: everyone with
    a submission in the gradebook) into the gradebook, as course.toml has them."""
    from nbgrader.api import MissingEntry

    record = gradebook.find_assignment(assignment)
    record.duedate = _naive(deadlines.due_date(assignment))
    names = students if students is not None else [s.student.id for s in record.submissions]
    for student in names:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            continue
        submission.extension = deadlines.extension(student, assignment)
    gradebook.db.commit()


def _course_root(config) -> Path:
    return Path(CourseDirectory(config=config).root)


class ApplyDeadlines(NbGraderPreprocessor):
    """In autograde, just before AssignLatePenalties: the due date and this student's extension
    into the gradebook, from course.toml (nothing without one); and the scores the penalty is
    taken from made the autograder's.

    AssignLatePenalties takes the penalty from the notebook's score, which counts a manual score
    over the autograder's. A submission held for review (coursekit.grading.holds) has a manual 0
    on every grade, and a regrade (handed in again; its due date, extension or the policy
    changed; ``--force``) keeps it: the penalty would be taken from 0, and the hold released or
    accepted afterwards would count the full score. So the hold is released here, before the
    penalty; HoldForReview, later in the same run, holds the submission again if it still needs
    review. An instructor's own manual grade is never touched (holds.release)."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        deadlines = load(_course_root(self.config))
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            if deadlines is not None:
                write(gradebook, deadlines, info["assignment"], [info["student"]])
            try:
                if is_held(gradebook.find_submission_notebook(
                        info["notebook"], info["assignment"], info["student"])):  # fmt: skip
                    release(gradebook, info["assignment"], info["notebook"], info["student"])
            except MissingEntry:
                pass  # nothing graded yet: nothing held
        return nb, resources


class CourseFileWarning(UserWarning):
    """course.toml says something that has no effect (a setting the policy ignores)."""


class CoursePenalty(LateSubmissionPlugin):
    """nbgrader's late-submission plugin with the course's policy (``[late]`` in course.toml).
    nbgrader measures how late from the gradebook's due date plus the student's extension."""

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float):
        deadlines = load(_course_root(self.config))
        if deadlines is None:
            return None
        penalty = deadlines.policy.penalty(score, total_seconds_late)
        self.log.warning(
            "coursekit: %s is %.0f s late: %s -> penalty %g",
            student_id,
            total_seconds_late,
            deadlines.policy.describe(),
            penalty,
        )
        return penalty

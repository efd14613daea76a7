"""After the deadline, through real nbgrader: one class of lesson 1 with a course.toml of its own
(due dates, a late policy, extensions, a roster), handed in at times around the due date, graded
once by class grading (`make autograde`), then:

* late work: each submission's penalty is the policy's, measured from the due date plus the
  student's extension, and formgrader's gradebook, stock `nbgrader export` and the course's own
  table (reports/<lesson>/grades.csv) say the same; changing an extension regrades that student;
* feedback released by policy (before the due date: the visible tests only; after it: each
  hidden test's name, points and message, never its code), and `make feedback` refusing early;
* the LMS exports (Canvas, Moodle) through `nbgrader export --exporter=...`, in the formats
  their importers read, and an export naming the students missing from the roster.

The class is graded once for the module (one group under pytest-xdist: autograde_tests/conftest.py).
"""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from coursekit.course.cells import BEGIN_HIDDEN, grade_id, is_test, nbgrader_meta
from coursekit.course.lessons import ROOT
from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.mistakes import fill_solutions
from coursekit.course.nbgrader_cli import nbgrader
from coursekit.course.reading import source_to_notebook
from coursekit.grading import classgrade, feedback, regrades, tempcourse
from coursekit.grading.classgrade import grade_class
from coursekit.grading.gradebook import open_gradebook
from coursekit.grading.lms import MOODLE_IDENTIFIERS, POINTS_POSSIBLE
from coursekit.grading.report import ClassReport

from .leaks import hidden_test_lines
from .sandboxes import nbgrader_flags

pytestmark = [pytest.mark.chain, pytest.mark.synthetic_class]

LESSON = find_lesson("lesson01")
DUE = (datetime.now(UTC) - timedelta(days=10)).replace(microsecond=0)
POLICY = 'policy = "per-day"\npercent = 10\ncap = 50\ncutoff_hours = 72'
# student: (handed in this long after the due date, extension) -> the share of the score lost
CLASS = {
    "early": (timedelta(hours=-1), None, 0.0),
    "late": (timedelta(hours=5), None, 0.1),  # the first day begun
    "extended": (timedelta(hours=30), "2d", 0.0),  # within a 48 h extension
    "extended-late": (timedelta(hours=50), "1d", 0.2),  # 26 h after a 24 h extension: 2 days
    "very-late": (timedelta(hours=100), None, 1.0),  # past the 72 h cut-off
}
# Handed in on time, each with one exercise wrong (a solution cell's text replaced): the visible
# tests of test_soft_lookup pass and its hidden ones (batched keys) fail; test_dot_scores fails a
# visible test, so its hidden tests never run.
WRONG = {
    "hidden-fails": {"soft_lookup": ("dot_scores(queries, keys)", "(queries @ keys.T)")},
    "visible-fails": {"dot_scores": ("np.swapaxes(keys, -1, -2)", "keys.T")},
}
# Handed in 5 h late with an import no solution needs: correct answers, held for review.
# test_a_held_late_submission_keeps_its_penalty regrades them (resubmitted clean; graded again
# after an extension changed, then accepted): the penalty must stay.
SUSPICIOUS = {
    "weighted_sum": ("return weights @ values", "import inspect\n    return weights @ values")
}
HELD = {"held-resubmits": timedelta(hours=5), "held-accepted": timedelta(hours=5)}
# On time, correct, and printing, reversed, the test cell that calls soft_lookup as IPython's
# input history holds it (the instructors' review of 2026-11-28): no line of the hidden tests may
# reach the feedback in any direction, before or after the due date.
HISTORY_LEAK = "\n".join([
    "try:",
    "        source = In[-1]  # IPython's input history: the test cell running now",
    "    except NameError:",
    "        source = ''",
    "    if 'HIDDEN' in source and not hasattr(soft_lookup, 'shown'):",
    "        soft_lookup.shown = True",
    "        print(source[::-1])",
    "    weights = softmax(",
])  # fmt: skip
LEAKS = {"prints-history": {"soft_lookup": ("weights = softmax(", HISTORY_LEAK)}}
_EXTENSIONS = {s: spec[1] for s, spec in CLASS.items() if spec[1]}
ABSENT = "absent"  # in the roster, hands nothing in
# Hands in three times: wrong 2 h early, right 1 h early, right 5 h late (the one nbgrader collects)
RESUBMITS = "resubmits"
HAND_INS = [(timedelta(hours=-2), WRONG["hidden-fails"]), (timedelta(hours=-1), {}),
            (timedelta(hours=5), {})]  # fmt: skip
COURSE_TOML = """[course]
id = "after-deadline"
roster = "roster.csv"

[exchange]
root = "{exchange}"

[deadlines]
lesson01 = {due}

[late]
{policy}
extensions = "extensions.csv"
counts = "{counts}"

[lms]
moodle_identifier = "email"

[lms.canvas_assignments]
lesson01 = 4711
"""


@dataclass
class Graded:
    course: Path
    report: ClassReport

    @property
    def classroom(self) -> Path:
        return self.course / "classroom"

    def rows(self) -> dict[str, dict]:
        path = self.course / "reports" / LESSON.assignment / "grades.csv"
        with path.open() as handle:
            return {row["student"]: row for row in csv.DictReader(handle)}


def _stamp(moment: datetime) -> str:
    """As nbgrader's collect writes timestamp.txt (its default timestamp_format, in UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def write_class(
    course: Path, due: datetime = DUE, extensions: dict | None = None, counts: str = "latest"
) -> None:
    """The class's description beside the course: course.toml, roster.csv, extensions.csv."""
    room = course / "classroom"
    room.mkdir(exist_ok=True)
    exchange = course / "exchange"
    text = COURSE_TOML.format(due=due.isoformat(), policy=POLICY, exchange=exchange, counts=counts)
    (room / "course.toml").write_text(text)
    people = "".join(f"{s},student,Student {s},{s}@example.org,{100 + i},S{i},{s},A\n"
                     for i, s in enumerate([*CLASS, *WRONG, *HELD, *LEAKS, RESUBMITS]))  # fmt: skip
    header = "username,role,name,email,lms_id,sis_user_id,sis_login_id,section\n"
    absent = f"{ABSENT},student,Student {ABSENT},{ABSENT}@example.org,99,S99,{ABSENT},A\n"
    (room / "roster.csv").write_text(header + people + absent + "prof,instructor,,,,,,\n")
    if extensions is None:
        extensions = _EXTENSIONS
    rows = "".join(f"{s},{LESSON.assignment},{span}\n" for s, span in extensions.items())
    (room / "extensions.csv").write_text("username,lesson,extension\n" + rows)


def hand_in(course: Path, student: str, after: timedelta, notebook) -> None:
    """``notebook`` as ``student``'s submission, handed in ``after`` the due date."""
    path = tempcourse.submit(course, student, LESSON, notebook)
    (path.parent / "timestamp.txt").write_text(_stamp(DUE + after))


def grade(course: Path, force: bool = False) -> ClassReport:
    return grade_class(
        course, LESSON, workers=2, force=force, extra=nbgrader_flags(), progress=False
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory, monkeypatch_module) -> Graded:
    course = tempcourse.make_course(tmp_path_factory.mktemp("class") / "course", [LESSON])
    lesson = LESSON.in_course(course)
    released = nbformat.read(lesson.student_notebook, 4)
    solved = nbformat.read(lesson.source_notebook, 4)
    handed_in = {student: (after, {}) for student, (after, _, _) in CLASS.items()}
    handed_in |= {student: (timedelta(hours=-1), edits) for student, edits in WRONG.items()}
    handed_in |= {student: (timedelta(hours=-1), edits) for student, edits in LEAKS.items()}
    handed_in |= {student: (after, SUSPICIOUS) for student, after in HELD.items()}
    handed_in[RESUBMITS] = HAND_INS[-1]
    for student, (after, edits) in handed_in.items():
        hand_in(course, student, after, fill_solutions(released, solved, edits))
    write_class(course)
    return Graded(course, grade(course))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CLASSROOM_COURSE", raising=False)  # the class is the course's own
        yield patch


def _export(course: Path, *options: str) -> list[dict]:
    out = course / "export.csv"
    tempcourse.run_nbgrader("export", f"--to={out}", *options, course=course)
    with out.open() as handle:
        return list(csv.DictReader(handle))


def test_late_penalties_follow_the_policy_and_everyone_agrees(graded):
    maximum = graded.report.rows[0].max_score
    table = graded.rows()
    exported = {row["student_id"]: row for row in _export(graded.course)}
    with open_gradebook(graded.course / "gradebook.db") as gradebook:
        due = gradebook.find_assignment(LESSON.assignment).duedate
        extensions = {s: gradebook.find_submission(LESSON.assignment, s).extension for s in CLASS}
    assert due == DUE.replace(tzinfo=None)  # the gradebook's due date: formgrader shows it
    for student, (_, span, lost) in CLASS.items():
        row, nbgrader_row = table[student], exported[student]
        penalty = lost * maximum
        assert float(row["autograder_score"]) == maximum, row  # solved: only lateness costs
        assert float(row["late_penalty"]) == pytest.approx(penalty), (student, row)
        assert float(row["score"]) == pytest.approx(maximum - penalty), (student, row)
        # stock nbgrader export reads the same gradebook: the same score and penalty
        assert float(nbgrader_row["score"]) == pytest.approx(float(row["score"])), student
        assert float(nbgrader_row["late_submission_penalty"] or 0) == pytest.approx(penalty)
        assert (extensions[student] is None) == (span is None), student
    assert graded.report.row("late").seconds_late == pytest.approx(5 * 3600)
    assert "late 5.0 h (-" in graded.report.table()


def _feedback(course: Path, student: str) -> str:
    page = LESSON.in_course(course).student_folder("feedback", student) / f"{LESSON.name}.html"
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def _leaked(hidden: list[str], page: str) -> list[str]:
    """The hidden lines ``page`` shows, as written or reversed."""
    return [line for line in hidden if line in page or line[::-1] in page]


def _make_feedback(course: Path, *flags: str) -> int:
    return feedback.main([LESSON.assignment, "--course", str(course), "--force", *flags])


def _hidden_cells() -> dict[str, float]:
    """{grade_id: points} of the lesson's test cells that have hidden tests."""
    source = source_to_notebook(LESSON.source)
    return {
        grade_id(c): nbgrader_meta(c)["points"]
        for c in source.cells
        if is_test(c) and BEGIN_HIDDEN in c.source
    }


def test_after_the_due_date_feedback_names_each_hidden_test_never_its_code(graded):
    assert _make_feedback(graded.course) == 0
    hidden, points = hidden_test_lines(LESSON), _hidden_cells()
    shown = ("early", "hidden-fails", "visible-fails", *LEAKS)
    text = {s: _feedback(graded.course, s) for s in shown}
    for student, page in text.items():
        assert not _leaked(hidden, page), f"{student}'s feedback leaks: {_leaked(hidden, page)[:2]}"
    lookup, dots = points["test_soft_lookup"], points["test_dot_scores"]
    assert f"Hidden tests of test_soft_lookup ({lookup:g} points): failed" in text["hidden-fails"]
    message = next(c for c in graded.report.row("hidden-fails").cells if not c.passed).message
    assert message.splitlines()[0][:60] in text["hidden-fails"]  # the failure's own words
    # keys.T crashes (NumPy's matmul) on the first batched case: what that case was checking
    crashed = "(raised in a hidden test, while checking: soft_lookup with batch (2,), n_q=3, n_k=5"
    assert crashed in message and crashed in text["hidden-fails"], message
    assert f"Hidden tests of test_dot_scores ({dots:g} points): not run" in text["visible-fails"]
    for test, worth in points.items():
        assert f"Hidden tests of {test} ({worth:g} points): passed" in text["early"]


def test_before_the_due_date_feedback_shows_the_visible_tests_only(graded):
    write_class(graded.course, due=datetime.now(UTC) + timedelta(days=2))
    try:
        with pytest.raises(SystemExit, match="feedback refused: lesson01 is due"):
            _make_feedback(graded.course)
        assert _make_feedback(graded.course, "--before-due-date") == 0
        hidden_fails = _feedback(graded.course, "hidden-fails")
        visible_fails = _feedback(graded.course, "visible-fails")
        leaks = {s: _leaked(hidden_test_lines(LESSON), _feedback(graded.course, s)) for s in LEAKS}
    finally:
        write_class(graded.course)
    assert not any(leaks.values()), leaks
    failed = {
        c.grade_id: c.message for c in graded.report.row("hidden-fails").cells if not c.passed
    }
    assert list(failed) == ["test_soft_lookup"]
    assert failed["test_soft_lookup"].splitlines()[0][:40] not in hidden_fails
    assert "Hidden tests of" not in hidden_fails
    assert "Feedback before the due date" in hidden_fails
    assert hidden_fails.count("shown after the due date") == len(_hidden_cells())
    shown = graded.report.rows[0].max_score - sum(_hidden_cells().values())
    assert f"Score: {shown:.1f} / {shown:.1f}" in hidden_fails  # the visible-only cells, all passed
    dots = next(c for c in graded.report.row("visible-fails").cells if not c.passed)
    assert dots.grade_id == "test_dot_scores" and dots.message[:40] in visible_fails


def _lms_export(course: Path, exporter: str, *more: str) -> tuple[int, list[list[str]], str]:
    """(exit code, the rows written, nbgrader's log) of `nbgrader export --exporter=...`."""
    out = course / f"{exporter}.csv"
    out.unlink(missing_ok=True)
    done = nbgrader("export", f"--exporter=coursekit.grading.lms.{exporter}", f"--to={out}",
                    *more, root=course)  # fmt: skip
    rows = list(csv.reader(out.open(newline=""))) if out.exists() else []
    return done.returncode, rows, done.stderr


def check_canvas_format(rows: list[list[str]]) -> None:
    """What Canvas's gradebook importer requires of a file (its GradebookImporter: a header with
    Student and ID first and the student columns ending in Section, each assignment as "name" or
    "name (id)", a row whose first cell contains "Points Possible", numbers with a dot)."""
    header, points, *students = rows
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"], header
    assert all(re.fullmatch(r"[\w -]+( \(\d+\))?", title) for title in header[5:]), header
    assert POINTS_POSSIBLE in points[0] and points[1:5] == [""] * 4, points
    for row in [points[5:]] + [s[5:] for s in students]:
        assert all(re.fullmatch(r"(\d+(\.\d+)?)?", cell) for cell in row), row
    assert all(len(row) == len(header) for row in rows)
    assert all(any(s[1:4]) for s in students), "Canvas matches on ID, SIS User ID or Login ID"


def check_moodle_format(rows: list[list[str]]) -> None:
    """What Moodle's CSV grade import maps (grade/import/csv: one identifier column -- Email
    address, Username or ID number -- and grade columns of numbers, '' or '-' for none)."""
    header, *students = rows
    assert header[0] in {h for h, _ in MOODLE_IDENTIFIERS.values()}, header
    assert len(set(header)) == len(header) and students
    for row in students:
        assert row[0] and len(row) == len(header), row
        assert all(re.fullmatch(r"(\d+(\.\d+)?)?|-", cell) for cell in row[1:]), row


def test_grades_go_to_canvas_as_its_import_reads_them(graded):
    code, rows, log = _lms_export(graded.course, "CanvasExport")
    assert code == 0, log[-2000:]
    check_canvas_format(rows)
    header, points, *students = rows
    assert header[5:] == ["lesson01 (4711)"] and float(points[5]) == graded.report.rows[0].max_score
    table = graded.rows()
    by_name = {row[0]: row for row in students}
    for i, student in enumerate([*CLASS, *WRONG]):
        row = by_name[f"Student {student}"]
        assert row[1:5] == [str(100 + i), f"S{i}", student, "A"], row
        assert float(row[5]) == pytest.approx(float(table[student]["score"]), abs=0.005), student


def test_grades_go_to_moodle_keyed_by_email(graded):
    code, rows, log = _lms_export(graded.course, "MoodleExport")
    assert code == 0, log[-2000:]
    check_moodle_format(rows)
    assert rows[0] == ["Email address", "lesson01"]
    table = graded.rows()
    for email, score in rows[1:]:
        student = email.split("@")[0]
        if student == ABSENT:
            assert score == "0", score  # nothing handed in, and the lesson is due
            continue
        if table[student]["status"] == "held":
            assert score == "-", (student, score)  # Moodle's "no grade": held for review
            continue
        assert float(score) == pytest.approx(float(table[student]["score"]), abs=0.005)


EXAMPLES = [("canvas_grades.csv", check_canvas_format), ("moodle_grades.csv", check_moodle_format)]


def test_a_lesson_not_due_yet_is_exported_only_when_asked(graded):
    """Due in two days (no feedback, no grades yet): the exports leave the lesson out and say so;
    asked for by name, work not handed in yet gets no grade (Moodle's '-', Canvas's blank)."""
    write_class(graded.course, due=datetime.now(UTC) + timedelta(days=2))
    try:
        code, rows, log = _lms_export(graded.course, "MoodleExport")
        assert code == 0 and rows[0] == ["Email address"], rows[0]
        assert "lesson01 left out: it is due, with every extension, at" in log
        asked = _lms_export(graded.course, "MoodleExport", "--assignment=lesson01")
        canvas = _lms_export(graded.course, "CanvasExport", "--assignment=lesson01")
    finally:
        write_class(graded.course)
    check_moodle_format(asked[1])
    assert dict(asked[1][1:])[f"{ABSENT}@example.org"] == "-"
    assert next(r for r in canvas[1] if r[0] == f"Student {ABSENT}")[5] == ""
    assert "lesson01 19" in asked[2]  # the maximum to give Moodle's grade item


@pytest.mark.parametrize("example, check", EXAMPLES)
def test_the_docs_examples_have_the_lms_format(example, check):
    check(list(csv.reader((ROOT / "docs" / "lms" / example).open(newline=""))))


def test_an_export_with_students_missing_from_the_roster_names_them(graded):
    roster = graded.classroom / "roster.csv"
    kept = roster.read_text()
    dropped = [line for line in kept.splitlines() if not line.startswith(("late,", "very-late,"))]
    roster.write_text("\n".join(dropped) + "\n")
    try:
        for exporter in ("CanvasExport", "MoodleExport"):
            code, rows, log = _lms_export(graded.course, exporter)
            assert code != 0 and not rows, exporter
            assert "2 student(s) missing from the roster" in log and "late, very-late" in log, log
    finally:
        roster.write_text(kept)


def test_points_per_test_cell_and_a_regrade_reach_every_export(graded):
    """reports/<lesson>/points.csv has each student's points per test cell, item_statistics.csv
    each cell's; a regrade request answered with points changes them, and nbgrader export and
    the LMS file count it."""
    folder = graded.course / "reports" / LESSON.assignment
    with (folder / "points.csv").open() as handle:
        points = {row["student"]: row for row in csv.DictReader(handle)}
    lookup = _hidden_cells()["test_soft_lookup"]
    assert float(points["hidden-fails"]["test_soft_lookup"]) == 0.0
    assert float(points["early"]["test_soft_lookup"]) == lookup
    assert float(points["late"]["total"]) == graded.report.rows[0].max_score
    with (folder / "item_statistics.csv").open() as handle:
        items = {row["test_cell"]: row for row in csv.DictReader(handle)}
    assert set(items) == {c.grade_id for c in graded.report.rows[0].cells}
    assert 0 < float(items["test_soft_lookup"]["share_full"]) < 1
    regrades.request(graded.course, LESSON.in_course(graded.course), "hidden-fails",
                     "test_soft_lookup", "my lookup broadcasts over the batch")  # fmt: skip
    regrades.answer(graded.course, LESSON.in_course(graded.course), "hidden-fails",
                    "test_soft_lookup", "agreed after a look", points=lookup)  # fmt: skip
    maximum = graded.report.rows[0].max_score
    assert float(graded.rows()["hidden-fails"]["score"]) == maximum
    assert float({r["student_id"]: r for r in _export(graded.course)}["hidden-fails"]["score"]) == (
        maximum
    )
    moodle = dict(_lms_export(graded.course, "MoodleExport")[1][1:])
    assert float(moodle["hidden-fails@example.org"]) == maximum
    with (folder / "points.csv").open() as handle:
        row = next(r for r in csv.DictReader(handle) if r["student"] == "hidden-fails")
    assert float(row["test_soft_lookup"]) == lookup


def _late_penalty(course: Path, student: str) -> float:
    with open_gradebook(course / "gradebook.db") as gradebook:
        nb = gradebook.find_submission_notebook(LESSON.name, LESSON.assignment, student)
        return float(nb.late_submission_penalty or 0.0)


def test_a_held_late_submission_keeps_its_penalty(graded):
    """Held for review and late: graded again (handed in again, clean; or after its extension
    changed, then accepted), the penalty is still taken from the autograder's scores, not from
    the hold's zeros, and every export shows the score less the penalty."""
    maximum = graded.report.rows[0].max_score
    due = maximum * 0.9  # 5 to 6 h late: one day begun, 10 %
    for student in HELD:
        row = graded.report.row(student)
        assert row.status == "held" and row.auto == maximum, row
        assert _late_penalty(graded.course, student) == pytest.approx(0.1 * maximum), student
    solved = fill_solutions(
        nbformat.read(LESSON.in_course(graded.course).student_notebook, 4),
        nbformat.read(LESSON.in_course(graded.course).source_notebook, 4),
    )
    hand_in(graded.course, "held-resubmits", timedelta(hours=6), solved)
    write_class(graded.course, extensions={**_EXTENSIONS, "held-accepted": "1h"})  # still late
    try:
        report = grade(graded.course)
        assert report.graded == 2, report.table()
        assert report.row("held-resubmits").status == "graded"
        assert report.row("held-resubmits").score == pytest.approx(due), report.table()
        assert report.row("held-accepted").status == "held"
        assert _late_penalty(graded.course, "held-accepted") == pytest.approx(0.1 * maximum)
        classgrade.accept(graded.course, LESSON, "held-accepted")
        exported = {row["student_id"]: row for row in _export(graded.course)}
        moodle = dict(_lms_export(graded.course, "MoodleExport")[1][1:])
        for student in HELD:
            assert graded.rows()[student]["status"] == "graded", student
            assert float(graded.rows()[student]["score"]) == pytest.approx(due), student
            assert float(exported[student]["score"]) == pytest.approx(due), student
            assert float(moodle[f"{student}@example.org"]) == pytest.approx(due, abs=0.005)
    finally:
        write_class(graded.course)
    again = grade(graded.course)  # the accepted one graded again (its extension changed back)
    assert again.graded == 1 and again.row("held-accepted").score == pytest.approx(due)


def test_changing_an_extension_regrades_that_student_only(graded):
    """Last in the module: it changes the class's extensions (and puts them back)."""
    before = graded.rows()
    write_class(graded.course, extensions={"late": "6h", "extended": "2d", "extended-late": "1d"})
    try:
        report = grade(graded.course)
        assert report.graded == 1, report.table()
        assert float(graded.rows()["late"]["late_penalty"]) == 0.0
        assert graded.rows()["early"] == before["early"]
    finally:
        write_class(graded.course)
        grade(graded.course)
    assert graded.rows() == before


def test_a_broken_course_toml_stops_class_grading_before_anything_runs(graded, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(graded.course, course, ignore=shutil.ignore_patterns("reports"))
    (course / "classroom" / "extensions.csv").write_text(
        "username,lesson,extension\nnobody,lesson01,1d\n"
    )
    with pytest.raises(tempcourse.GradingError, match="'nobody' is not a student in the roster"):
        grade(course, force=True)


def test_the_best_hand_in_on_time_counts_when_the_class_says_so(graded):
    """Last in the module (it changes what is submitted): with [late] counts = "best-on-time",
    class grading grades a student's hand-ins before the due date in the exchange, and the best
    counts: on time and right, where nbgrader collected the late one."""
    maximum = graded.report.rows[0].max_score
    assert graded.report.row(RESUBMITS).score == pytest.approx(0.9 * maximum)  # the late one
    released = nbformat.read(LESSON.in_course(graded.course).student_notebook, 4)
    solved = nbformat.read(LESSON.in_course(graded.course).source_notebook, 4)
    inbound = graded.course / "exchange" / "after-deadline" / "inbound"
    for after, edits in HAND_INS:  # as nbgrader's exchange keeps every hand-in
        folder = inbound / f"{RESUBMITS}+{LESSON.assignment}+{_stamp(DUE + after)}+x"
        folder.mkdir(parents=True)
        nbformat.write(fill_solutions(released, solved, edits), folder / f"{LESSON.name}.ipynb")
    write_class(graded.course, counts="best-on-time")
    try:
        report = grade(graded.course)
    finally:
        write_class(graded.course)
    row = report.row(RESUBMITS)
    assert report.graded == 1 and row.seconds_late == 0, report.table()
    assert row.score == row.auto == maximum
    record = json.loads(
        (graded.course / "reports" / LESSON.assignment / "handins.json").read_text()
    )
    assert record["counts"][RESUBMITS]["why"] == f"the best of 2 on time: {maximum:g} points"

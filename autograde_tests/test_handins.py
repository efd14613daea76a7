"""Which hand-in counts (coursekit.grading.handins), with a stand-in for grading (seconds): the
exchange's hand-ins read as nbgrader names them, the best before each student's due date (with
an extension) put into submitted/ as nbgrader's collect would, the latest where none came in on
time, each hand-in graded once, and a record of the choice. That class grading calls it, graded
for real: autograde_tests/test_after_deadline.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from coursekit.course.coursefile import CourseFileError
from coursekit.course.lessons import lesson as find_lesson
from coursekit.grading import handins
from coursekit.grading.deadlines import load

pytestmark = pytest.mark.unit

LESSON = find_lesson("lesson01")
DUE = datetime(2026, 3, 2, 22, 59, tzinfo=UTC)
COURSE = """[course]
id = "demo"
roster = "roster.csv"
[exchange]
root = "{root}"
[deadlines]
lesson01 = 2026-03-02T22:59:00Z
[late]
policy = "per-day"
percent = 10
counts = "{counts}"
extensions = "extensions.csv"
"""
# student: [(hours after the due date, the points its tests give)], and an extension
HANDED = {
    "ann": ([(-5, 12), (-2, 19), (-1, 16), (3, 19)], None),  # best on time: 2 h early
    "bo": ([(4, 19), (6, 17)], None),  # nothing on time: the latest
    "cy": ([(-1, 10)], None),  # one on time: that one
    "di": ([(-3, 11), (20, 18)], "1d"),  # the extension makes both on time
}


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f %Z")


@pytest.fixture
def course(tmp_path, monkeypatch):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    inbound = tmp_path / "exchange" / "demo" / "inbound"
    points = {}
    for student, (hand_ins, _) in HANDED.items():
        for hours, score in hand_ins:
            when = DUE + timedelta(hours=hours)
            folder = inbound / f"{student}+{LESSON.assignment}+{_stamp(when)}+x{hours}"
            folder.mkdir(parents=True)
            (folder / f"{LESSON.name}.ipynb").write_text(f"{student} at {hours} h")
            (folder / "timestamp.txt").write_text(_stamp(when))
            points[folder.name] = float(score)
        latest = max(hand_ins)[0]  # what nbgrader's collect put into submitted/
        submitted = LESSON.in_course(tmp_path).student_folder("submitted", student)
        submitted.mkdir(parents=True)
        (submitted / f"{LESSON.name}.ipynb").write_text(f"{student} at {latest} h")
    room = tmp_path / "classroom"
    room.mkdir()
    (room / "course.toml").write_text(
        COURSE.format(root=tmp_path / "exchange", counts="best-on-time")
    )
    (room / "roster.csv").write_text("username,role\n" + "".join(f"{s},student\n" for s in HANDED))
    rows = "".join(f"{s},lesson01,{e}\n" for s, (_, e) in HANDED.items() if e)
    (room / "extensions.csv").write_text("username,lesson,extension\n" + rows)
    return tmp_path, points


def test_the_best_hand_in_on_time_counts(course):
    root, points = course
    asked = []

    def grade(found):
        asked.append(sorted(f.name for f in found.values()))
        return {name: points[folder.name] for name, folder in found.items()}

    chosen = handins.settle(root, LESSON.in_course(root), load(root), grade)
    expected = {"ann": -2, "cy": -1, "di": 20}  # bo: nothing on time, the collected latest stays
    for student, hours in {**expected, "bo": 6}.items():
        folder = LESSON.in_course(root).student_folder("submitted", student)
        assert (folder / f"{LESSON.name}.ipynb").read_text() == f"{student} at {hours} h", student
    assert set(chosen) == set(expected)
    assert chosen["ann"]["why"] == "the best of 3 on time: 19 points"
    assert chosen["cy"]["why"] == "the only hand-in on time"
    stamp = LESSON.in_course(root).student_folder("submitted", "ann") / "timestamp.txt"
    assert stamp.read_text() == (DUE - timedelta(hours=2)).strftime(handins.STAMP)
    assert len(asked) == 1 and len(asked[0]) == 5  # ann's three and di's two, in one go
    record = json.loads((root / "reports" / LESSON.assignment / handins.RECORD).read_text())
    assert record["counts"]["di"]["hand_ins"] == 2
    assert handins.settle(root, LESSON.in_course(root), load(root), grade) == chosen
    assert len(asked) == 1, "a hand-in is graded once"


def test_counts_must_be_known(course):
    root, _ = course
    toml = root / "classroom" / "course.toml"
    toml.write_text(toml.read_text().replace("best-on-time", "best"))
    with pytest.raises(CourseFileError, match="counts 'best' is not one of latest, best-on-time"):
        load(root)

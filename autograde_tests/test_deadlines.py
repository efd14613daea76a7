"""Due dates, the late policy and extensions as course.toml states them (grading.deadlines):
read as written, the penalty as the policy says, and every kind of bad input refused with a
message that names the file, the line or key, and what would be right. (That nbgrader applies
them, and that formgrader's gradebook, `nbgrader export` and the course's table agree, is
autograde_tests/test_after_deadline.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from coursekit.course.coursefile import CourseFileError, read_roster
from coursekit.grading.deadlines import (
    CourseFileWarning,
    LatePolicy,
    load,
    parse_date,
    parse_span,
)

pytestmark = pytest.mark.unit

COURSE = """[course]
roster = "roster.csv"
[deadlines]
{deadlines}
[late]
{late}
"""
ROSTER = "username,role\nann,student\nbo,student\ncy,instructor\n"


def _class(tmp_path, deadlines="lesson01 = 2026-03-02T23:59:00+01:00", late="", extensions=None):
    (tmp_path / "classroom").mkdir(exist_ok=True)
    (tmp_path / "solutions" / "lesson01").mkdir(parents=True, exist_ok=True)
    (tmp_path / "solutions" / "lesson01" / "retrieval.md").write_text("")
    (tmp_path / "classroom" / "roster.csv").write_text(ROSTER)
    if extensions is not None:
        (tmp_path / "classroom" / "extensions.csv").write_text(extensions)
        late += '\nextensions = "extensions.csv"'
    text = COURSE.format(deadlines=deadlines, late=late)
    (tmp_path / "classroom" / "course.toml").write_text(text)
    return load(tmp_path)


def test_due_dates_policy_and_extensions_read_as_written(tmp_path, monkeypatch):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    found = _class(
        tmp_path,
        late='policy = "per-day"\npercent = 10\ncap = 50\ncutoff_hours = 72',
        extensions="username,lesson,extension\nann,lesson01,2d12h\n# bo asked too late\n",
    )
    due = datetime(2026, 3, 2, 22, 59, tzinfo=UTC)
    assert found.due_date("lesson01") == due and found.due_date("lesson02") is None
    assert found.policy == LatePolicy("per-day", 10.0, 50.0, 72.0)
    assert found.extension("ann", "lesson01") == timedelta(days=2, hours=12)
    assert found.student_due("bo", "lesson01") == due
    assert found.last_due("lesson01") == due + timedelta(days=2, hours=12)
    assert found.key("ann", "lesson01") != found.key("bo", "lesson01")


def test_no_course_file_means_nothing_is_late(tmp_path, monkeypatch):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    assert load(tmp_path) is None


@pytest.mark.parametrize(
    "policy, late_s, expected",
    [
        (LatePolicy(), 10**6, 0.0),
        (LatePolicy("per-day", 10, 50), 0, 0.0),
        (LatePolicy("per-day", 10, 50), 1, 2.0),  # one second into the first day
        (LatePolicy("per-day", 10, 50), 86400, 2.0),
        (LatePolicy("per-day", 10, 50), 86401, 4.0),
        (LatePolicy("per-day", 10, 50), 30 * 86400, 10.0),  # the cap
        (LatePolicy("per-hour", 5, 100, 48), 3 * 3600 + 1, 4.0),
        (LatePolicy("per-hour", 5, 100, 48), 48 * 3600 + 1, 20.0),  # past the cut-off
        (LatePolicy("zero"), 1, 20.0),
        (LatePolicy("zero", cutoff_hours=24), 86400, 0.0),
        (LatePolicy("zero", cutoff_hours=24), 86401, 20.0),
    ],
)
def test_the_penalty_is_what_the_policy_says(policy, late_s, expected):
    assert policy.penalty(20.0, late_s) == pytest.approx(expected)


@pytest.mark.parametrize(
    "deadlines, late, message",
    [
        ("lesson01 = 2026-03-02T23:59:00", "", "has no time zone"),
        ("lesson01 = 2026-03-02", "", "has no time of day"),
        ('lesson01 = "next Monday"', "", "'next Monday' is not a date and time"),
        ('lesson01 = "2026-02-30T10:00Z"', "", "is not a date and time"),
        ("lesson1 = 2026-03-02T23:59:00Z", "", r"\[deadlines\] lesson1: no such lesson"),
        ("", 'policy = "weekly"', "policy 'weekly' is not one of none, per-hour"),
        ("", 'policy = "per-day"', "needs percent"),
        ("", 'policy = "per-day"\npercent = 150', "percent = 150: must be from 0 to 100"),
        ("", 'policy = "zero"\ncutoff_hours = -1', "cutoff_hours = -1"),
        ("", 'policy = "none"\npenalty = 3', r"unknown keys \['penalty'\]"),
        ("", "percent = true", "'percent' must be a int or float, got True"),
        ("lesson01 = 2026-03-02T23:59:00", "[x", "not valid TOML"),
        ('timezone = "Europe/Berlln"', "", "'Europe/Berlln' is no time zone this machine knows"),
        ("timezone = 1", "", "timezone = 1: give a name in quotes"),
        (
            'timezone = "Europe/Berlin"\nlesson01 = 2026-03-29T02:30:00',
            "",
            "2026-03-29 02:30:00 does not exist in Europe/Berlin",
        ),
        (
            'timezone = "Europe/Berlin"\nlesson01 = 2026-10-25T02:30:00',
            "",
            r"happens twice in Europe/Berlin .*2026-10-25T02:30:00\+02:00 or .*\+01:00",
        ),
    ],
)
def test_a_bad_date_or_policy_says_what_is_wrong(tmp_path, monkeypatch, deadlines, late, message):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    with pytest.raises(CourseFileError, match=message):
        _class(tmp_path, deadlines, late)


@pytest.mark.parametrize(
    "rows, message",
    [
        ("dan,lesson01,2d", "line 2: 'dan' is not a student in the roster"),
        ("cy,lesson01,2d", "'cy' is not a student in the roster"),  # an instructor
        ("ann,lesson02,2d", "'lesson02' has no due date"),
        ("ann,lesson01,two days", "'two days' is not a length of time"),
        ("ann,lesson01,0h", "extends nothing"),
        ("ann,lesson01,1d\nann,lesson01,2d", "line 3: ann already has an extension"),
        ("ann,lesson01", "expected 'username,lesson,extension'"),
        ("ann,lesson01,9999999999d", "line 2: an extension of '9999999999d' is more than a year"),
        ("ann,lesson01,9000h", "more than a year"),
    ],
)
def test_a_bad_extension_names_the_line(tmp_path, monkeypatch, rows, message):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    with pytest.raises(CourseFileError, match=message):
        _class(tmp_path, extensions="username,lesson,extension\n" + rows + "\n")


def test_extensions_need_their_header(tmp_path, monkeypatch):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    with pytest.raises(CourseFileError, match="first line must be 'username,lesson,extension'"):
        _class(tmp_path, extensions="ann,lesson01,2d\n")


def test_dates_and_spans():
    assert parse_date("2026-03-02T23:59Z", "x") == datetime(2026, 3, 2, 23, 59, tzinfo=UTC)
    assert parse_span("36h", "x") == timedelta(hours=36)
    assert parse_span("1.5d", "x") == timedelta(hours=36)


def test_a_named_time_zone_gets_a_deadline_after_a_dst_change_right(tmp_path, monkeypatch):
    """Europe/Berlin: 23:59 is 22:59 UTC in winter (CET) and 21:59 UTC in summer (CEST), one
    date-time written the same way for both; an offset given still wins."""
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    (tmp_path / "solutions" / "lesson02").mkdir(parents=True)
    (tmp_path / "solutions" / "lesson02" / "sdpa.md").write_text("")
    found = _class(tmp_path, 'timezone = "Europe/Berlin"\n'
                   "lesson01 = 2026-10-26T23:59:00\n"  # the day after the clocks went back
                   "lesson02 = 2026-07-01T23:59:00+00:00")  # fmt: skip
    assert found.due_date("lesson01") == datetime(2026, 10, 26, 22, 59, tzinfo=UTC)
    assert found.due_date("lesson02") == datetime(2026, 7, 1, 23, 59, tzinfo=UTC)
    assert found.local(found.due_date("lesson01")) == "2026-10-26 23:59 CET"
    summer = _class(tmp_path, 'timezone = "Europe/Berlin"\nlesson01 = 2026-10-24T23:59:00')
    assert summer.due_date("lesson01") == datetime(2026, 10, 24, 21, 59, tzinfo=UTC)
    assert summer.local(summer.due_date("lesson01")) == "2026-10-24 23:59 CEST"


@pytest.mark.parametrize(
    "late, ignored",
    [
        ('policy = "none"\ncutoff_hours = 24', "policy 'none' ignores cutoff_hours = 24"),
        ('policy = "none"\npercent = 10', "policy 'none' ignores percent = 10"),
        ('policy = "zero"\npercent = 10', "policy 'zero' ignores percent = 10"),
        ('policy = "zero"\ncap = 50\ncutoff_hours = 24', "policy 'zero' ignores cap = 50"),
    ],
)
def test_a_setting_the_policy_ignores_is_warned_about(tmp_path, monkeypatch, late, ignored):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    with pytest.warns(CourseFileWarning, match=ignored):
        _class(tmp_path, late=late)


def test_files_saved_by_excel_with_a_byte_order_mark_are_read(tmp_path, monkeypatch):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    found = _class(tmp_path, late='policy = "per-day"\npercent = 10',
                   extensions="\ufeffusername,lesson,extension\r\nann,lesson01,2d\r\n")  # fmt: skip
    assert found.extension("ann", "lesson01") == timedelta(days=2)
    roster = tmp_path / "classroom" / "roster.csv"
    roster.write_text("\ufeff" + ROSTER, encoding="utf-8")
    assert [m.username for m in read_roster(roster)] == ["ann", "bo", "cy"]

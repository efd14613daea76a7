"""classroom/course.toml and its roster as grading reads them (coursekit.course.coursefile): the
same file and the same roster the classroom reads, with the columns an LMS needs, refused with a
message that says where when it is wrong."""

from __future__ import annotations

import pytest

from coursekit.classroom import settings
from coursekit.course import coursefile

pytestmark = pytest.mark.unit


def test_the_classroom_and_grading_read_one_roster(monkeypatch):
    monkeypatch.delenv(coursefile.ENVIRONMENT, raising=False)
    path = coursefile.course_file()
    assert path == settings.load().source
    assert coursefile.read_roster(coursefile.roster_path(path)) == list(settings.load().roster)


def test_the_environment_names_another_class(tmp_path, monkeypatch):
    monkeypatch.setenv(coursefile.ENVIRONMENT, str(tmp_path / "course.toml"))
    assert coursefile.course_file(tmp_path / "elsewhere") == tmp_path / "course.toml"


def test_a_roster_may_name_students_as_the_lms_does(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "username,role,name,email,lms_id,sis_user_id,sis_login_id,section\n"
        'ada,student,"Lovelace, Ada",ada@example.org,101,S-1,ada.l,Section A\n'
        "bob,instructor,,,,,,\n"
    )
    ada, bob = coursefile.read_roster(roster)
    assert (ada.name, ada.email, ada.lms_id, ada.sis_user_id) == (
        "Lovelace, Ada",
        "ada@example.org",
        "101",
        "S-1",
    )
    assert (ada.sis_login_id, ada.section, bob.role, bob.email) == (
        "ada.l",
        "Section A",
        "instructor",
        "",
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("username,role,phone\nada,student,1\n", r"\['phone'\] are unknown"),
        ("username,role,email,email\nada,student,a,b\n", "unknown or repeated"),
        ("username,role,email\nada,student\n", "line 2: expected 'username,role,email'"),
    ],
)
def test_a_bad_roster_column_says_where(tmp_path, text, message):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    with pytest.raises(coursefile.CourseFileError, match=message):
        coursefile.read_roster(roster)

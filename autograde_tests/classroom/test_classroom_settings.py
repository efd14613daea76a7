"""The class's description (course.toml, roster.csv): read as written, refused with a message
that says where when it is wrong, and never served off loopback with a shared password."""

from __future__ import annotations

import pytest

from coursekit.classroom import accounts, hubconfig, settings
from coursekit.classroom.__main__ import setup

pytestmark = pytest.mark.unit

COURSE = """[course]
id = "attention-course"
grader = "grader-x"
folder = "/srv/x/course"
roster = "roster.csv"
[exchange]
root = "/srv/x/exchange"
max_file_size_kb = 100
max_dir_size_kb = 100
[hub]
ip = "{ip}"
port = 8000
state = "{state}"
home_base = "/home"
"""


def _class(tmp_path, roster: str, ip: str = "127.0.0.1") -> settings.Classroom:
    (tmp_path / "course.toml").write_text(COURSE.format(ip=ip, state=tmp_path / "state"))
    (tmp_path / "roster.csv").write_text(roster)
    return settings.load(tmp_path / "course.toml")


def test_the_repositorys_class_reads(monkeypatch):
    monkeypatch.delenv("CLASSROOM_COURSE", raising=False)
    monkeypatch.delenv("HUB_PORT", raising=False)
    monkeypatch.delenv("HUB_IP", raising=False)
    room = settings.load()
    assert room.course_id == "attention-course" and room.loopback and room.port == 8000
    assert room.instructors and room.students
    assert room.grader not in room.instructors + room.students


def test_roster_roles_and_port_override(tmp_path, monkeypatch):
    monkeypatch.setenv("HUB_PORT", "8123")
    room = _class(tmp_path, "username,role\nann,instructor\nbo,Student\n\n# later: cy\n")
    assert (room.instructors, room.students, room.port) == (["ann"], ["bo"], 8123)
    assert room.url == "http://127.0.0.1:8123/"


@pytest.mark.parametrize(
    "roster, message",
    [
        ("name,role\nann,student\n", "header 'username,role'"),
        ("username,role\nann,teacher\n", "line 2: role 'teacher'"),
        ("username,role\nann,student\nann,student\n", "line 3: 'ann' is listed twice"),
        ("username,role\nAnn Smith,student\n", "not a valid account name"),
        ("username,role\nann\n", "expected 'username,role'"),
        ("username,role\ngrader-x,student\n", "must not be in the roster"),
    ],
)
def test_a_bad_roster_says_where(tmp_path, roster, message):
    with pytest.raises(settings.ClassroomError, match=message):
        _class(tmp_path, roster)


def test_loopback():
    assert settings.is_loopback("127.0.0.1") and settings.is_loopback("::1")
    assert settings.is_loopback("localhost")
    assert not settings.is_loopback("0.0.0.0") and not settings.is_loopback("")
    assert not settings.is_loopback("10.1.2.3") and not settings.is_loopback("hub.example.org")


def test_no_shared_password_off_loopback(tmp_path, monkeypatch):
    room = _class(tmp_path, "username,role\nann,student\n", ip="0.0.0.0")
    with pytest.raises(settings.ClassroomError, match="loopback only"):
        setup(room, shared="demo")
    accounts.write_record(room.state, {"made": ["ann"], "shared_password": True})
    with pytest.raises(settings.ClassroomError, match="one shared password"):
        hubconfig.refuse_unsafe_address(room)
    monkeypatch.setenv("HUB_IP", "127.0.0.1")  # the same class on loopback: allowed
    hubconfig.refuse_unsafe_address(settings.load(tmp_path / "course.toml"))


def test_make_lab_shows_the_learners_jupyterlab():
    """make lab uses the same learner configuration as the hub's students (which the browser
    test checks on the hub): no formgrader, no course list, no Create Assignment, no news."""
    import json
    import subprocess

    from coursekit.course.lessons import ROOT

    dry = subprocess.run(
        ["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    import re

    (layers,) = re.findall(r"JUPYTER_CONFIG_PATH=(\S+)", dry)
    assert str(hubconfig.LEARNER) in layers.split(":")
    # alone, no Assignment List (it needs a class's exchange); on the hub the learner keeps it
    solo = json.loads(
        (ROOT / "classroom" / "solo-lab" / "labconfig" / "page_config.json").read_text()
    )
    assert solo["disabledExtensions"]["@jupyter/nbgrader:assignment-list"] is True
    assert str(ROOT / "classroom" / "solo-lab") in layers.split(":")
    page = json.loads((hubconfig.LEARNER / "labconfig" / "page_config.json").read_text())
    assert set(page["disabledExtensions"]) >= {
        "@jupyter/nbgrader:create-assignment",
        "@jupyter/nbgrader:formgrader",
        "@jupyter/nbgrader:course-list",
        "@jupyterlab/apputils-extension:announcements",
    }
    server = json.loads((hubconfig.LEARNER / "jupyter_server_config.json").read_text())
    extensions = server["ServerApp"]["jpserver_extensions"]
    assert extensions["nbgrader.server_extensions.formgrader"] is False
    assert server["LabApp"]["news_url"] is None
    assert "nbgrader.server_extensions.assignment_list" not in extensions  # the hub's students

"""One real class for the tests of this folder: system accounts, a course folder, nbgrader's
exchange and a JupyterHub on a free port of 127.0.0.1, made once and removed at the end.

Needs root (it makes accounts, as a class server's hub runs as root), the environment every
account can run (make classroom-env), JupyterHub's proxy (make proxy) and Chromium (make
browser); `make test` provides all four. Elsewhere these tests skip, saying why; under CI
(CI=true) a missing prerequisite fails them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from coursekit.classroom import hubconfig, settings
from coursekit.classroom.__main__ import remove, setup
from coursekit.classroom.environment import CLASS_VENV
from coursekit.classroom.hubprocess import Hub
from coursekit.course.lessons import ROOT

from ..shared import MEASURED
from .hubclient import HubClient

LOAD_STUDENTS = 30
# lesson 1 was due yesterday: everything is handed in late, and the late policy forgives it (the
# scores stay those of make check's grading); formgrader shows the due date, feedback is released
DUE = (datetime.now(UTC) - timedelta(days=1)).replace(microsecond=0)
SHOTS = ROOT / "build" / "classroom-screenshots"  # every step of the browser walk
NUMBERS = MEASURED.setdefault("the class on JupyterHub: measured", [])  # printed at the end
# as the grader, in its own terminal
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


def as_grader(room: settings.Classroom, *argv: str, timeout: float = 1200):
    """Run ``argv`` as the grader account in its course folder, with the environment of the
    grader's own terminal in formgrader's JupyterLab (the hub's course config on its path)."""
    env = hubconfig.server_environment(room, [hubconfig.CLASSROOM], CLASS_VENV / "bin")
    env["LANG"] = "C.UTF-8"
    done = subprocess.run(
        [RUNUSER, "-u", room.grader, "--", *argv],
        cwd=room.folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def require(condition: bool, message: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@dataclass
class TestClass:
    room: settings.Classroom
    passwords: dict[str, str]
    base: Path  # the folder that holds everything the class made
    prefix: str
    load: list[str] = field(default_factory=list)

    def name(self, who: str) -> str:  # "a" -> the account of student A
        return f"{self.prefix}{who}"


def _write_class(base: Path, prefix: str, load: list[str]) -> Path:
    (base / "roster.csv").write_text(
        "username,role\n"
        + f"{prefix}i,instructor\n"
        + "".join(f"{prefix}{who},student\n" for who in "abc")
        + "".join(f"{name},student\n" for name in load)
    )
    port = hubconfig.free_port()
    if True:
        (base / "course.toml").write_text(
            f"""[course]
id = "attention-course"
grader = "{prefix}g"
folder = "{base}/home/{prefix}g/attention-course"
roster = "roster.csv"
[exchange]
root = "{base}/exchange"
max_file_size_kb = 2000
max_dir_size_kb = 2000
[hub]
ip = "127.0.0.1"
port = {port}
state = "{base}/state"
home_base = "{base}/home"
[deadlines]
lesson01 = {DUE.isoformat()}
[late]
policy = "none"
[lms]
moodle_identifier = "username"
"""
        )
    return base / "course.toml"


@pytest.fixture(scope="package")
def test_class():
    require(os.geteuid() == 0, "the classroom tests make system accounts: run them as root")
    require(CLASS_VENV.exists(), f"{CLASS_VENV} is missing: make classroom-env")
    require(hubconfig.PROXY.exists(), "configurable-http-proxy is missing: make proxy")
    base = Path(tempfile.mkdtemp(prefix="classroom-test-"))
    base.chmod(0o755)  # the accounts' homes are inside: every account must pass through
    prefix = "ck" + secrets.token_hex(2)
    load = [f"{prefix}s{n:02d}" for n in range(1, LOAD_STUDENTS + 1)]
    room = settings.load(_write_class(base, prefix, load))
    try:
        passwords = setup(room)
        yield TestClass(room, passwords, base, prefix, load)
    finally:
        remove(room)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="package")
def hub(test_class):
    token = secrets.token_hex(24)
    running = Hub(
        test_class.room, test_class.base / "jupyterhub.log", env={hubconfig.ADMIN_TOKEN: token}
    )
    seconds = running.start(timeout=180)
    NUMBERS.append(f"hub start (to /hub/health answering): {seconds:.1f} s (target <= 20 s)")
    try:
        yield HubClient(running, token)
    finally:
        running.stop()
        # kept for a failed run's diagnosis: the accounts and their folders are removed
        shutil.copy2(running.log, ROOT / "build" / "classroom-test-jupyterhub.log")

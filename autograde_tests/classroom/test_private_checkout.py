"""A class set up from a private folder (mode 0700, as root's home) stops before anything is made,
naming the folder in the way and what to do, instead of JupyterHub's "Permission denied trying to
run '.../jupyterhub-singleuser'" when the first student logs in.

No accounts are made: the check runs before setup makes any, which the command-line test
asserts.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from coursekit.classroom import reach, settings
from coursekit.classroom.environment import VERSION
from coursekit.course.lessons import ROOT

pytestmark = pytest.mark.unit  # no account is made: the check stops before setup makes any

COURSE = """[course]
id = "attention-course"
grader = "{prefix}g"
folder = "{base}/home/{prefix}g/attention-course"
roster = "roster.csv"
[exchange]
root = "{base}/exchange"
max_file_size_kb = 100
max_dir_size_kb = 100
[hub]
ip = "127.0.0.1"
port = 8000
state = "{base}/state"
home_base = "{base}/home"
"""


@pytest.fixture
def base():
    """A folder every account may enter (pytest's own tmp_path is private to its user)."""
    folder = Path(tempfile.mkdtemp(prefix="private-checkout-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _course(folder: Path, base: Path, prefix: str = "ckpriv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "course.toml").write_text(COURSE.format(prefix=prefix, base=base))
    (folder / "roster.csv").write_text(f"username,role\n{prefix}i,instructor\n{prefix}a,student\n")
    return folder / "course.toml"


def _venv(folder: Path) -> Path:
    """The shape of the class's environment that the check looks at (environment.py): a venv of
    an interpreter copied beside it."""
    python = folder / "python" / "bin" / VERSION
    python.parent.mkdir(parents=True)
    python.write_text("")
    python.chmod(0o755)
    (folder / "python" / "lib" / VERSION).mkdir(parents=True)
    (folder / "python" / "lib" / VERSION / "os.py").write_text("")
    venv = folder / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / VERSION / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {python.parent}\n")
    (venv / "bin" / "python").symlink_to(python)
    program = venv / "bin" / "jupyterhub-singleuser"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return venv


def test_a_checkout_in_a_private_folder_is_named_with_what_to_do(base):
    private = base / "root-home"
    room = settings.load(_course(private / "checkout" / "classroom", base))
    venv = _venv(private / "checkout" / "build" / "classroom")
    private.chmod(0o700)
    found = [line for line in reach.problems(room, venv) if str(private) in line]
    assert len(found) == 1, found  # one folder in the way, everything it keeps out on one line
    assert f"the folder {private} (drwx------" in found[0]
    for what in ("jupyterhub-singleuser", "class's Python", "installed packages", "roster"):
        assert what in found[0], found[0]
    assert f"chmod o+x {private}" in found[0]
    with pytest.raises(settings.ClassroomError, match="Move the checkout to a folder every"):
        reach.require_reachable(room, venv)

    private.chmod(0o711)  # accounts may pass through it (not list it): nothing is kept out now
    assert not [line for line in reach.problems(room, venv) if str(private) in line]


def test_a_file_only_its_owner_may_read_and_a_missing_environment(base):
    room = settings.load(_course(base / "classroom", base))
    venv = _venv(base / "build")
    (base / "classroom" / "roster.csv").chmod(0o600)
    found = "\n".join(reach.problems(room, venv))
    assert f"the file {base / 'classroom' / 'roster.csv'} (-rw-------" in found
    assert "chmod o+r" in found
    shutil.rmtree(venv)
    assert "is missing (make classroom-env" in "\n".join(reach.problems(room, venv))


@pytest.mark.skipif(os.geteuid() != 0, reason="the classroom command runs as root only")
def test_the_classroom_command_stops_before_making_accounts(base):
    private = base / "root-home"
    course = _course(private, base)
    private.chmod(0o700)
    done = subprocess.run(
        [sys.executable, "-m", "coursekit.classroom", "up"],
        cwd=ROOT,
        env={**os.environ, "CLASSROOM_COURSE": str(course)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the class's accounts cannot reach what their servers run" in done.stderr
    assert f"the folder {private}" in done.stderr
    for name in ("ckprivg", "ckprivi", "ckpriva"):
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    assert not (base / "state").exists() and not (base / "exchange").exists()

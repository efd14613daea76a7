"""The grader's course folder and nbgrader's exchange, with the permissions each needs.

The course folder is a copy of this repository (its tracked files and any new ones git does not
ignore, with their times, so make sees the shared environment as up to date), owned by the grader
account in its private home; its ``.venv`` is a link to the environment the hub runs in
(environment.py), so ``make autograde LESSON=...`` works there as in the repository. An existing
folder is never touched again: it holds the gradebook and the class's work.

The exchange root is world-writable as nbgrader requires (0777), with the sticky bit so nobody
can remove or rename what another made there; the course's own folder in it is made now, owned
by the grader, so that no student can claim the name first.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from coursekit.classroom.environment import CLASS_VENV
from coursekit.course.lessons import ROOT

# What a copy made without git leaves out (git's ignore rules say the same, with git).
_NOT_COURSE = {".git", ".venv", "build", "work", "reports", "submitted", "autograded", "feedback"}


def repository_files(repo: Path = ROOT) -> list[Path]:
    """The repository's files as git sees them (tracked, and new ones not ignored)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            capture_output=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):  # no git, or not a clone: walk the tree
        return [
            p.relative_to(repo)
            for p in repo.rglob("*")
            if p.is_file() and not _NOT_COURSE & set(p.relative_to(repo).parts)
        ]
    return [Path(name) for name in listed.decode().split("\0") if name]


def make_course_folder(folder: Path, grader: str, repo: Path = ROOT) -> bool:
    """Copy the repository to ``folder`` for ``grader``; False if the folder already existed."""
    if folder.exists():
        return False
    for rel in repository_files(repo):
        if (repo / rel).is_file():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, folder / rel)
    (folder / ".venv").symlink_to(CLASS_VENV, target_is_directory=True)
    account = pwd.getpwnam(grader)
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, account.pw_uid, account.pw_gid)
    os.chmod(folder, 0o700)
    return True


def make_exchange(root: Path, course_id: str, grader: str) -> None:
    """``root`` (0777 + sticky, as nbgrader checks) and ``root/course_id`` owned by ``grader``."""
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o1777)
    course = root / course_id
    course.mkdir(exist_ok=True)
    account = pwd.getpwnam(grader)
    os.chown(course, account.pw_uid, account.pw_gid)
    os.chmod(course, 0o755)

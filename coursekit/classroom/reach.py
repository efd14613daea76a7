"""Can every account of the class reach what the hub makes it run? Checked before the hub starts.

The hub runs as root, but each student's and instructor's server, and formgrader, run as their own
accounts: the Python of the class's environment, its packages, the course's code and the hub's
settings for the servers must all be readable by an account that is neither their owner nor in
their group, through folders it may pass. A checkout in a private folder (mode 0700, as root's
home) fails that, and JupyterHub would only say "Permission denied trying to run
'.../jupyterhub-singleuser'" once a student logs in. This check names each folder in the way,
what it keeps out, and what to do about it, before any account is made.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import tomllib
from pathlib import Path

from coursekit.classroom.environment import CLASS_VENV, VERSION
from coursekit.classroom.hubconfig import CLASSROOM, LEARNER
from coursekit.classroom.settings import Classroom, ClassroomError


def needed(room: Classroom, venv: Path = CLASS_VENV) -> dict[str, Path]:
    """{what: path} of everything the accounts' servers read or run (the environment's parts
    only when it exists)."""
    found = {}
    if venv.exists():
        python = (venv / "bin" / "python").resolve()
        found = {
            "the servers' program (jupyterhub-singleuser)": venv / "bin" / "jupyterhub-singleuser",
            "the class's Python": venv / "bin" / "python",
            "the Python's standard library": python.parent.parent / "lib" / VERSION / "os.py",
            "the class's environment (pyvenv.cfg)": venv / "pyvenv.cfg",
            "the installed packages": venv / "lib" / VERSION / "site-packages",
        }
    found["the hub's settings for the servers"] = CLASSROOM / "nbgrader_config.py"
    found["the learners' JupyterLab settings"] = LEARNER
    found["the class's course.toml"] = room.source
    try:
        roster = tomllib.loads(room.source.read_text(encoding="utf-8"))["course"]["roster"]
        found["the class's roster"] = room.source.parent / roster
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass  # settings.load has already said what is wrong with it
    for package in ("coursekit", "attention_ref"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            found[f"the course's package {package}"] = Path(spec.origin)
    # made by setup with the modes they need, but inside folders that must let accounts through
    found["the accounts' homes"] = room.home_base
    found["nbgrader's exchange"] = room.exchange
    return found


def _mode(path: Path) -> str:
    info = path.stat()
    return f"{stat.filemode(info.st_mode)}, owner uid {info.st_uid}"


def obstacle(path: Path) -> tuple[Path, str] | None:
    """The first thing that keeps another account from ``path``: (the folder or file, what it
    lacks), or None when every account may reach it."""
    path = Path(os.path.abspath(path))
    if not path.exists() and not path.is_symlink():
        return path, "missing"
    return _way_to(path)


def _way_to(path: Path) -> tuple[Path, str] | None:
    for folder in reversed(path.parents):
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder, "o+x"
    target = path.resolve()
    if target != path:  # a link: the way to what it points at counts too
        return _way_to(target)
    mode = path.stat().st_mode
    wanted = stat.S_IROTH | (stat.S_IXOTH if path.is_dir() or mode & stat.S_IXUSR else 0)
    if mode & wanted != wanted:
        return path, "o+rx" if wanted & stat.S_IXOTH else "o+r"
    return None


def problems(room: Classroom, venv: Path = CLASS_VENV) -> list[str]:
    """What keeps the class's accounts out, one line per folder or file in the way."""
    blocked: dict[tuple[Path, str], list[str]] = {}
    if not venv.exists():
        blocked[venv, "missing"] = []
    for what, path in needed(room, venv).items():
        if path in (room.home_base, room.exchange):  # setup makes them: their way must be open
            while not path.exists():
                path = path.parent
        found = obstacle(path)
        if found is not None:
            blocked.setdefault(found, []).append(f"{what} ({path})")
    lines = []
    for (where, lacks), things in blocked.items():
        if lacks == "missing":
            lines.append(f"{where} is missing (make classroom-env builds the class's environment)")
            continue
        kind = "folder" if where.is_dir() else "file"
        lines.append(
            f"the {kind} {where} ({_mode(where)}) keeps other accounts from "
            f"{'; '.join(things)}: it needs {lacks} (chmod {lacks} {where})"
        )
    return lines


def require_reachable(room: Classroom, venv: Path = CLASS_VENV) -> None:
    """Raise ClassroomError naming every folder in the way, with what to do."""
    found = problems(room, venv)
    if found:
        raise ClassroomError(
            "the class's accounts cannot reach what their servers run (each student's JupyterLab "
            "and formgrader run as their own account, from this checkout's environment):\n  "
            + "\n  ".join(found)
            + "\nMove the checkout to a folder every account may pass (e.g. under /opt or /srv), "
            "or open the folders above as shown (o+x on a folder lets accounts pass through it, "
            "not list it); then run make hub again."
        )

"""The class, read from classroom/course.toml and the roster it names.

Every part of the classroom reads the class through :func:`load`: the hub's config, nbgrader's
config on the hub, the account set-up and the tests. ``CLASSROOM_COURSE`` names another
course.toml (the tests make a class of their own); ``HUB_IP`` and ``HUB_PORT`` override the hub's
address. Bad input stops with a message that says which file and line is wrong.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course import coursefile
from coursekit.course.coursefile import Member, read_roster
from coursekit.course.lessons import ROOT

DEFAULT_COURSE = ROOT / coursefile.RELATIVE
# The class's configuration is wrong; the message says where. (coursekit.course.coursefile reads
# course.toml and the roster for the classroom and for grading alike.)
ClassroomError = coursefile.CourseFileError
__all__ = ["Classroom", "ClassroomError", "Member", "is_loopback", "load", "read_roster"]


@dataclass(frozen=True)
class Classroom:
    course_id: str
    grader: str
    folder: Path  # the grader's course folder
    exchange: Path
    max_file_size_kb: int
    max_dir_size_kb: int
    ip: str
    port: int
    state: Path
    home_base: Path
    roster: tuple[Member, ...] = field(default=())
    source: Path = DEFAULT_COURSE  # the course.toml this was read from

    def members(self, role: str) -> list[str]:
        return [m.username for m in self.roster if m.role == role]

    @property
    def students(self) -> list[str]:
        return self.members("student")

    @property
    def instructors(self) -> list[str]:
        return self.members("instructor")

    @property
    def loopback(self) -> bool:
        return is_loopback(self.ip)

    @property
    def url(self) -> str:
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"http://{host}:{self.port}/"


def is_loopback(ip: str) -> bool:
    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False  # a name or "" (every address): not provably loopback


def load(path: str | os.PathLike | None = None) -> Classroom:
    """The class described by ``path`` (default: $CLASSROOM_COURSE, else classroom/course.toml)."""
    path = Path(path).resolve() if path else coursefile.course_file()
    data = coursefile.read(path)
    course, exchange, hub = (
        coursefile.table(data, name, path) for name in ("course", "exchange", "hub")
    )
    grader = coursefile.username(_get(course, "grader", str, path), f"{path}: [course] grader")
    roster = read_roster(path.parent / _get(course, "roster", str, path))
    if grader in {m.username for m in roster}:
        raise ClassroomError(f"{path}: the grader account {grader!r} must not be in the roster")
    port = int(os.environ.get("HUB_PORT") or _get(hub, "port", int, path))
    if not 0 < port < 65536:
        raise ClassroomError(f"HUB_PORT / {path}: port {port} is not a TCP port")
    return Classroom(
        course_id=_course_id(_get(course, "id", str, path), path),
        grader=grader,
        folder=Path(_get(course, "folder", str, path)),
        exchange=Path(_get(exchange, "root", str, path)),
        max_file_size_kb=_get(exchange, "max_file_size_kb", int, path),
        max_dir_size_kb=_get(exchange, "max_dir_size_kb", int, path),
        ip=os.environ.get("HUB_IP") or _get(hub, "ip", str, path),
        port=port,
        state=Path(_get(hub, "state", str, path)),
        home_base=Path(_get(hub, "home_base", str, path)),
        roster=tuple(roster),
        source=path,
    )


def _course_id(course_id: str, path: Path) -> str:
    # nbgrader puts it in exchange paths and JupyterHub in the service's URL.
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", course_id):
        raise ClassroomError(f"{path}: [course] id {course_id!r}: letters, digits, '_' and '-'")
    return course_id


_get = coursefile.get

"""The class's description, classroom/course.toml and the roster beside it, read in one place.

Two layers read it: the classroom (coursekit.classroom.settings: accounts, the hub, the exchange)
and grading (coursekit.grading: due dates, the late policy, extensions, the similarity threshold,
the students an export to the LMS must name). Both find the file here, read its TOML and its
roster here, and stop with the same kind of message, one that says which file and line is wrong.

``CLASSROOM_COURSE`` names another course.toml (the tests make classes of their own); otherwise a
course folder's own ``classroom/course.toml`` is the class's.
"""

from __future__ import annotations

import csv
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from coursekit.course.lessons import ROOT

ENVIRONMENT = "CLASSROOM_COURSE"
RELATIVE = Path("classroom") / "course.toml"
ROLES = ("student", "instructor")
# What useradd accepts on every distribution (Debian's default NAME_REGEX, without capitals).
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# The roster's first two columns, then any of these (what an export to an LMS needs to name a
# student there: Canvas matches on its user id, SIS user id or SIS login id; Moodle on the
# username, the email address or the ID number).
REQUIRED = ("username", "role")
OPTIONAL = ("name", "email", "lms_id", "sis_user_id", "sis_login_id", "section")
_MISSING = object()


class CourseFileError(ValueError):
    """The class's description is wrong; the message says where."""


@dataclass(frozen=True)
class Member:
    username: str
    role: str  # "student" or "instructor"
    name: str = ""  # as the LMS shows it, e.g. "Lovelace, Ada"
    email: str = ""
    lms_id: str = ""  # the LMS's own id of the person (Canvas's user ID)
    sis_user_id: str = ""  # the student information system's id (Canvas's SIS User ID)
    sis_login_id: str = ""  # the institution's login (Canvas's SIS Login ID)
    section: str = ""


def course_file(course: Path | None = None) -> Path:
    """The class's course.toml: $CLASSROOM_COURSE, else ``course``'s classroom/course.toml
    (default: this repository's)."""
    named = os.environ.get(ENVIRONMENT)
    return Path(named).resolve() if named else (Path(course or ROOT) / RELATIVE).resolve()


def read(path: Path) -> dict:
    """The TOML of ``path``, or a CourseFileError that says what is wrong with it."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CourseFileError(f"{path}: no such course file") from None
    except tomllib.TOMLDecodeError as error:
        raise CourseFileError(f"{path}: not valid TOML: {error}") from None


def table(data: dict, name: str, path: Path, required: bool = True) -> dict:
    """The table ``[name]`` (``{}`` when it is optional and absent)."""
    found = data.get(name, None if required else {})
    if not isinstance(found, dict):
        wrong = "missing the" if found is None else "not a table:"
        raise CourseFileError(f"{path}: {wrong} [{name}] table")
    return found


def get(section: dict, key: str, kind, path: Path, default=_MISSING):
    """``section[key]``, which must be a ``kind`` (a type or a tuple of types; never a bool
    for a number)."""
    if key not in section and default is not _MISSING:
        return default
    value = section.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise CourseFileError(f"{path}: {key!r} must be a {names}, got {value!r}")
    return value


def username(name: str, where: str) -> str:
    if not USERNAME.match(name):
        raise CourseFileError(
            f"{where}: {name!r} is not a valid account name (lower-case letters, digits, '_' "
            "and '-', starting with a letter or '_', at most 32 characters)"
        )
    return name


def roster_path(path: Path) -> Path:
    """The roster a course.toml names ([course] roster, relative to the course.toml)."""
    course = table(read(path), "course", path)
    return Path(path).parent / get(course, "roster", str, path)


def read_roster(path: Path) -> list[Member]:
    """``username,role`` rows (a header line first; more columns from OPTIONAL after those two);
    every username once, every role known."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # Excel's "CSV UTF-8" has a BOM
    except FileNotFoundError:
        raise CourseFileError(f"{path}: no such roster") from None
    rows = list(csv.reader(text.splitlines()))
    header = [c.strip().lower() for c in rows[0]] if rows else []
    if header[:2] != list(REQUIRED):
        raise CourseFileError(f"{path}: the first line must be the header 'username,role'")
    unknown = [c for c in header[2:] if c not in OPTIONAL]
    if unknown or len(set(header)) != len(header):
        raise CourseFileError(
            f"{path}: header columns {unknown or header} are unknown or repeated; after "
            f"'username,role' a roster may have {', '.join(OPTIONAL)}"
        )
    members, seen = [], set()
    for number, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        member = _member(header, row, f"{path}, line {number}")
        if member.username in seen:
            raise CourseFileError(f"{path}, line {number}: {member.username!r} is listed twice")
        seen.add(member.username)
        members.append(member)
    return members


def _member(header: list[str], row: list[str], where: str) -> Member:
    if len(row) != len(header):
        raise CourseFileError(f"{where}: expected '{','.join(header)}', got {','.join(row)!r}")
    values = dict(zip(header, (cell.strip() for cell in row)))
    values["username"] = username(values["username"], where)
    values["role"] = values["role"].lower()
    if values["role"] not in ROLES:
        raise CourseFileError(f"{where}: role {values['role']!r} is not one of {', '.join(ROLES)}")
    return Member(**values)

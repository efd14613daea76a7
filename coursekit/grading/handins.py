"""Which hand-in counts when a student hands a lesson in more than once.

nbgrader keeps every hand-in in its exchange (``<root>/<course id>/inbound/
<student>+<lesson>+<time>+<random>/``, course.toml's ``[exchange] root`` and ``[course] id``) and
collects the latest into submitted/: an on-time submission followed by a late fix is graded, and
penalised, as the late fix. ``[late] counts`` in course.toml says which counts:

* ``latest`` (the default): the one nbgrader collected;
* ``best-on-time``: of the hand-ins before the student's due date (with their extension), the one
  the tests give most points (the later of two equal ones); where none came in on time, the
  latest, as collected, with its penalty.

For ``best-on-time`` class grading (coursekit.grading.classgrade) calls :func:`settle` before it
grades: the student's on-time hand-ins are graded in a scratch course (each in the same sandbox,
as a class is), and the best is put into submitted/ with the time it came in (timestamp.txt, as
nbgrader's collect writes it). Nothing is lost: every hand-in stays in the exchange, and
reports/<lesson>/handins.json records which one counts for whom, and why.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from coursekit.course import coursefile
from coursekit.course.lessons import Lesson

RECORD = "handins.json"  # in reports/<lesson>/
STAMP = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt, in UTC


@dataclass(frozen=True)
class HandIn:
    student: str
    when: datetime  # UTC
    folder: Path  # in the exchange's inbound


def inbound(course: Path) -> Path | None:
    """The exchange's inbound folder of the class (None where course.toml names none)."""
    path = coursefile.course_file(course)
    if not path.exists():
        return None
    data = coursefile.read(path)
    exchange = coursefile.table(data, "exchange", path, required=False)
    course_id = coursefile.table(data, "course", path, required=False).get("id")
    if "root" not in exchange or not course_id:
        return None
    return Path(exchange["root"]) / course_id / "inbound"


def hand_ins(folder: Path | None, assignment: str) -> dict[str, list[HandIn]]:
    """{student: their hand-ins of ``assignment``, the latest first} in the inbound ``folder``."""
    from nbgrader.utils import parse_utc

    found: dict[str, list[HandIn]] = {}
    for path in sorted(folder.glob(f"*+{assignment}+*")) if folder and folder.is_dir() else []:
        parts = path.name.rsplit("+", 3)
        if len(parts) < 3 or parts[1] != assignment:
            continue
        when = parse_utc(parts[2]).replace(tzinfo=UTC)
        found.setdefault(parts[0], []).append(HandIn(parts[0], when, path))
    return {s: sorted(items, key=lambda h: h.when, reverse=True) for s, items in found.items()}


# grade(candidates: {name: folder of a hand-in}) -> {name: points the tests gave}
Grader = Callable[[dict[str, Path]], dict[str, float]]


def settle(course: Path, lesson: Lesson, deadlines, grade: Grader) -> dict[str, dict]:
    """Put into submitted/ the hand-in that counts for each student (``best-on-time``: see the
    module's docstring); returns and records {student: what counts and why}."""
    everyone = hand_ins(inbound(course), lesson.assignment)
    on_time = {}
    for student, items in everyone.items():
        due = deadlines.student_due(student, lesson.assignment)
        kept = [h for h in items if due is None or h.when <= due]
        if kept:
            on_time[student] = kept
    record = Path(course) / "reports" / lesson.assignment / RECORD
    known = json.loads(record.read_text()).get("points", {}) if record.exists() else {}
    todo = {h.folder.name: h for kept in on_time.values() if len(kept) > 1 for h in kept
            if h.folder.name not in known}  # fmt: skip  # a hand-in never changes: graded once
    named = {f"{h.student}--{i}": h for i, h in enumerate(todo.values())}
    graded = grade({name: h.folder for name, h in named.items()}) if named else {}
    points = known | {h.folder.name: graded.get(name, 0.0) for name, h in named.items()}
    chosen = {}
    for student, kept in on_time.items():
        best = max(kept, key=lambda h: (points.get(h.folder.name, 0.0), h.when))
        _install(course, lesson, best)
        why = "the only hand-in on time"
        if len(kept) > 1:
            why = f"the best of {len(kept)} on time: {points[best.folder.name]:g} points"
        chosen[student] = {"counts": best.folder.name, "handed_in": best.when.isoformat(),
                           "why": why, "hand_ins": len(everyone[student])}  # fmt: skip
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"counts": chosen, "points": points}, indent=1, sort_keys=True))
    return chosen


def _install(course: Path, lesson: Lesson, hand_in: HandIn) -> None:
    """``hand_in`` as the student's submission, as nbgrader's collect puts one (unchanged when
    it is there already: the ledger then sees no new submission)."""
    target = lesson.in_course(course).student_folder("submitted", hand_in.student)
    stamp = hand_in.when.strftime(STAMP)
    same = (target / "timestamp.txt").exists() and (target / "timestamp.txt").read_text().strip()
    if same == stamp:
        return
    tmp = target.with_name(target.name + ".settling")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(hand_in.folder, tmp, symlinks=True)
    (tmp / "timestamp.txt").write_text(stamp)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.replace(target)

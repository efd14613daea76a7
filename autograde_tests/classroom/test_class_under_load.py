"""Thirty students at once, over the hub's REST API and plain HTTP (no browsers), and a hub
restarted in the middle of the class.

Each student's server is started through the API; each student fetches lesson 1, writes their
own name into it and submits, all at the same moment; then the hub is stopped and started again
(the students' servers keep running and are taken back; the exchange is untouched), everyone
hands in a second version, and the grader collects: 30 submissions, each the latest version of
its own student's notebook. Start-up, fetch and submit times are printed at the end of the run
(numbers, not assertions: they depend on what else the machine is doing).
"""

from __future__ import annotations

import base64
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from coursekit.course.lessons import lesson as find_lesson

from .conftest import NUMBERS, as_grader
from .hubclient import StudentClient

pytestmark = [pytest.mark.hub, pytest.mark.accounts]

LESSON = find_lesson("lesson01")
NOTEBOOK = f"{LESSON.assignment}/{LESSON.name}.ipynb"


def _at_once(students, action) -> list[float]:
    """Run ``action(student)`` for every student at the same moment; the seconds each took."""

    def timed(student):
        began = time.monotonic()
        action(student)
        return time.monotonic() - began

    with ThreadPoolExecutor(len(students)) as pool:
        return list(pool.map(timed, students))


def _percentiles(what: str, seconds: list[float], target: str = "") -> None:
    cuts = statistics.quantiles(seconds, n=20)  # cuts[9]: median, cuts[18]: 95th percentile
    NUMBERS.append(
        f"{what}, {len(seconds)} at once: p50 {cuts[9]:.2f} s, p95 {cuts[18]:.2f} s, "
        f"max {max(seconds):.2f} s {target}".rstrip()
    )


def _hand_in(student: StudentClient, version: int) -> None:
    notebook = student.get_notebook(NOTEBOOK)
    notebook["cells"][0]["source"] = f"handed in by {student.name}, version {version}"
    student.put_notebook(NOTEBOOK, notebook)
    answer = student.assignments("submit", "attention-course", LESSON.assignment)
    assert "success" in answer and answer["success"], answer


def _inbound(room) -> dict[str, list[str]]:
    """{student: [their submissions in the exchange]}."""
    found: dict[str, list[str]] = {}
    for entry in sorted((room.exchange / room.course_id / "inbound").iterdir()):
        found.setdefault(entry.name.split("+")[0], []).append(entry.name)
    return found


def test_thirty_students_at_once_and_a_restarted_hub(test_class, hub):
    room, names = test_class.room, test_class.load
    if not (room.exchange / room.course_id / "outbound" / LESSON.assignment).exists():
        as_grader(room, "nbgrader", "release_assignment", LESSON.assignment)  # run alone
    began = time.monotonic()
    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(hub.start_server, names))
        ready = list(pool.map(hub.wait_ready, names))
    NUMBERS.append(
        f"{len(names)} servers started at once: all ready after {time.monotonic() - began:.0f} s "
        f"(median {statistics.median(ready):.0f} s)"
    )
    students = [StudentClient(hub.url, name, hub.user_token(name)) for name in names]
    fetched = _at_once(
        students, lambda s: s.assignments("fetch", room.course_id, LESSON.assignment)
    )
    _percentiles("fetch", fetched)
    submitted = _at_once(students, lambda s: _hand_in(s, 1))
    _percentiles("submit", submitted, "(target p95 <= 2 s)")
    before = _inbound(room)
    assert all(len(before.get(name, [])) == 1 for name in names), before

    hub.hub.stop()
    seconds = hub.hub.start(timeout=180)
    NUMBERS.append(f"hub restart with {len(names) + 4} servers running: {seconds:.1f} s")
    assert all(student.status() == 200 for student in students)  # taken back, through the proxy
    assert _inbound(room) == before  # nothing lost

    _percentiles("submit after the restart", _at_once(students, lambda s: _hand_in(s, 2)))
    as_grader(room, "nbgrader", "collect", LESSON.assignment)
    for name in names:
        collected = room.folder / "submitted" / name / NOTEBOOK
        first = nbformat.read(collected, as_version=4).cells[0].source
        assert first == f"handed in by {name}, version 2", (name, first)
    assert all(len(found) == 2 for name, found in _inbound(room).items() if name in names)


def test_a_huge_submission_is_refused_with_a_message(test_class, hub):
    name = test_class.load[0]
    hub.start_server(name)
    hub.wait_ready(name)
    student = StudentClient(hub.url, name, hub.user_token(name))
    student.assignments("fetch", test_class.room.course_id, LESSON.assignment)  # if not yet
    huge = base64.b64encode(b"\0" * (test_class.room.max_dir_size_kb + 500) * 1000).decode()
    answer = student.session.put(
        f"{student.base}/api/contents/{LESSON.assignment}/data.bin",
        json={"type": "file", "format": "base64", "content": huge},
        timeout=120,
    )
    answer.raise_for_status()
    refused = student.assignments("submit", test_class.room.course_id, LESSON.assignment)
    assert refused["success"] is False
    assert "Directory size is too big" in refused["value"], refused["value"][-500:]

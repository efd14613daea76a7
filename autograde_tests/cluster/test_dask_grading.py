"""Class grading on a real Dask cluster (conftest.py: a scheduler and two workers on 127.0.0.1).

One synthetic class of lesson 1 is built once and graded twice, each time in a copy of its own:
on this machine (the default local cluster) and through the cluster's scheduler with
``python -m coursekit.grading.classgrade --scheduler``, where one worker is killed -- its whole
session, as a machine dies -- once the first batch is merged. The two gradebooks must agree
student by student; the killed worker's batches are graded again elsewhere and counted once.
A worker that cannot see the course folder stops a run before anything is graded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import dask
import pytest

from coursekit.democlass.synthetic import build_synthetic
from coursekit.grading import classgrade, cluster
from coursekit.grading.gradebook import open_gradebook
from coursekit.grading.tempcourse import GradingError

from .conftest import LESSON, copy_course, stop

pytestmark = [pytest.mark.chain, pytest.mark.cluster]

SIZE = 8  # three solved, one blank, two planted mistakes, two broken: four batches of two
OPTIONS = ["--timeout", "10"]  # the synthetic class's cells are quick; a loaded machine is slow
EXTRA = ["--Execute.timeout=10"]


@pytest.fixture(scope="module")
def synthetic_class(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("dask-class") / "course"
    build_synthetic(course, LESSON, SIZE)
    return course


@pytest.fixture(scope="module")
def graded_here(synthetic_class, tmp_path_factory) -> classgrade.ClassReport:
    course = copy_course(synthetic_class, tmp_path_factory.mktemp("here") / "course")
    report = classgrade.grade_class(course, LESSON, extra=EXTRA, progress=False)
    print("\n" + report.table())
    return report


@dataclass
class ClusterRun:
    course: Path
    output: str  # what classgrade printed
    returncode: int
    killed: str  # the address of the worker killed in the middle of the run
    seconds: float


def _ledger(course: Path) -> dict:
    path = course / "reports" / LESSON.assignment / "ledger.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _kill_a_busy_worker(dask_cluster, course: Path, run: subprocess.Popen) -> str:
    """Once a batch is merged, SIGKILL the session of a worker that holds a batch (nanny,
    worker, nbgrader, kernels: as a machine dies); return its address."""
    from distributed import Client

    names = {address: name for name, address in dask_cluster.wait_for(["w1", "w2"]).items()}
    deadline = time.monotonic() + 900
    with Client(dask_cluster.address, set_as_default=False) as client:
        while run.poll() is None and time.monotonic() < deadline:
            merged = any(e["status"] == "graded" for e in _ledger(course).values())
            busy = [a for a, keys in client.processing().items() if keys and a in names]
            if merged and busy:
                os.killpg(dask_cluster.workers[names[busy[0]]].pid, signal.SIGKILL)
                return busy[0]
            time.sleep(0.2)
    pytest.fail("the run ended before a worker could be killed in the middle of it")


@pytest.fixture(scope="module")
def graded_on_cluster(synthetic_class, dask_cluster, tmp_path_factory) -> ClusterRun:
    course = copy_course(synthetic_class, tmp_path_factory.mktemp("cluster") / "course")
    log = course.parent / "classgrade.log"
    start = time.monotonic()
    with log.open("w") as out:
        run = subprocess.Popen(
            [
                *(sys.executable, "-m", "coursekit.grading.classgrade", LESSON.assignment),
                *("--course", str(course), "--scheduler", dask_cluster.address),
                *("--batch", "2", *OPTIONS),  # small batches: several on each worker
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            killed = _kill_a_busy_worker(dask_cluster, course, run)
            run.wait(timeout=900)
        finally:
            stop(run, grace=5)
    output = log.read_text()
    print(f"\nkilled {killed}\n{output}")
    return ClusterRun(course, output, run.returncode, killed, time.monotonic() - start)


def _gradebook(course: Path) -> dict:
    """{student: (flagged, {grade: (auto, manual, needs manual grading)})}, no timestamps."""
    with open_gradebook(course / "gradebook.db") as gradebook:
        return {
            s.student.id: (
                s.notebooks[0].flagged,
                {
                    g.name: (g.auto_score, g.manual_score, g.needs_manual_grade)
                    for g in s.notebooks[0].grades
                },
            )
            for s in gradebook.find_assignment(LESSON.assignment).submissions
        }


def _rows(course: Path) -> dict:
    rows = classgrade.report_only(course, LESSON).rows
    return {r.student: (r.status, r.score, r.auto, sorted(r.failed)) for r in rows}


def test_the_cluster_gives_the_gradebook_grading_here_gives(graded_here, graded_on_cluster):
    here = graded_here.lesson.root
    assert graded_on_cluster.returncode == 0, graded_on_cluster.output
    assert len(_gradebook(here)) == SIZE
    assert _gradebook(graded_on_cluster.course) == _gradebook(here)
    assert _rows(graded_on_cluster.course) == _rows(here)
    statuses = {s: e["status"] for s, e in _ledger(here).items()}
    assert {s: e["status"] for s, e in _ledger(graded_on_cluster.course).items()} == statuses


def test_a_killed_workers_batches_were_rerun_elsewhere_and_counted_once(
    graded_here, graded_on_cluster
):
    run = graded_on_cluster
    assert run.returncode == 0, run.output
    reruns = [line for line in run.output.splitlines() if line.startswith("rerun: batch")]
    assert reruns and all(run.killed in line for line in reruns), run.output
    assert not any(line.endswith(f"graded again by {run.killed}") for line in reruns), run.output
    assert f"graded {graded_here.graded} notebooks in" in run.output, "a notebook counted twice?"
    autograded = sorted(p.parts[-3] for p in (run.course / "autograded").glob("*/*/*.ipynb"))
    assert autograded == sorted(_ledger(run.course)), "one autograded notebook per student"
    folder = run.course / "reports" / LESSON.assignment
    assert not list(folder.glob("work-*")), "the batches' attempt folders were left behind"
    assert "Rerun by Dask" in (folder / "review.md").read_text()
    assert "dashboard: http://127.0.0.1:" in run.output  # the scheduler serves Dask's dashboard
    print(f"through the cluster, one worker killed: {run.seconds:.0f} s; " + reruns[0])


def _hiding(folder: Path) -> tuple[str, ...]:
    """A command prefix that runs a program where ``folder`` is an empty tmpfs: a machine
    without the shared volume (a mount namespace of its own)."""
    script = 'mount -t tmpfs coursekit-hidden "$0" && exec "$@"'
    user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    prefix = (
        "unshare",
        *user,
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        str(folder),
    )
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        message = "cannot make a mount namespace here (unshare): no worker without the course"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return prefix


def test_a_worker_that_cannot_see_the_course_stops_the_run_before_grading(
    dask_cluster, synthetic_class, tmp_path
):
    shared = tmp_path / "shared"  # what the blind worker's machine does not mount
    course = copy_course(synthetic_class, shared / "course")
    blind = dask_cluster.add_worker("blind", _hiding(shared))
    try:
        address = dask_cluster.wait_for(["blind"])["blind"]
        with pytest.raises(GradingError) as error:
            classgrade.grade_class(
                course, LESSON, extra=EXTRA, progress=False, scheduler=dask_cluster.address
            )
    finally:
        stop(blind)
        del dask_cluster.workers["blind"]
    message = str(error.value)
    assert f"worker {address} cannot" in message and str(course) in message, message
    assert "Nothing was graded" in message
    print(message)
    assert _gradebook(course) == {} and _ledger(course) == {}
    assert not (course / "autograded").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_scheduler_that_cannot_be_reached_is_named(synthetic_class, tmp_path, monkeypatch):
    course = copy_course(synthetic_class, tmp_path / "course")
    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 2)
    nobody = f"tcp://127.0.0.1:{_free_port()}"
    for address, says in ((nobody, "Timed out"), ("tcp//typo", "missing port")):
        with pytest.raises(GradingError) as error:
            classgrade.grade_class(course, LESSON, progress=False, scheduler=address)
        assert f"cannot reach the Dask scheduler at {address!r}" in str(error.value)
        assert says in str(error.value), str(error.value)
    with pytest.raises(GradingError, match="--workers sizes a cluster on this machine"):
        classgrade.grade_class(course, LESSON, 2, progress=False, scheduler=nobody)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", nobody)  # Dask's own setting, read by Dask
    dask.config.refresh()
    try:
        with pytest.raises(GradingError, match=f"at {nobody!r}"):
            classgrade.grade_class(course, LESSON, progress=False)
    finally:
        monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
        dask.config.refresh()
    assert _gradebook(course) == {} and _ledger(course) == {}

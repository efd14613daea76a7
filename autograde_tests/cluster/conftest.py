"""A real Dask cluster on 127.0.0.1 for the class-grading tests: ``dask scheduler`` and
``dask worker`` processes from this environment, each in a working directory of its own, on free
ports (the scheduler writes its address to a scheduler file, Dask's own way to find it). Every
process is started in a session of its own, so that a test can kill one worker as a machine
dies (its nanny, worker, nbgrader and kernels together), and stopped by the fixture that
started it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from coursekit.course.lessons import lesson as find_lesson
from coursekit.course.nbgrader_cli import BINDIR, nbgrader_env
from coursekit.grading.cluster import QUIET_LOCAL_CLUSTER

from ..shared import leave_out_unless_selected

LESSON = find_lesson("lesson01")  # the fastest lesson
START_SECONDS = 120  # a loaded 2-core machine starts a Python process slowly
# Dask's settings for a cluster of this machine (coursekit.grading.cluster), as environment
# variables of the processes: its scheduler and workers sampled their threads' stacks and
# measured their event loops and the host many times a second, a sixth of a core in all while
# idle, and CPU the graded kernels need on 2 cores.
QUIET = {
    "DASK_" + "__".join(setting.upper().replace("-", "_").split(".")): str(value)
    for setting, value in QUIET_LOCAL_CLUSTER.items()
}


def pytest_collection_modifyitems(config, items):
    leave_out_unless_selected(config, items, LESSON.assignment, Path(__file__).parent)


def _start(args: list[str], folder: Path, prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    """``dask ARGS`` in ``folder`` (its working directory and log), in a session of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "dask.log").open("w") as log:
        return subprocess.Popen(
            [*prefix, str(BINDIR / "dask"), *args],
            cwd=folder,
            env=nbgrader_env(**QUIET),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM its session (a nanny closes its worker), SIGKILL what is left after ``grace``."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


@dataclass
class DaskCluster:
    """A scheduler and its workers; ``workers`` by name."""

    folder: Path
    scheduler: subprocess.Popen
    address: str = ""
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)

    def add_worker(self, name: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen:
        """A worker with one thread (one batch at a time), working in a folder of its own;
        ``prefix`` runs it inside another command (unshare: a worker that sees less)."""
        folder = self.folder / name
        args = ["worker", self.address, "--name", name, "--nthreads", "1", "--no-dashboard"]
        process = _start([*args, "--local-directory", str(folder)], folder, prefix)
        self.workers[name] = process
        return process

    def wait_for(self, names: list[str]) -> dict[str, str]:
        """{name: address} once every named worker has joined."""
        from distributed import Client

        deadline = time.monotonic() + START_SECONDS
        with Client(self.address, set_as_default=False) as client:
            while time.monotonic() < deadline:
                joined = {
                    info["name"]: address
                    for address, info in client.scheduler_info(n_workers=-1)["workers"].items()
                }
                if set(names) <= set(joined):
                    return {name: joined[name] for name in names}
                for name in names:
                    if self.workers[name].poll() is not None:
                        log = (self.folder / name / "dask.log").read_text()[-2000:]
                        pytest.fail(f"dask worker {name} exited:\n{log}")
                time.sleep(0.5)
        pytest.fail(f"dask workers {names} did not join {self.address} in {START_SECONDS} s")

    def stop(self) -> None:
        for process in self.workers.values():
            stop(process)
        stop(self.scheduler)


def start_cluster(folder: Path, workers: list[str]) -> DaskCluster:
    """``dask scheduler`` on a free port of 127.0.0.1 (with its dashboard, also on a free port)
    and the named workers, joined."""
    address_file = folder / "scheduler.json"
    scheduler = _start(
        [
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--dashboard-address",
            "127.0.0.1:0",
            "--scheduler-file",
            str(address_file),
        ],
        folder / "scheduler",
    )
    cluster = DaskCluster(folder, scheduler)
    deadline = time.monotonic() + START_SECONDS
    while not cluster.address:
        if scheduler.poll() is not None or time.monotonic() > deadline:
            cluster.stop()
            log = (folder / "scheduler" / "dask.log").read_text()[-2000:]
            pytest.fail(f"dask scheduler did not start:\n{log}")
        time.sleep(0.3)
        try:
            cluster.address = json.loads(address_file.read_text())["address"]
        except (FileNotFoundError, ValueError):  # not written yet, or half written
            continue
    for name in workers:
        cluster.add_worker(name)
    try:
        cluster.wait_for(workers)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="package")
def dask_cluster(tmp_path_factory):
    """A scheduler and two workers, ``w1`` and ``w2``, for this folder's tests, stopped after
    them: idle, a cluster still takes about 5 % of a core with QUIET's settings (15 % with Dask's
    defaults), which a session-long cluster took from every suite that ran after it."""
    cluster = start_cluster(tmp_path_factory.mktemp("dask"), ["w1", "w2"])
    yield cluster
    cluster.stop()


def copy_course(course: Path, dest: Path) -> Path:
    """A copy of a course that has not been graded yet (one gradebook per grading run)."""
    shutil.copytree(course, dest, symlinks=True)
    return dest

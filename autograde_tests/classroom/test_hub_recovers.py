"""A hub stopped without its clean-up comes back on the next start, saying what it stopped.

First with stand-ins (a second, no root): processes that look like this class's hub, proxy and
formgrader to coursekit/classroom/leftovers.py, and one that only holds a pid file's number.
Then the real class's hub, its process group killed: its proxy and formgrader outlive it, and the
next start stops them and serves formgrader again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from coursekit.classroom.hubconfig import free_port
from coursekit.classroom.leftovers import CONFIG, CONTROLLER, StillServed, stop_leftovers

from .hubclient import logged_in

COURSE = "attention-course"
SLEEP = "import time; time.sleep(120)"


def _spawn(*argv: str, cwd=None, **env: str) -> subprocess.Popen:
    """A process of its own session, as JupyterHub starts its proxy and services."""
    clean = {k: v for k, v in os.environ.items() if k != CONTROLLER}
    return subprocess.Popen(
        [sys.executable, "-c", SLEEP, *argv], cwd=cwd, env={**clean, **env}, start_new_session=True
    )


@pytest.fixture
def state(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    ports = {"hub": free_port(), "proxy_api": free_port(), "formgrader": free_port()}
    (folder / "ports.json").write_text(json.dumps(ports))
    started: list[subprocess.Popen] = []
    yield folder, ports, started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _record(folder, name: str, process: subprocess.Popen) -> None:
    (folder / name).write_text(str(process.pid))


@pytest.mark.unit
def test_what_a_killed_hub_left_running_is_stopped_and_named(state):
    folder, ports, started = state
    hub = _spawn(str(CONFIG), cwd=folder)  # an orphan: no starter recorded
    proxy = _spawn("configurable-http-proxy", "--api-port", str(ports["proxy_api"]))
    formgrader = _spawn(
        JUPYTERHUB_SERVICE_NAME=COURSE,
        JUPYTERHUB_API_URL=f"http://127.0.0.1:{ports['hub']}/hub/api",
    )
    other_class = _spawn(JUPYTERHUB_SERVICE_NAME=COURSE, JUPYTERHUB_API_URL="http://127.0.0.1:1/")
    started += [hub, proxy, formgrader, other_class]
    _record(folder, "jupyterhub.pid", hub)
    _record(folder, "proxy.pid", proxy)
    time.sleep(0.5)  # the stand-ins' command lines are in place

    done = stop_leftovers(folder, COURSE, timeout=10)

    assert done == [
        f"stopped the hub a previous start left running (pid {hub.pid})",
        f"stopped the proxy a previous hub left running (pid {proxy.pid})",
        f"stopped the formgrader a previous hub left running (pid {formgrader.pid})",
    ]
    for process in (hub, proxy, formgrader):
        assert process.wait(10) is not None
    assert other_class.poll() is None  # another class's formgrader is not ours
    assert not (folder / "jupyterhub.pid").exists() and not (folder / "proxy.pid").exists()


@pytest.mark.unit
def test_a_pid_file_whose_number_is_now_something_else_is_only_removed(state):
    folder, _, started = state
    stranger = _spawn("a program that is not the proxy")
    started.append(stranger)
    _record(folder, "proxy.pid", stranger)
    time.sleep(0.5)
    assert stop_leftovers(folder, COURSE, timeout=10) == []
    assert stranger.poll() is None and not (folder / "proxy.pid").exists()


@pytest.mark.unit
def test_a_hub_whose_starter_still_runs_is_not_a_leftover(state):
    folder, _, started = state
    hub = _spawn(str(CONFIG), cwd=folder, **{CONTROLLER: str(os.getpid())})
    started.append(hub)
    _record(folder, "jupyterhub.pid", hub)
    time.sleep(0.5)
    with pytest.raises(StillServed, match=f"already runs \\(pid {hub.pid}\\), started by pid"):
        stop_leftovers(folder, COURSE, timeout=10)
    assert hub.poll() is None
    assert stop_leftovers(folder, COURSE, timeout=10, spare_served=False)  # remove: stops it


@pytest.mark.hub
@pytest.mark.accounts
def test_the_class_hub_killed_with_its_group_comes_back(test_class, hub):
    running, room = hub.hub, test_class.room
    proxy = psutil.Process(int((room.state / "proxy.pid").read_text()))
    os.killpg(running.process.pid, signal.SIGKILL)
    running.process.wait()
    time.sleep(1)
    assert proxy.is_running() and proxy.status() != psutil.STATUS_ZOMBIE  # it outlived the hub

    running.start(timeout=180)
    assert f"stopped the proxy a previous hub left running (pid {proxy.pid})" in running.recovered
    assert any("stopped the formgrader" in line for line in running.recovered)
    instructor = test_class.name("i")
    session, _ = logged_in(hub.url, instructor, test_class.passwords[instructor])
    formgrader = f"{hub.url}services/{room.course_id}/formgrader/manage_assignments"
    answer = session.get(formgrader, timeout=120)
    assert answer.status_code == 200 and "Manage Assignments" in answer.text

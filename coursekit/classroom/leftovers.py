"""What a hub stopped without its clean-up leaves running, found and stopped before the next start.

`make hub` runs JupyterHub in a session of its own, and JupyterHub runs its proxy and the
formgrader service in sessions of their own. Kill `make hub` without letting it stop the hub (its
terminal's process group killed, say) and the hub runs on without anyone to stop it; kill the
hub's group and its proxy and formgrader run on. Either holds the class's ports, and the next
hub stops with "Failed to stop proxy at pid=..." (JupyterHub signals a proxy that another hub
still owns, or whose exit nobody has collected yet) or serves beside the old one.

Everything here is recognised as this class's own before it is touched: the hub by its config
file and its working folder (the class's state folder), the proxy by the API port the class
chose (state/ports.json), formgrader by the service name and the hub's address in its
environment. A pid file whose number now belongs to something else is only removed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil

from coursekit.classroom.hubconfig import CLASSROOM

CONFIG = CLASSROOM / "jupyterhub_config.py"
CONTROLLER = "CLASSROOM_CONTROLLER_PID"  # set by Hub.start: the process that will stop the hub


class StillServed(RuntimeError):
    """A hub for this class runs, and the process that started it is there to stop it."""


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _recorded(path: Path) -> psutil.Process | None:
    """The live process whose pid ``path`` holds (None: no file, or no such process)."""
    try:
        process = psutil.Process(int(path.read_text().strip()))
    except (OSError, ValueError, psutil.Error):
        return None
    return process if _alive(process) else None


def _ports(state: Path) -> dict[str, int]:
    try:
        return json.loads((state / "ports.json").read_text())
    except (OSError, ValueError):
        return {}


def _is_hub(process: psutil.Process, state: Path) -> bool:
    try:
        return str(CONFIG) in process.cmdline() and Path(process.cwd()) == state.resolve()
    except psutil.Error:
        return False


def _is_proxy(process: psutil.Process, state: Path) -> bool:
    port = _ports(state).get("proxy_api")
    try:
        line = process.cmdline()
    except psutil.Error:
        return False
    return any("configurable-http-proxy" in part for part in line) and str(port) in line


def _is_formgrader(process: psutil.Process, state: Path, course_id: str) -> bool:
    hub = _ports(state).get("hub")
    try:
        env = process.environ()
    except psutil.Error:
        return False
    return (
        hub is not None
        and env.get("JUPYTERHUB_SERVICE_NAME") == course_id
        and f":{hub}/" in env.get("JUPYTERHUB_API_URL", "")
    )


def _controller(hub: psutil.Process) -> psutil.Process | None:
    """The live process that started ``hub`` and will stop it, if there is one."""
    try:
        process = psutil.Process(int(hub.environ().get(CONTROLLER, "")))
        started_first = process.create_time() <= hub.create_time()  # not a reused number
    except (ValueError, psutil.Error):
        return None
    return process if started_first and _alive(process) else None


def _stop(process: psutil.Process, timeout: float) -> None:
    """SIGTERM, then SIGKILL for the process and its group: gone, or exited and not yet reaped
    (a zombie holds no port)."""
    try:
        process.terminate()
        deadline = time.monotonic() + timeout
        while _alive(process) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(process) and os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)  # a session of its own: its children too
        elif _alive(process):
            process.kill()
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass


def stop_leftovers(
    state: Path, course_id: str, timeout: float = 30, spare_served: bool = True
) -> list[str]:
    """Stop this class's hub, proxy and formgrader left running; return what was stopped, one
    sentence each. With ``spare_served``, a hub whose starter still runs is not a leftover:
    raise StillServed instead (two `make hub` for one class)."""
    done = []
    hub = _recorded(state / "jupyterhub.pid")
    if hub is not None and _is_hub(hub, state):
        starter = _controller(hub)
        if spare_served and starter is not None:
            raise StillServed(
                f"a hub for this class already runs (pid {hub.pid}), started by pid "
                f"{starter.pid} ({' '.join(starter.cmdline()[:4])}): stop that one first "
                f"(Ctrl+C where it runs, or kill {starter.pid})"
            )
        _stop(hub, timeout)  # SIGTERM: it stops its own proxy and formgrader
        done.append(f"stopped the hub a previous start left running (pid {hub.pid})")
    proxy = _recorded(state / "proxy.pid")
    if proxy is not None and _is_proxy(proxy, state):
        _stop(proxy, timeout)
        done.append(f"stopped the proxy a previous hub left running (pid {proxy.pid})")
    for process in psutil.process_iter():
        if _alive(process) and _is_formgrader(process, state, course_id):
            _stop(process, timeout)
            done.append(f"stopped the formgrader a previous hub left running (pid {process.pid})")
    for name in ("jupyterhub.pid", "proxy.pid"):  # what they name is gone, or not ours
        (state / name).unlink(missing_ok=True)
    return done

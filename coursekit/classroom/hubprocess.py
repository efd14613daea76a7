"""Start a class's JupyterHub, wait until it answers, stop it; stop what its accounts run."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from coursekit.classroom.environment import CLASS_VENV
from coursekit.classroom.leftovers import CONFIG, CONTROLLER, StillServed, stop_leftovers
from coursekit.classroom.settings import Classroom


class HubError(RuntimeError):
    pass


class Hub:
    """``jupyterhub -f classroom/jupyterhub_config.py`` for ``room``, its output in ``log``, run
    from the environment every account can run (environment.py)."""

    def __init__(
        self, room: Classroom, log: Path, env: dict[str, str] | None = None, venv: Path = CLASS_VENV
    ):
        self.room, self.log, self.env = room, log, env or {}
        self.bindir = venv / "bin"
        self.process: subprocess.Popen | None = None
        self.recovered: list[str] = []  # what a previous hub had left running, stopped by start

    @property
    def url(self) -> str:
        return self.room.url

    def start(self, timeout: float = 120) -> float:
        """Start the hub; return the seconds until it answered /hub/health. What a hub of this
        class stopped without its clean-up left running is stopped first (``self.recovered``)."""
        self.room.state.mkdir(parents=True, exist_ok=True)
        os.chmod(self.room.state, 0o700)
        try:
            self.recovered = stop_leftovers(self.room.state, self.room.course_id)
        except StillServed as error:
            raise HubError(str(error)) from None
        env = {
            CONTROLLER: str(os.getpid()),
            **os.environ,
            "CLASSROOM_COURSE": str(self.room.source),
            "HUB_IP": self.room.ip,
            "HUB_PORT": str(self.room.port),
            "PATH": f"{self.bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            **self.env,
        }
        began = time.monotonic()
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                [str(self.bindir / "jupyterhub"), "-f", str(CONFIG)],
                cwd=self.room.state,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as one
            )
        while time.monotonic() - began < timeout:
            if self.process.poll() is not None:
                raise HubError(f"the hub exited ({self.process.returncode}):\n{self.tail()}")
            if self._healthy():
                return time.monotonic() - began
            time.sleep(0.2)
        self.stop()
        raise HubError(f"the hub did not answer within {timeout:.0f} s:\n{self.tail()}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}hub/health", timeout=2) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def tail(self, characters: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-characters:] if self.log.exists() else ""

    def stop(self, timeout: float = 30) -> None:
        """Stop the hub as a class server's administrator would (SIGTERM): it stops its proxy and
        the formgrader service; the users' servers keep running (cleanup_servers is off)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def wait(self) -> int:
        return self.process.wait() if self.process else 0


def stop_processes_of(usernames: list[str], timeout: float = 10) -> None:
    """Stop every process running as one of ``usernames`` (their Jupyter servers, kernels)."""
    uids = set()
    for name in usernames:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    found = [
        p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids
    ]
    for process in found:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(found, timeout=timeout)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=timeout)

"""CPU-seconds of this process's descendants that live in a PID namespace of their own: the
grading kernels bubblewrap starts (``--unshare-pid``).

``getrusage(RUSAGE_CHILDREN)`` never sees them: the box's init reaps the kernel inside the
namespace and its time is not handed on to bubblewrap's parent (a kernel burning 1 CPU-second
in ``bwrap --unshare-pid`` adds 0.00 to it). So a daemon thread reads them from /proc every half
second, for as long as they live: a kernel's last half second, idle while nbgrader shuts it down,
is all it can miss. Linux only; elsewhere (and where /proc says nothing) it counts nothing.
"""

from __future__ import annotations

import os
import threading

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = "/proc"


def _stat(pid: str) -> tuple[int, float, str] | None:
    """(parent pid, CPU-seconds so far, start time) of a process, None when it is gone."""
    try:
        with open(f"{PROC}/{pid}/stat", encoding="ascii", errors="replace") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the name: state ppid ... utime(12) stime(13) ... starttime(20), counted from state
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, fields[19]


class SandboxedCPU:
    """The CPU-seconds the boxed descendants of this process have used, sampled from /proc."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.used: dict[tuple[int, str], float] = {}  # (pid, start time) -> CPU-seconds seen
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.live = False  # the last sample found boxed descendants
        try:
            self.namespace = os.readlink(f"{PROC}/self/ns/pid")
        except OSError:
            self.namespace = None  # not Linux: nothing to count

    def start(self) -> None:
        if self.namespace is not None and self.thread is None:
            self.thread = threading.Thread(target=self._run, name="sandboxed-cpu", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        while True:
            self.sample()
            threading.Event().wait(self.interval)

    def sample(self) -> None:
        """Read every process in another PID namespace that descends from this one."""
        boxed, me = {}, os.getpid()
        for pid in (p for p in os.listdir(PROC) if p.isdigit()):
            try:
                if os.readlink(f"{PROC}/{pid}/ns/pid") == self.namespace:
                    continue  # most processes: cheap to pass over
            except OSError:
                continue
            stat = _stat(pid)
            if stat is not None and self._descends(stat[0], me):
                boxed[(int(pid), stat[2])] = stat[1]
        with self.lock:
            self.used.update(boxed)
            self.live = bool(boxed)

    @staticmethod
    def _descends(parent: int, ancestor: int) -> bool:
        for _ in range(64):  # a chain of parents, never a cycle; 64 is deeper than any here
            if parent == ancestor:
                return True
            if parent <= 1:
                return False
            stat = _stat(str(parent))
            if stat is None:
                return False
            parent = stat[0]
        return False

    def total(self) -> float:
        """CPU-seconds of every boxed descendant seen so far (a fresh sample first while some
        are alive)."""
        if self.thread is None:
            return 0.0
        if self.live:
            self.sample()
        with self.lock:
            return sum(self.used.values())

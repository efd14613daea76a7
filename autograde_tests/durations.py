"""How long each suite took: the table at the end of every run's log, so that growth is seen
when it happens.

Measured where the tests run, on each pytest-xdist worker (or in the one pytest process): for
each test, the wall seconds and CPU-seconds of its whole protocol -- set-up, call and tear-down,
so a session fixture's set-up counts for the suite whose test first asks for it. CPU-seconds are
the process's own (all its threads) plus those of the child processes it waited for (nbgrader,
JupyterHub, Chromium) and of the grading kernels bubblewrap boxes, which getrusage never sees
(sandboxed_cpu.py). The workers hand their rows to the controller
(``workeroutput``), which adds them up and prints the table. Two rows belong to no suite: each
worker's start-up (imports and collection), and the session fixtures torn down after its last
test (a Dask cluster's processes, a browser).
"""

from __future__ import annotations

import os
import re
import resource
import time

import pytest

from .sandboxed_cpu import SandboxedCPU

STARTUP = "(start-up: imports, collection)"
ENDING = "(session fixtures torn down at the end)"
FOLDERS = ("reference", "hostile", "classroom", "cluster")
CHAIN_LESSON = re.compile(r"\[(?:mistake-|alternative-)?(lesson\d+)")


def suite_of(nodeid: str) -> str:
    """The row a test counts in: chain/<lesson>, a folder of suites, or its module's name."""
    path = nodeid.split("::")[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[1] == "chain":
        lesson = CHAIN_LESSON.search(nodeid)
        return f"chain/{lesson.group(1)}" if lesson else "chain (all lessons)"
    if len(parts) > 2 and parts[1] in FOLDERS:
        return parts[1]
    return parts[-1].removesuffix(".py")


BOXED = SandboxedCPU()  # the grading kernels in bubblewrap, which getrusage does not see


def cpu_seconds() -> float:
    """CPU-seconds of this process, of the children it waited for, and of its descendants boxed
    in a PID namespace of their own."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + BOXED.total()


def _age() -> float:
    """Seconds since this process started (its imports came before any hook), or 0 unknown."""
    try:
        import psutil  # Dask's dependency; absent on a bare GPU machine, which does not need it

        return max(0.0, time.time() - psutil.Process().create_time())
    except ImportError:
        return 0.0


class SuiteClock:
    """A pytest plugin (conftest.py registers it): {suite: [tests, wall seconds, CPU-seconds]}
    measured in this process, or gathered from the workers, and the table at the end."""

    def __init__(self):
        self.rows: dict[str, list[float]] = {}
        self.began = time.monotonic() - _age()
        self.began_at = time.time() - _age()  # the same instant, comparable between processes
        self.last_suite = ""
        self.finished: list[tuple[float, str]] = []  # (time.time(), last suite) of each worker
        self.load = os.getloadavg()
        self.started = False
        self.workers = 0

    def add(self, suite: str, tests: int, seconds: float, cpu: float) -> None:
        row = self.rows.setdefault(suite, [0, 0.0, 0.0])
        row[0], row[1], row[2] = row[0] + tests, row[1] + seconds, row[2] + cpu

    def merge(self, rows: dict) -> None:
        for suite, (tests, seconds, cpu) in rows.items():
            self.add(suite, tests, seconds, cpu)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if not self.started:
            self.started = True
            BOXED.start()
            self.add(STARTUP, 0, time.monotonic() - self.began, cpu_seconds())
        wall, cpu = time.monotonic(), cpu_seconds()
        self.last_suite = suite_of(item.nodeid)
        try:
            return (yield)
        finally:
            self.add(self.last_suite, 1, time.monotonic() - wall, cpu_seconds() - cpu)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        """After the last test, what the session's fixtures cost to tear down is a row of its
        own (pytest_runtest_protocol counted it for the last test's suite: taken back here)."""
        if nextitem is not None:
            return (yield)
        wall, cpu = time.monotonic(), cpu_seconds()
        try:
            return (yield)
        finally:
            seconds, used = time.monotonic() - wall, cpu_seconds() - cpu
            self.add(ENDING, 0, seconds, used)
            self.add(suite_of(item.nodeid), 0, -seconds, -used)

    def pytest_sessionfinish(self, session):
        if hasattr(session.config, "workeroutput"):  # a worker: hand the rows to the controller
            session.config.workeroutput["suite_durations"] = self.rows
            session.config.workeroutput["finished"] = [time.time(), self.last_suite or "none"]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):  # pytest-xdist's, on the controller
        self.workers += 1
        output = getattr(node, "workeroutput", {})
        self.merge(output.get("suite_durations", {}))
        if "finished" in output:
            self.finished.append(tuple(output["finished"]))

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        """The table last, after pytest's own summary: the end of the log, where it is seen."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if self.rows and reporter is not None and not hasattr(config, "workerinput"):
            reporter.write_sep("=", "how long each suite took")
            elapsed = time.monotonic() - self.began
            for line in self.table(self.workers or 1, elapsed):
                reporter.write_line(line)

    def table(self, workers: int, elapsed: float) -> list[str]:
        """The rows, the costliest first, and the totals."""
        width = max([len(s) for s in self.rows] + [len("all suites")]) + 2
        lines = [f"{'suite':<{width}}{'tests':>6}{'wall s':>10}{'CPU s':>10}"]
        for suite, (tests, seconds, cpu) in sorted(self.rows.items(), key=lambda r: -r[1][2]):
            lines.append(f"{suite:<{width}}{tests:>6}{seconds:>10.1f}{cpu:>10.1f}")
        tests, seconds, cpu = (sum(r[i] for r in self.rows.values()) for i in range(3))
        lines.append(f"{'all suites':<{width}}{tests:>6}{seconds:>10.1f}{cpu:>10.1f}")
        loads = [" ".join(f"{x:.2f}" for x in load) for load in (self.load, os.getloadavg())]
        lines += [
            f"{workers} process(es) ran the tests; the run took {elapsed:.0f} s wall on "
            f"{os.cpu_count()} cores, load average {loads[0]} at the start, {loads[1]} now.",
            "wall s: the seconds of each suite's tests with their fixtures, added up over the "
            "workers; CPU s: those processes' own and their children's (nbgrader, kernels, ...).",
        ]
        if self.finished:  # a worker that ends long before the others left a core idle
            ends = ", ".join(
                f"{at - self.began_at:.0f} s ({suite})" for at, suite in sorted(self.finished)
            )
            lines.append(f"The workers ran out of tests at {ends} (the suite each ran last).")
        return lines

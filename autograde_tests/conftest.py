"""Shared fixtures, how `make test` spreads the suites over its workers, and the numbers suites
measure. Nothing from Jupyter or nbgrader is imported here, so the reference tests run with plain
pytest on a machine that has only numpy and torch (the lent GPU machine)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from attention_ref.pt import available_devices

from .durations import SuiteClock
from .ordering import CostliestFirst
from .shared import CHROMIUM, CHROMIUM_ARGS, MEASURED

DEVICES = available_devices()
HERE = Path(__file__).parent

# `make test` runs pytest-xdist workers (-n, --dist loadgroup). The tests of each suite below share
# one expensive session set-up (the hostile class, the hub, the Dask cluster, the built book), so
# each suite goes to one worker as a whole and is set up once; the grading chain is one group per
# lesson (a lesson's course is graded once, for its tests). The groups run side by side, and the
# rest of the tests are dealt to whichever worker is free. The book's group holds the learner's
# tools too: both run make targets that write notebooks/.
GROUPS = {
    "hostile": "hostile",
    "classroom": "classroom",
    "cluster": "cluster",
    "test_book.py": "book",
    "test_book_browser.py": "book",
    "test_learner_tools.py": "book",
    "test_skipped_cells.py": "skipped-cells",  # one small course, graded once for its tests
    "test_after_deadline.py": "after-deadline",  # one class graded once: late work, feedback, LMS
    "test_class_report.py": "class-report",  # one synthetic class: failures, similarity
    "test_grading_fails_closed.py": "fails-closed",  # one course, for both tests
    "test_learner_path.py": "learner-path",  # one clone and `make lab`, for both tests
    "test_feedback_display.py": "feedback-display",  # one kernel, for every test
}
CHAIN_LESSON = re.compile(r"\[(?:mistake-|alternative-)?(lesson\d+)")


def group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid`` (relative to the repository), None for a test of its own."""
    parts = nodeid.split("::")[0].split("/")
    if len(parts) < 2 or parts[0] != HERE.name:
        return None
    if parts[1] == "chain":
        lesson = CHAIN_LESSON.search(nodeid)
        return f"chain-{lesson.group(1)}" if lesson else None
    return GROUPS.get(parts[1])


def pytest_configure(config):
    """The table of how long each suite took, at the end of the run (durations.py)."""
    config.pluginmanager.register(SuiteClock(), "suite-clock")


# Tests that carry none of the markers pyproject.toml registers (what a suite needs: chain, book,
# browser, hub, ...), noted at collection for test_worker_groups.py to name: `make test-fast` and
# every run with -m select by these markers, and an unmarked test would be left out unseen.
UNDECLARED: list[str] = []


def pytest_collection_modifyitems(config, items):
    declared = {line.split(":")[0].strip() for line in config.getini("markers")}
    UNDECLARED[:] = [
        item.nodeid for item in items if not declared & {m.name for m in item.iter_markers()}
    ]


@pytest.fixture(params=DEVICES, ids=str)
def device(request) -> torch.device:
    """Every device this machine has: the CUDA paths run wherever a GPU is present."""
    return request.param


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per test process, for the book's and the class's browser tests.
    Playwright's sync API runs one instance per thread at a time: a suite's own instance, still
    open, made the next suite's refuse to start ("Sync API inside the asyncio loop") once the
    workers ran the book before the class. Without Chromium the browser tests skip, saying how to
    get it; under CI (CI=true) they fail."""
    if not os.path.exists(CHROMIUM):
        message = (
            "Chromium is not installed: `sudo apt-get install chromium` enables the browser tests"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the groups above, read from the tests' ids, the costliest first.
    (pytest-xdist's own xdist_group marks are silently ignored with pytest 9.2: pytest-xdist
    issue 1386.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.workqueue = CostliestFirst()  # ordering.py: the costliest suites first

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return SuiteScheduling(config, log)


def pytest_sessionfinish(session):
    """On a worker: hand what its suites measured to the controller, which prints it."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["measured"] = MEASURED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # pytest-xdist's hook, on the controller
    for title, lines in getattr(node, "workeroutput", {}).get("measured", {}).items():
        MEASURED.setdefault(title, []).extend(lines)


def pytest_terminal_summary(terminalreporter):
    for title, lines in MEASURED.items():
        if not lines:  # a suite that did not run this time
            continue
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
    if any(MEASURED.values()):
        terminalreporter.write_line(f"load average at the end: {os.getloadavg()}")

"""The table of how long each suite took (durations.py), measured on the workers of a real
pytest-xdist run of a few tests: a session fixture's set-up counts for its suite, and the CPU
time of child processes counts for the test that started them."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from .durations import ENDING, STARTUP, suite_of
from .sandboxes import require_bubblewrap

pytestmark = pytest.mark.unit

BUSY = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
# In the box, 1.2 CPU-seconds: the sampler reads /proc every half second, and a kernel's last
# half second (of wall time, so of CPU time at most) goes unseen.
BOXED_BUSY = BUSY.replace("0.6", "1.2")
FILES = {
    "conftest.py": """
        from autograde_tests.durations import SuiteClock

        def pytest_configure(config):
            config.pluginmanager.register(SuiteClock(), "suite-clock")
        """,
    "test_fixture.py": f"""
        import pytest

        @pytest.fixture(scope="session")
        def expensive():
            exec({BUSY!r})

        def test_one(expensive):
            pass

        def test_two(expensive):
            pass
        """,
    "test_child.py": f"""
        import subprocess, sys

        def test_in_a_child_process():
            subprocess.run([sys.executable, "-c", {BUSY!r}], check=True)
        """,
}
# A grading kernel's box: a PID namespace of its own, whose CPU time getrusage never sees.
BOXED = f"""
    import shutil, subprocess, sys

    def test_in_a_box():
        box = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"]
        subprocess.run([*box, sys.executable, "-c", {BOXED_BUSY!r}], check=True)
    """


def _table(tmp_path, files: dict) -> dict:
    """{row: (tests, wall s, CPU s)} of the table that a run of ``files`` on 2 workers ends with."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    root = str(suite_of.__code__.co_filename).rsplit("/autograde_tests/", 1)[0]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = done.stdout.split("how long each suite took")[-1]
    assert " passed in " not in table, "the table ends the log, after pytest's summary"
    assert "2 process(es) ran the tests" in table
    # each worker's end, in order, with the suite it ran last ("none": it was given no test)
    ends = re.search(r"The workers ran out of tests at (\d+) s \((\S+)\), (\d+) s \(\S+\)", table)
    assert ends and int(ends[1]) <= int(ends[3]), table
    rows = {
        m[0].strip(): (int(m[1]), float(m[2]), float(m[3]))
        for m in re.findall(r"^(\S.*?)\s+(\d+)\s+(-?[\d.]+)\s+(-?[\d.]+)$", table, re.M)
    }
    return rows


def test_the_table_counts_fixtures_and_child_processes_on_the_workers(tmp_path):
    rows = _table(tmp_path, FILES)
    assert rows["test_fixture"][0] == 2 and rows["test_fixture"][2] >= 0.6, rows
    assert rows["test_child"][0] == 1 and rows["test_child"][2] >= 0.6, rows
    assert STARTUP in rows and ENDING in rows and rows["all suites"][0] == 3, rows


@pytest.mark.bubblewrap
def test_the_table_counts_the_cpu_time_of_a_kernel_in_bubblewrap(tmp_path):
    require_bubblewrap()
    files = {"conftest.py": FILES["conftest.py"], "test_box.py": BOXED}
    rows = _table(tmp_path, files)
    assert rows["test_box"][2] >= 1.2 - 0.5, rows  # at most the last half second unseen


@pytest.mark.parametrize(
    ("nodeid", "suite"),
    [
        (
            "autograde_tests/chain/test_grading_chain.py::test_x[mistake-lesson08-a]",
            "chain/lesson08",
        ),
        ("autograde_tests/chain/test_grading_chain.py::test_every_lesson", "chain (all lessons)"),
        ("autograde_tests/reference/test_sdpa_reference.py::test_x[cpu]", "reference"),
        ("autograde_tests/hostile/test_os_boundary.py::test_x", "hostile"),
        ("autograde_tests/test_book_browser.py::test_x", "test_book_browser"),
    ],
)
def test_each_test_counts_in_its_suite(nodeid, suite):
    assert suite_of(nodeid) == suite

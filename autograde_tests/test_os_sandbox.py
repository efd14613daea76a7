"""The operating-system sandbox of grading kernels (coursekit/grading/bwrap.py) piece by piece:
what its box holds, the refusal to grade without it, make check's fall-back, and one live kernel
in the box. The attacks graded through real nbgrader are in hostile/test_os_boundary.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import socket
from pathlib import Path

import pytest

from coursekit.course.lessons import ROOT
from coursekit.grading import bwrap, classgrade
from coursekit.grading.tempcourse import GradingError
from coursekit.learner import selfcheck

from .sandboxes import require_bubblewrap


def _binds(command: list[str]) -> list[str]:
    """The host paths a bubblewrap command binds into the box."""
    binds = ("--bind", "--ro-bind", "--ro-bind-try", "--dev-bind", "--bind-try")
    return [command[i + 1] for i, arg in enumerate(command[:-1]) if arg in binds]


@pytest.mark.bubblewrap
def test_the_box_holds_the_environment_and_the_files_handed_in_not_the_course(tmp_path):
    require_bubblewrap()
    work = tmp_path / "course" / "autograded" / "me" / "lesson01"
    work.mkdir(parents=True)
    (work / "data.csv").write_text("1,2\n")
    (work / "lesson.ipynb").write_text("{}")  # the graded notebook: it holds the hidden tests
    (work / "gradebook.db").symlink_to(tmp_path / "course" / "gradebook.db")
    box = bwrap.Box.create(work)
    try:
        command = box.command(["python", "-m", "kernel"], {"PATH": "/usr/bin"})
    finally:
        box.close()
    binds = _binds(command)
    assert str(work / "data.csv") in binds
    assert not any(b.endswith(".ipynb") or b.endswith("gradebook.db") for b in binds), binds
    for path in map(Path, binds):
        # nothing of the course, the repository (but its two packages) or the grader's home
        assert tmp_path / "course" not in [path, *path.parents] or path == work / "data.csv"
        assert path not in (ROOT, ROOT / "solutions", Path.home())
    assert str(ROOT / "coursekit") in binds and str(ROOT / "solutions" / "attention_ref") in binds
    assert "--unshare-net" in command and "--unshare-pid" in command
    assert command.index("--clearenv") < command.index("--")
    assert not box.folder.exists(), "the box's folder outlives its kernel"


@pytest.mark.unit
def test_grading_refuses_to_start_without_bubblewrap_unless_told(monkeypatch, tmp_path):
    monkeypatch.setattr(bwrap, "unavailable", lambda: "bubblewrap (bwrap) is not installed")
    lesson = classgrade.find_lesson("lesson01")
    with pytest.raises(GradingError, match="--python-only-sandbox") as refused:
        classgrade.grade_class(tmp_path, lesson)
    assert "not installed" in str(refused.value) and "make sandbox" in str(refused.value)
    # accepted: the refusal is gone (this empty course then has no gradebook)
    with pytest.raises(GradingError, match="generate_assignment"):
        classgrade.grade_class(tmp_path, lesson, python_only=True)
    assert bwrap.nbgrader_flags(python_only=True) == [bwrap.PYTHON_ONLY_FLAG]


@pytest.mark.unit
def test_a_dask_worker_without_bubblewrap_is_named_before_grading(monkeypatch, tmp_path):
    from coursekit.grading.batch import course_visible

    monkeypatch.setattr(bwrap, "unavailable", lambda: "bubblewrap (bwrap) is not installed")
    why = course_visible(str(tmp_path), "digest", str(tmp_path), bubblewrap=True)
    assert "not installed" in why and "make sandbox" in why
    assert "not installed" not in course_visible(str(tmp_path), "digest", str(tmp_path))


@pytest.mark.unit
def test_make_check_falls_back_to_the_python_only_sandbox_with_a_notice(monkeypatch, capsys):
    monkeypatch.setattr(bwrap, "unavailable", lambda: "this is darwin")
    selfcheck._sandbox_flags.cache_clear()
    try:
        assert selfcheck._sandbox_flags() == (bwrap.PYTHON_ONLY_FLAG,)
        assert selfcheck._sandbox_flags() == (bwrap.PYTHON_ONLY_FLAG,)  # said once
    finally:
        selfcheck._sandbox_flags.cache_clear()
    notice = capsys.readouterr().err.strip().splitlines()
    assert notice == [
        "note: your notebook is graded without the operating system's sandbox an instructor "
        "uses (this is darwin); the points are the same"
    ]


PROBE = """
import json, os, resource, socket
import matplotlib
facts = {"uid": os.getuid(), "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
         "files": sorted(os.listdir(".")), "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
         "backend": matplotlib.get_backend()}
for name, attempt in {
    "connect": lambda: socket.create_connection(("127.0.0.1", PORT), timeout=5),
    "write usr": lambda: open("/usr/written", "w"),
    "write cwd": lambda: open("mine.txt", "w").write("x"),
    "write home": lambda: open(os.path.expanduser("~/x"), "w").write("x"),
}.items():
    try:
        attempt()
        facts[name] = "allowed"
    except OSError as error:
        facts[name] = type(error).__name__
print(json.dumps(facts))
"""


async def _run_in_box(cwd: Path, code: str) -> dict:
    from coursekit.grading.sandbox import SandboxKernelManager

    km = SandboxKernelManager(audit_hook=False)  # the operating system's boundary alone
    await km.start_kernel(cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    out: list[str] = []

    def collect(message: dict) -> None:
        out.append(message["content"].get("text", ""))

    try:
        await kc.wait_for_ready(timeout=120)
        await kc.execute_interactive(code, timeout=60, output_hook=collect)
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
    return json.loads("".join(out).strip().splitlines()[-1])


@pytest.mark.bubblewrap
def test_a_kernel_in_the_box(tmp_path):
    """No network, no other process, an unprivileged uid of its own, a process limit, a
    read-only environment, a writable folder and home of its own."""
    require_bubblewrap()
    (tmp_path / "data.csv").write_text("1,2\n")
    (tmp_path / "lesson.ipynb").write_text("{}")
    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        # in a thread of its own: an earlier test (Playwright's sync API) may have left an event
        # loop set on this one, where asyncio.run refuses to start
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            probe = PROBE.replace("PORT", str(port))
            facts = thread.submit(asyncio.run, _run_in_box(tmp_path, probe)).result()
    finally:
        server.close()
    assert facts["uid"] not in (0, os.getuid()), facts
    assert len(facts["pids"]) <= 3, facts  # the box's init and the kernel
    assert facts["files"] == ["data.csv"], facts  # handed in; the notebook is not there
    assert facts["connect"] == "ConnectionRefusedError", facts
    assert facts["write usr"] in ("OSError", "PermissionError"), facts
    assert facts["write cwd"] == facts["write home"] == "allowed", facts
    assert 0 < facts["nproc"] < 200, facts
    assert not (tmp_path / "mine.txt").exists(), "the kernel's folder is private to its box"
    assert facts["backend"].lower() == "agg", facts  # figures made, not drawn (draw_figures)


@pytest.mark.unit
def test_figures_are_drawn_only_when_the_instructor_asks():
    from coursekit.grading.sandbox import INLINE_BACKEND, SandboxKernelManager

    assert SandboxKernelManager()._spec_env()["MPLBACKEND"] == "agg"
    # drawn as in JupyterLab, whatever backend the grader's own environment names
    assert SandboxKernelManager(draw_figures=True)._spec_env()["MPLBACKEND"] == INLINE_BACKEND

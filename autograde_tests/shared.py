"""Set-up that several suites share: the headless Chromium they launch, where they leave what they
measured, and how a suite bound to one lesson leaves itself out while someone works on another
(COURSE_LESSONS=)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# {section title: [lines]}: numbers a suite measured (the hub's start, its response times), printed
# at the end of the run by conftest.py, whichever worker measured them.
MEASURED: dict[str, list[str]] = {}

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless, and nothing that reaches beyond 127.0.0.1 (updates, sync, QUIC probes).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def leave_out_unless_selected(config, items, assignment: str, folder: Path) -> None:
    """COURSE_LESSONS=lesson05 (work on another lesson): deselect the tests under ``folder``,
    which grade ``assignment``; they are left out, not skipped."""
    wanted = {n.strip() for n in os.environ.get("COURSE_LESSONS", "").split(",") if n.strip()}
    if wanted and assignment not in wanted:
        keep = [item for item in items if folder not in Path(str(item.fspath)).parents]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

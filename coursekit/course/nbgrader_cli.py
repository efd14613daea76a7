"""Run nbgrader's command line in a course directory, with the environment it needs.

nbgrader runs ``alembic`` from PATH when it opens a gradebook, and the grading kernels from this
environment, so this environment's bin folder goes first on PATH. One place for that set-up:
releasing a lesson, grading a temporary course and grading a class all come through here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BINDIR = Path(sys.executable).parent


def nbgrader_env(**extra: str) -> dict[str, str]:
    """The current environment with this environment's tools first on PATH, plus ``extra``."""
    return {**os.environ, "PATH": f"{BINDIR}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def nbgrader_command(*args: str) -> list[str]:
    """The argv of this environment's ``nbgrader`` with ``args``."""
    return [str(BINDIR / "nbgrader"), *args]


def nbgrader(*args: str, root: Path) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``root`` (a course directory); output captured, never raises."""
    return subprocess.run(
        nbgrader_command(*args),
        cwd=root,
        env=nbgrader_env(),
        capture_output=True,
        text=True,
        check=False,
    )

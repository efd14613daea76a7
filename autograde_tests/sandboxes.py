"""Which sandbox the grading tests run kernels in: bubblewrap, as a class is graded.

``make test`` installs bubblewrap where it can (root with apt, as on CI). Where it cannot run,
the tests grade in the Python-only sandbox with a warning, except under CI (``CI=true``), where a
missing bubblewrap is a failure, and the tests of the operating-system boundary itself skip.
"""

from __future__ import annotations

import os
import warnings

import pytest

from coursekit.grading import bwrap


def nbgrader_flags() -> list[str]:
    """nbgrader flags for the grading tests (call it in a fixture or a test, not at import)."""
    reason = bwrap.unavailable()
    if reason is None:
        return []
    if os.environ.get("CI"):
        pytest.fail(f"CI grades in bubblewrap, and it cannot run here: {reason} (make sandbox)")
    warnings.warn(f"grading in the Python-only sandbox: {reason} (make sandbox)", stacklevel=2)
    return [bwrap.PYTHON_ONLY_FLAG]


def require_bubblewrap() -> None:
    """Skip (fail under CI) a test of what bubblewrap itself stops, where it cannot run."""
    reason = bwrap.unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI grades in bubblewrap, and it cannot run here: {reason} (make sandbox)")
    pytest.skip(f"bubblewrap cannot run here: {reason} (make sandbox)")

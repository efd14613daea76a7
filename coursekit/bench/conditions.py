"""A process's environment set to one of the conditions a lesson's numbers must hold under
(coursekit.course.numerics.Condition), for the kernels it starts."""

from __future__ import annotations

import contextlib
import os

from coursekit.course.numerics import Condition


@contextlib.contextmanager
def environment(condition: Condition):
    """This process's environment set to ``condition`` (a kernel started meanwhile inherits
    it), then put back."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(condition.environment(saved))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)

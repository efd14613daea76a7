"""A process's environment set to one of the conditions a lesson's numbers must hold under
(coursekit.course.numerics.Condition), for the kernels it starts."""

from __future__ import annotations

import contextlib
import os

from coursekit.course.numerics import Condition

# Threads that wait for work sleep instead of spinning: the same numbers (the work is split alike),
# but on a busy machine two spinning threads made a training run of lesson 8 30 times slower
# (46 s against 1.5 s at a load of 22 on 2 cores, 2026-12-07).
WAITING = {"OMP_WAIT_POLICY": "PASSIVE"}


@contextlib.contextmanager
def environment(condition: Condition):
    """This process's environment set to ``condition`` (a kernel started meanwhile inherits
    it), then put back."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(condition.environment(saved) | WAITING)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)

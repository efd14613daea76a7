"""The order in which `make test`'s workers take the suites: the costliest first.

pytest-xdist deals the groups of conftest.py to the workers in the order of their number of
tests, which says little about their cost: the Dask cluster's 4 tests came last and the hub's 27
late, so on 2 cores a long suite could start near the end and leave a core idle while it ran
alone. Taking the costliest first (longest processing time first) keeps both cores busy to the
end. The costs are estimates in CPU-seconds, read from the duration table a full run ends with
(durations.py): update them when that table shows a suite has grown. An estimate that is off
only costs some idle time at the end, never a test.
"""

from __future__ import annotations

from collections import OrderedDict

# CPU-seconds of the suites that share one set-up, each measured alone on 2 cores (2026-11-24:
# the hub 334, the hostile class 368, the Dask cluster 142, the book's browser checks 217 and its
# build about 180; 2026-11-25: the cells skipped when grading 49, grading failing closed 22).
SUITES = {"book": 400.0, "classroom": 340.0, "hostile": 370.0, "cluster": 145.0,
          "skipped-cells": 50.0, "fails-closed": 22.0}  # fmt: skip
# The chain: CPU-seconds per test of a lesson's group, each test about one graded notebook
# (lessons 2 and 8 with every mistake, 2026-11-25: see docs/contributing.md).
PER_CHAIN_TEST = 12.0
ONE_TEST = 0.5  # a test of its own


def cost(scope: str, tests: int) -> float:
    """Estimated CPU-seconds of a group of ``tests`` tests, or of a test of its own."""
    if scope.startswith("chain-"):
        return PER_CHAIN_TEST * tests
    return SUITES.get(scope, ONE_TEST * tests)


class CostliestFirst(OrderedDict):
    """pytest-xdist's queue of work units (scope -> its tests), handing out the costliest first:
    its scheduler takes the next unit with ``popitem(last=False)``."""

    def popitem(self, last: bool = True):
        if last or not self:
            return super().popitem(last)
        scope = max(self, key=lambda name: cost(name, len(self[name])))  # ties: the first
        return scope, self.pop(scope)

"""The order in which `make test`'s workers take the suites: the costliest first.

pytest-xdist deals the groups of conftest.py to the workers in the order of their number of
tests, which says little about their cost: the Dask cluster's 4 tests came last and the hub's 27
late, so on 2 cores a long suite could start near the end and leave a core idle while it ran
alone. Taking the costliest first (longest processing time first) keeps both cores busy to the
end. The costs are estimates in seconds, read from the duration table a full run ends with
(durations.py): update them when that table shows a suite has grown. An estimate that is off
only costs some idle time at the end, never a test.
"""

from __future__ import annotations

from collections import OrderedDict

# Seconds of the suites that share one set-up, from the duration table of `bash .ci/run` on a
# fresh 2-core clone with 4 workers (2026-11-25, wall seconds: what keeps a worker busy, waiting on
# a hub or a browser included). The book's is its build (every lesson executed on a fresh clone)
# and its browser and learner-tool tests.
SUITES = {
    "book": 790.0,
    "hostile": 650.0,
    "classroom": 450.0,
    "after-deadline": 325.0,
    "cluster": 305.0,
    "class-report": 145.0,
    "skipped-cells": 115.0,
    "fails-closed": 65.0,
}
# The chain: seconds per test of a lesson's group, each test about one graded notebook
# (every mistake of every lesson, as CI grades them: see docs/contributing.md).
PER_CHAIN_TEST = 15.4  # the same run: 7614 s over 496 chain tests
ONE_TEST = 0.5  # a test of its own


def cost(scope: str, tests: int) -> float:
    """Estimated seconds of a group of ``tests`` tests, or of a test of its own."""
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

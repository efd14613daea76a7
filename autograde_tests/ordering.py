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
# fresh 2-core clone with 4 workers (2026-11-27, wall seconds: what keeps a worker busy, waiting on
# a hub or a browser included). The book's is its build (every lesson executed on a fresh clone)
# and its browser and learner-tool tests.
SUITES = {
    "book": 1578.0,
    "hostile": 965.0,
    "classroom": 644.0,
    "cluster": 327.0,
    "after-deadline": 266.0,
    "fails-closed": 145.0,
    "class-report": 144.0,
    "skipped-cells": 143.0,
}
# The chain: (tests, wall seconds) of each lesson's group when it grades every mistake and
# alternative answer, several to a notebook, as CI does (the same run). A group of fewer tests
# (make test grades each lesson's everyday mistakes) is estimated in proportion: its notebooks
# are fewer too.
CHAIN = {
    "lesson01": (32, 435.0),
    "lesson02": (36, 271.0),
    "lesson03": (42, 274.0),
    "lesson04": (34, 304.0),
    "lesson05": (32, 313.0),
    "lesson06": (29, 220.0),
    "lesson07": (28, 247.0),
    "lesson08": (65, 1299.0),
    "lesson09": (43, 561.0),
    "lesson10": (55, 604.0),
    "lesson11": (47, 1257.0),
    "lesson12": (53, 346.0),
    "lesson14": (72, 380.0),  # CPU-seconds of its chain alone, 2026-11-28 (load 7-10)
    "lesson15": (53, 280.0),  # CPU-seconds of its chain alone, 2026-12-07 (load 30)
}
PER_CHAIN_TEST = 12.4  # a lesson not in the table: the same run's 6131 s over 496 tests
ONE_TEST = 0.5  # a test of its own


def cost(scope: str, tests: int) -> float:
    """Estimated seconds of a group of ``tests`` tests, or of a test of its own."""
    if scope.startswith("chain-"):
        counted, seconds = CHAIN.get(scope.removeprefix("chain-"), (1, PER_CHAIN_TEST))
        return seconds * tests / counted
    return SUITES.get(scope, ONE_TEST * tests)


class CostliestFirst(OrderedDict):
    """pytest-xdist's queue of work units (scope -> its tests), handing out the costliest first:
    its scheduler takes the next unit with ``popitem(last=False)``."""

    def popitem(self, last: bool = True):
        if last or not self:
            return super().popitem(last)
        scope = max(self, key=lambda name: cost(name, len(self[name])))  # ties: the first
        return scope, self.pop(scope)

"""How `make test` deals the tests to its pytest-xdist workers (conftest.py): a suite that shares
one set-up stays on one worker, and each lesson of the grading chain is one group; and the
markers that let `make test-fast` and `-m` pick suites by what they need."""

from __future__ import annotations

import os

import pytest

from . import conftest, cores
from .conftest import group_of
from .ordering import CostliestFirst

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("autograde_tests/chain/test_grading_chain.py::test_solved_x[lesson03]", "chain-lesson03"),
        (
            "autograde_tests/chain/test_grading_chain.py::test_p[mistake-lesson11-no-mask]",
            "chain-lesson11",
        ),
        (
            "autograde_tests/chain/test_grading_chain.py::test_p[alternative-lesson02-loop]",
            "chain-lesson02",
        ),
        (
            "autograde_tests/chain/test_grading_chain.py::test_every_lesson_has_planted_mistakes",
            None,
        ),
        ("autograde_tests/hostile/test_os_boundary.py::test_x", "hostile"),
        ("autograde_tests/classroom/test_kubernetes.py::test_x[a]", "classroom"),
        ("autograde_tests/cluster/test_dask_grading.py::test_x", "cluster"),
        ("autograde_tests/test_book_browser.py::test_x", "book"),
        ("autograde_tests/test_learner_tools.py::test_x", "book"),
        ("autograde_tests/test_grading_fails_closed.py::test_x", "fails-closed"),
        ("autograde_tests/reference/test_sdpa_reference.py::test_x[cpu-lesson01]", None),
        ("autograde_tests/test_layers.py::test_x", None),
    ],
)
def test_each_suite_is_one_group(nodeid, group):
    assert group_of(nodeid) == group


def test_every_test_says_what_it_needs():
    """Each test carries at least one marker of pyproject.toml's list (``pytestmark`` in its
    module, or its folder's conftest.py), so that a selection by marker never drops it unseen."""
    assert not conftest.UNDECLARED, (
        "tests without a marker saying what they need (pyproject.toml lists them): "
        + ", ".join(conftest.UNDECLARED[:10])
    )


def test_the_workers_take_the_costliest_suites_first():
    """Not in the order of their number of tests: the Dask cluster's 4 tests cost more than a
    hundred tests of their own."""
    queue = CostliestFirst()
    queue["autograde_tests/test_layers.py::test_x"] = {"a": False}
    for scope, tests in [("chain-lesson01", 10), ("cluster", 4), ("chain-lesson08", 40)]:
        queue[scope] = {f"t{i}": False for i in range(tests)}
    order = [queue.popitem(last=False)[0] for _ in range(len(queue))]
    assert order == ["chain-lesson08", "cluster", "chain-lesson01", order[-1]], order
    assert order[-1].endswith("test_x")


@pytest.mark.parametrize(
    ("environ", "threads"),
    [
        ({}, None),  # one pytest process: the libraries' own defaults
        ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "2"}, 2),
        ({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "3"}, 1),
        ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "64"}, 1),
    ],
)
def test_a_worker_takes_its_share_of_the_cores_for_its_threads(monkeypatch, environ, threads):
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    assert cores.threads_per_worker(environ) == threads
    environ = dict(environ, MKL_NUM_THREADS="3")  # set by hand: kept
    cores.share_the_cores(environ)
    shared = {name: environ.get(name) for name in cores.VARIABLES}
    expect = None if threads is None else str(threads)
    assert shared == {"OMP_NUM_THREADS": expect, "OPENBLAS_NUM_THREADS": expect,
                      "MKL_NUM_THREADS": "3"}  # fmt: skip


def test_this_worker_runs_torch_with_its_share():
    """Set before torch was imported (autograde_tests/__init__.py): torch took it."""
    import torch

    threads = os.environ.get("OMP_NUM_THREADS")
    if cores.threads_per_worker() is not None and threads is not None:
        assert torch.get_num_threads() == int(threads)

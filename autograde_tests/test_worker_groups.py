"""How `make test` deals the tests to its pytest-xdist workers (conftest.py): a suite that shares
one set-up stays on one worker, and each lesson of the grading chain is one group."""

from __future__ import annotations

import pytest

from .conftest import group_of


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
        ("autograde_tests/reference/test_sdpa_reference.py::test_x[cpu-lesson01]", None),
        ("autograde_tests/test_layers.py::test_x", None),
    ],
)
def test_each_suite_is_one_group(nodeid, group):
    assert group_of(nodeid) == group

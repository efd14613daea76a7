"""How `make test` deals the tests to its pytest-xdist workers (conftest.py): a suite that shares
one set-up stays on one worker, and each lesson of the grading chain is one group; and the
markers that let `make test-fast` and `-m` pick suites by what they need."""

from __future__ import annotations

import pytest

from . import conftest
from .conftest import group_of

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

"""The state checks of attention_ref.testing (holdings, expect_no_hidden_state) run while grading:
the sandbox's audit hook refuses the gc module's walks (gc.get_referents among them), so a check
that used them would raise PermissionError in every graded notebook instead of grading it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

_SCRIPT = textwrap.dedent(
    """
    import collections, functools, sys
    import numpy as np, torch
    from coursekit.grading.sandbox import make_audit_hook
    from attention_ref.testing import expect_holds_at_most, expect_no_hidden_state, holdings

    blocked = []
    sys.addaudithook(make_audit_hook([], [], [], blocked))
    try:
        import gc
        gc.get_referents([])
    except PermissionError:
        pass
    else:
        raise SystemExit("the audit hook let gc.get_referents through: this test tests nothing")
    blocked.clear()

    class Slotted:
        __slots__ = ("kept",)
        def __init__(self, kept):
            self.kept = kept

    state = {
        b"key": [np.zeros(3), collections.deque([torch.zeros(2)])],
        "slotted": Slotted(np.zeros(4)),
        "partial": functools.partial(max, np.zeros(5)),
        "rng": np.random.default_rng(0),
        "gen": torch.Generator(),
        "text": "abc",
        "device": torch.device("cpu"),
    }
    held = holdings(state)
    assert held.array_bytes == 24 + 8 + 32 + 40, held
    expect_holds_at_most(state, 10_000, "fits")

    CACHE = {}
    def step(cache, x):
        CACHE.setdefault(id(cache), []).append(x)
    try:
        expect_no_hidden_state(step, {}, np.ones(2), what="state in the cache")
    except AssertionError as error:
        assert "global CACHE" in str(error), error
    else:
        raise SystemExit("a global cache was not found")
    def honest(cache, x):
        cache["x"] = x
    expect_no_hidden_state(honest, {}, np.ones(2), what="state in the cache")
    assert not blocked, blocked
    print("ok")
    """
)


def test_state_checks_run_under_the_grading_audit_hook():
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr

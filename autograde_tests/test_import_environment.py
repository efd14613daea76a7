"""Importing the course's modules changes nothing in the process's environment.

A test process imports them; every child it starts after (nbgrader, a book's kernels, make)
inherits os.environ. A module that set MPLBACKEND=Agg when imported (coursekit.mutants.equivalents
did) left the book's kernels, started later by the same pytest worker, drawing no figures, and
OMP_NUM_THREADS=1 every later child on one thread. A command sets what it needs when it runs as
one (``if __name__ == "__main__"``, or in its main function)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

# Set on import by design: attention_ref.flash decides where lesson 11's kernels run before Triton
# is imported, and Triton reads the decision from os.environ; a child on the same machine would
# decide the same.
ON_PURPOSE = {"TRITON_INTERPRET", "TRITON_F32_DEFAULT"}

_SCRIPT = textwrap.dedent(
    """
    import importlib, os, pkgutil, sys
    before = dict(os.environ)
    imported = []
    for package in ("coursekit", "attention_ref"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue  # a command, run as one
            try:
                importlib.import_module(info.name)
            except ImportError:
                continue  # an optional part (Triton, a GPU, TransformerLens) this machine lacks
            imported.append(info.name)
    changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
    print(len(imported), changed)
    """
)


def test_importing_the_course_leaves_the_environment_as_it_was():
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    count, changed = done.stdout.strip().split(" ", 1)
    assert int(count) > 50, f"only {count} modules imported: the walk found too little"
    changed = sorted(set(ast.literal_eval(changed)) - ON_PURPOSE)
    assert not changed, f"importing the course's modules changed the environment: {changed}"

"""Before any test module is imported: where lesson 11's Triton kernels run. Triton must find
TRITON_INTERPRET=1 set when it is first imported, by whichever module imports it first (PyTorch's
compiler may), on a machine without a CUDA GPU: importing attention_ref.flash decides
(attention_ref.flash.runtime), then imports Triton."""

import os
from pathlib import Path

import pytest

import attention_ref.flash  # noqa: F401 -- decides where kernels run, then imports Triton

# the reference kernels' builds, kept for the next run (attention_ref.flash.compiler.CACHE)
os.environ.setdefault("ATTENTION_REF_KEEP_BUILDS", "1")

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    """Every test of this folder needs numpy, torch and pytest only: the `reference` marker."""
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.reference)

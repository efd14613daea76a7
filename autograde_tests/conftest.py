"""Shared fixtures. Nothing from Jupyter or nbgrader is imported here, so the reference tests
run with plain pytest on a machine that has only numpy and torch (the lent GPU machine)."""

from __future__ import annotations

import pytest
import torch

from attention_ref.pt import available_devices

DEVICES = available_devices()


@pytest.fixture(params=DEVICES, ids=str)
def device(request) -> torch.device:
    """Every device this machine has: the CUDA paths run wherever a GPU is present."""
    return request.param

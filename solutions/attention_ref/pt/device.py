"""Pick the device the lessons run PyTorch on: cuda > mps > cpu."""

from __future__ import annotations

import torch


def pick_device() -> torch.device:
    """The best device this machine has, in the course's order of preference."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def available_devices() -> list[torch.device]:
    """Every device this machine has, cpu first: what the tests run on."""
    found = [torch.device("cpu")]
    if torch.cuda.is_available():
        found.append(torch.device("cuda"))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append(torch.device("mps"))
    return found

"""Lesson 14, Checkpoint files: a folder with ``config.json`` and the tensors in safetensors
files, as Hugging Face models are published (and as ``save_pretrained`` writes them).

An optional module, the only one of the library that needs the ``safetensors`` package (nothing
else in the library imports it): the lesson, its book page and the reference tests do, where the
package is installed. The mapping from a checkpoint's names to the course's layers needs torch
only (``attention_ref.pt.checkpoint_names``).

A safetensors file is a JSON header (each tensor's name, dtype, shape and byte range) followed by
the raw bytes, which ``safetensors.torch.load_file`` maps from disk without running any code from
the file (unlike pickle). A large model is split into shards, ``model-00001-of-00003.safetensors``
and so on, listed by ``model.safetensors.index.json`` (its ``weight_map``: tensor name -> file).
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file, save_file

from .pt.checkpoint_names import params_from_checkpoint
from .pt.open_model import spec_from_config

__all__ = ["read_checkpoint", "write_checkpoint", "load_checkpoint"]


def _tensor_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / shard for shard in shards]
    single = folder / "model.safetensors"
    if not single.exists():
        raise FileNotFoundError(
            f"{folder} holds neither model.safetensors nor model.safetensors.index.json"
        )
    return [single]


def read_checkpoint(folder) -> tuple[dict, dict]:
    """``(config, tensors)`` of a checkpoint folder: ``config.json`` as a dict, and every tensor
    of its safetensors file (or of every shard its index lists), by name, on the CPU."""
    folder = Path(folder)
    config_file = folder / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"{folder} has no config.json")
    config = json.loads(config_file.read_text())
    tensors = {}
    for path in _tensor_files(folder):
        tensors |= load_file(path)
    return config, tensors


def write_checkpoint(folder, config: dict, tensors: dict) -> Path:
    """Write ``config.json`` and ``model.safetensors`` (one file) into ``folder``; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({name: t.contiguous() for name, t in tensors.items()}, folder / "model.safetensors")
    return folder


def load_checkpoint(folder):
    """``(spec, params)`` of a checkpoint folder: its ``ModelSpec`` and the course's parameters."""
    config, tensors = read_checkpoint(folder)
    return spec_from_config(config), params_from_checkpoint(config, tensors)

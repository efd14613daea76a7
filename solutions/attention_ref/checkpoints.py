"""Lesson 14, Checkpoint files: a folder with ``config.json`` and the tensors in safetensors
files, as Hugging Face models are published (and as ``save_pretrained`` writes them).

An optional module, the only one of the library that needs the ``safetensors`` package (nothing
else in the library imports it): the lesson, its book page and the reference tests do, where the
package is installed. The mapping from a checkpoint's names to the course's layers needs torch
only (``attention_ref.pt.checkpoint_names``).

A safetensors file is a JSON header (each tensor's name, dtype, shape and byte range) followed by
the raw bytes. ``safetensors.safe_open`` reads the header only, and each tensor when it is asked
for (from a memory map), without running any code from the file (unlike pickle); a model of
many GB is read one tensor at a time, each cast to the dtype wanted as it is read, never held
twice. A large model is split into shards, ``model-00001-of-00003.safetensors`` and so on, listed
by ``model.safetensors.index.json`` (its ``weight_map``: tensor name -> file).

``tensor_files(folder)`` maps each tensor's name to its file; ``read_tensor`` reads one;
``LazyTensors`` is a checkpoint's tensors as a mapping that reads each when it is looked up;
``read_checkpoint`` gives ``(config, LazyTensors)``; ``write_checkpoint`` writes a folder in one
file or in shards; ``write_hub_checkpoint`` writes the course's folder of a family in the hub's
layout (``attention_ref.pt.hub_checkpoints``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .pt.checkpoint_names import params_from_checkpoint
from .pt.hub_checkpoints import HUB_FILES, hub_config, hub_tensors
from .pt.open_model import spec_from_config

__all__ = [
    "tensor_files",
    "read_tensor",
    "LazyTensors",
    "read_checkpoint",
    "write_checkpoint",
    "write_hub_checkpoint",
    "load_checkpoint",
]

INDEX = "model.safetensors.index.json"


def tensor_files(folder) -> dict:
    """``{tensor name: the safetensors file that holds it}`` of a checkpoint folder: the index's
    ``weight_map`` when the folder is sharded, else every tensor of its ``model.safetensors``."""
    folder = Path(folder)
    if (folder / INDEX).exists():
        weight_map = json.loads((folder / INDEX).read_text())["weight_map"]
        return {name: folder / file for name, file in weight_map.items()}
    single = folder / "model.safetensors"
    if not single.exists():
        raise FileNotFoundError(f"{folder} holds neither model.safetensors nor {INDEX}")
    with safe_open(single, framework="pt") as f:
        return {name: single for name in f.keys()}


def read_tensor(files: dict, name: str, dtype=None) -> torch.Tensor:
    """The tensor ``name`` read from its file alone (``files`` as ``tensor_files`` gives), a
    floating-point one cast to ``dtype`` when given (integers, such as MXFP4 codes, as stored)."""
    if name not in files:
        raise KeyError(f"the checkpoint has no tensor {name}")
    with safe_open(files[name], framework="pt") as f:
        t = f.get_tensor(name)
    return t.to(dtype) if dtype is not None and t.is_floating_point() else t


class LazyTensors(Mapping):
    """A checkpoint folder's tensors by name, each read from disk when it is looked up."""

    def __init__(self, folder, dtype=None):
        self.files, self.dtype = tensor_files(folder), dtype

    def __getitem__(self, name: str) -> torch.Tensor:
        return read_tensor(self.files, name, self.dtype)

    def __contains__(
        self, name
    ) -> bool:  # from the names alone (Mapping's own would read the tensor)
        return name in self.files

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def read_checkpoint(folder, dtype=None) -> tuple[dict, LazyTensors]:
    """``(config, tensors)`` of a checkpoint folder: ``config.json`` as a dict, and its tensors
    (one file or shards) as a ``LazyTensors`` mapping, floating-point ones in ``dtype``."""
    folder = Path(folder)
    config_file = folder / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"{folder} has no config.json")
    return json.loads(config_file.read_text()), LazyTensors(folder, dtype)


def write_checkpoint(folder, config: dict, tensors: dict, files=("model.safetensors",)) -> Path:
    """Write ``config.json`` and the tensors into ``folder``: one file, or the shards named in
    ``files`` (consecutive tensors, about equal bytes each) with their index; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    names = list(tensors)
    sizes = [tensors[n].numel() * tensors[n].element_size() for n in names]
    total, weight_map, done = sum(sizes), {}, 0
    for name, size in zip(names, sizes):  # the shard a tensor starts in, by bytes written before it
        weight_map[name] = files[min(len(files) - 1, done * len(files) // max(total, 1))]
        done += size
    for file in files:
        shard = {n: tensors[n].contiguous() for n in names if weight_map[n] == file}
        save_file(shard, folder / file, metadata={"format": "pt"})
    if len(files) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (folder / INDEX).write_text(json.dumps(index, indent=2) + "\n")
    return folder


def write_hub_checkpoint(folder, family: str, seed: int = 14) -> Path:
    """The course's folder of ``family`` in the hub's layout (``hub_checkpoints``): the published
    ``config.json`` keys, bfloat16 tensors (gpt-oss's experts in MXFP4), the published files."""
    return write_checkpoint(
        folder, hub_config(family), hub_tensors(family, seed), HUB_FILES[family]
    )


def load_checkpoint(folder, dtype=None):
    """``(spec, params)`` of a checkpoint folder: its ``ModelSpec`` and the course's parameters,
    floating-point tensors in ``dtype`` (as stored when None)."""
    config, tensors = read_checkpoint(folder, dtype)
    return spec_from_config(config), params_from_checkpoint(config, tensors)

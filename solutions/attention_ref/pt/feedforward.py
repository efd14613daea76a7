"""Lesson 6, The position-wise feed-forward network -- PyTorch reference (the same functions as
``attention_ref.np.feedforward``), plus ``ffn_params_from_torch``, which reads the weights of
PyTorch's two ``nn.Linear`` layers or of the paper's "two convolutions with kernel size 1"
(``nn.Conv1d(kernel_size=1)``) into this module's row-vector layout.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import _checks

# plain arithmetic: one copy serves both
from ..np.feedforward import (
    ffn_parameter_count,
    layer_parameter_counts,
)
from .retrieval import as_float_tensor

__all__ = [
    "init_ffn_params",
    "position_wise_ffn",
    "ffn_params_from_torch",
    "ffn_parameter_count",
    "layer_parameter_counts",
]


def init_ffn_params(
    d_model: int, d_ff: int, rng: torch.Generator | None = None, *, device=None, dtype=torch.float32
) -> dict:
    """Random parameters in the layout of ``attention_ref.np.init_ffn_params`` (drawn on the
    CPU)."""
    _checks.require_positive("d_model", d_model)
    _checks.require_positive("d_ff", d_ff)

    def uniform(fan_in, shape):
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=rng, dtype=dtype) * (2 * bound) - bound).to(device)

    return {
        "w_1": uniform(d_model, (d_model, d_ff)),
        "b_1": uniform(d_model, (d_ff,)),
        "w_2": uniform(d_ff, (d_ff, d_model)),
        "b_2": uniform(d_ff, (d_model,)),
    }


def position_wise_ffn(x, params: dict) -> torch.Tensor:
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 for every position of ``x`` ``(..., n, d_model)``."""
    x = as_float_tensor("x", x)
    params = {name: as_float_tensor(name, params[name]) for name in _checks.ffn_params(params)}
    _checks.ffn_inputs(x, params)
    hidden = torch.relu(x @ params["w_1"] + params["b_1"])
    return hidden @ params["w_2"] + params["b_2"]


def _as_matrix(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight in x @ w layout, bias) of an nn.Linear or a kernel-size-1 nn.Conv1d."""
    if isinstance(layer, nn.Linear):
        weight = layer.weight  # (out, in): PyTorch computes x W^T + b
    elif isinstance(layer, nn.Conv1d):
        if (
            layer.kernel_size != (1,)
            or layer.stride != (1,)
            or layer.groups != 1
            or layer.dilation != (1,)
        ):
            raise ValueError(
                f"only a Conv1d with kernel_size=1, stride 1, one group is a position-wise "
                f"linear map, got {layer}"
            )
        weight = layer.weight[:, :, 0]  # (out, in, 1) -> (out, in)
    else:
        raise TypeError(
            f"expected an nn.Linear or an nn.Conv1d(kernel_size=1), got {type(layer).__name__}"
        )
    bias = None if layer.bias is None else layer.bias.detach()
    return weight.detach().T, bias


def ffn_params_from_torch(first: nn.Module, second: nn.Module) -> dict:
    """``{w_1, b_1, w_2, b_2}`` from two nn.Linear layers or two nn.Conv1d(kernel_size=1),
    detached."""
    w_1, b_1 = _as_matrix(first)
    w_2, b_2 = _as_matrix(second)
    if b_1 is None or b_2 is None:
        raise ValueError("the FFN has biases b_1 and b_2: build the layers with bias=True")
    return {"w_1": w_1, "b_1": b_1, "w_2": w_2, "b_2": b_2}

"""Lesson 14, gpt-oss's experts as published: MXFP4 blocks and scales -- PyTorch reference.

``openai/gpt-oss-20b`` stores about 90 % of its parameters, the experts' ``gate_up_proj`` and
``down_proj``, in the OCP Microscaling format MXFP4 (OpenAI, 2025, model card section 2): each
group of 32 consecutive numbers of a row shares one scale, and each number is a 4-bit float.

* A number is **FP4 E2M1**: a sign, two exponent bits and one mantissa bit, 16 codes for the
  values ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` and their negatives (``FP4_VALUES``, code ``c`` ->
  ``FP4_VALUES[c]``).
  Two codes share a byte: the low nibble is the even element, the high nibble the odd one.
* A scale is **E8M0**: one byte ``s`` holding an exponent only, the factor ``2 ** (s - 127)``
  (``torch.ldexp(value, s - 127)`` multiplies by it exactly).

The checkpoint holds, for a weight the model uses as ``(experts, in, out)``,

* ``..._blocks``: uint8 ``(experts, out, in / 32, 16)``, the 32 codes of each group in 16 bytes;
* ``..._scales``: uint8 ``(experts, out, in / 32)``, one scale per group;

that is, the rows are the *outputs*, as ``nn.Linear`` stores a weight, and dequantizing ends with
a transpose. ``dequantize_mxfp4`` computes what ``transformers`` computes when it loads the model
without MXFP4 kernels (``integrations/mxfp4.py``, ``convert_moe_packed_tensors``; the reference
tests compare the two); ``quantize_mxfp4`` is its inverse for numbers that MXFP4 represents, and
rounds to the nearest code otherwise (for the course's test checkpoints).
"""

from __future__ import annotations

import torch

__all__ = ["FP4_VALUES", "dequantize_mxfp4", "quantize_mxfp4", "mxfp4_shapes"]

FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)  # fmt: skip
GROUP = 32  # numbers per scale (16 bytes of two codes)


def mxfp4_shapes(experts: int, rows: int, columns: int) -> tuple[tuple, tuple]:
    """The shapes of the blocks and scales of a weight used as ``(experts, columns, rows)``:
    ``(experts, rows, columns / 32, 16)`` and ``(experts, rows, columns / 32)``."""
    if columns % GROUP:
        raise ValueError(f"MXFP4 groups {GROUP} numbers of a row: {columns} is not a multiple")
    return (experts, rows, columns // GROUP, GROUP // 2), (experts, rows, columns // GROUP)


def _check(blocks, scales) -> None:
    if blocks.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(f"blocks and scales are uint8, got {blocks.dtype} and {scales.dtype}")
    if blocks.ndim < 3 or blocks.shape[-1] != GROUP // 2 or blocks.shape[:-1] != scales.shape:
        raise ValueError(
            f"blocks (..., rows, groups, 16) and scales (..., rows, groups) do not fit: "
            f"got {tuple(blocks.shape)} and {tuple(scales.shape)}"
        )


def dequantize_mxfp4(blocks, scales, dtype=torch.bfloat16) -> torch.Tensor:
    """The weight held by MXFP4 ``blocks`` uint8 ``(..., rows, groups, 16)`` and ``scales`` uint8
    ``(..., rows, groups)``, in ``dtype`` and transposed: ``(..., groups * 32, rows)``."""
    _check(blocks, scales)
    table = torch.tensor(FP4_VALUES, dtype=dtype, device=blocks.device)
    codes = torch.stack((blocks & 0x0F, blocks >> 4), dim=-1).flatten(-2)  # low nibble first
    values = table[codes.long()]  # (..., rows, groups, 32)
    exponents = scales.to(torch.int32)[..., None] - 127
    weight = torch.ldexp(values, exponents.to(values.device))
    return weight.flatten(-2).transpose(-1, -2)


def quantize_mxfp4(weight) -> tuple[torch.Tensor, torch.Tensor]:
    """``(blocks, scales)`` of a weight ``(..., columns, rows)`` (columns a multiple of 32): each
    group's scale the power of two that brings its largest magnitude to at most 6, each number
    rounded to the nearest FP4 value. ``dequantize_mxfp4`` of the result gives it back exactly when
    every number is representable."""
    rows_first = torch.as_tensor(weight).transpose(-1, -2).double()
    if rows_first.shape[-1] % GROUP:
        raise ValueError(f"MXFP4 groups {GROUP} numbers of a row: {rows_first.shape[-1]} is not")
    groups = rows_first.unflatten(-1, (-1, GROUP))
    largest = groups.abs().amax(dim=-1).clamp(min=2.0**-126)
    exponent = torch.ceil(torch.log2(largest / 6.0)).clamp(-127, 127)
    scaled = groups / torch.exp2(exponent)[..., None]
    table = torch.tensor(FP4_VALUES, dtype=torch.float64)
    codes = (scaled[..., None] - table).abs().argmin(dim=-1).to(torch.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks, (exponent + 127).to(torch.uint8)

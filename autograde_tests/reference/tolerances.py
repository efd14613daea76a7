"""Comparison tolerances per dtype, for checking the reference against PyTorch built-ins."""

import torch

TOLERANCES = {
    torch.float64: dict(rtol=1e-10, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
}
FLOAT_DTYPES = list(TOLERANCES)

"""Lesson 9, Efficient attention -- PyTorch reference (the same functions as
``attention_ref.np.efficient``), device-agnostic: everything runs where the inputs live.

Half-precision inputs are computed in float32 (scores, softmax statistics, output accumulator) and
the result is returned in the inputs' dtype: accurate even for logits of 1e4. On a GPU,
``half_products=True`` runs the two matrix products in the inputs' half precision instead (tensor
cores; the scores are then rounded to half precision before the float32 softmax), the speed
recipe of FlashAttention, which however keeps its scores in float32 inside the kernel.
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from .retrieval import as_float_tensor, same_dtype, upcast


def _finite_or_zero(x: torch.Tensor) -> torch.Tensor:
    """-inf (a maximum over nothing or over masked scores only) replaced by 0, so that
    ``exp(score - shift)`` gives 0 for masked scores instead of NaN."""
    return torch.where(torch.isfinite(x), x, torch.zeros((), dtype=x.dtype, device=x.device))


def online_softmax_stats(x, block_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Running maximum and running sum of a softmax over the last axis, in one streaming pass.

    Returns ``(m, l)`` of shape ``x.shape[:-1]`` (float32 for half-precision input) with
    ``softmax(x) = exp(x - m) / l``; an all -inf slice gives ``m = -inf, l = 0``.
    """
    x = as_float_tensor("x", x)
    _checks.block_size(block_size)
    _checks.require_ndim("x", x, 1, "(..., n)")
    (work,) = upcast(x)
    running_max = torch.full(x.shape[:-1], -torch.inf, dtype=work.dtype, device=x.device)
    running_sum = torch.zeros(x.shape[:-1], dtype=work.dtype, device=x.device)
    for start in range(0, x.shape[-1], block_size):
        block = work[..., start : start + block_size]
        new_max = torch.maximum(running_max, block.amax(dim=-1))
        shift = _finite_or_zero(new_max)
        running_sum = running_sum * torch.exp(running_max - shift) + torch.exp(
            block - shift[..., None]
        ).sum(dim=-1)
        running_max = new_max
    return running_max, running_sum


def online_softmax(x, block_size: int = 1) -> torch.Tensor:
    """Softmax over the last axis from the statistics of :func:`online_softmax_stats`."""
    x = as_float_tensor("x", x)
    running_max, running_sum = online_softmax_stats(x, block_size)
    (work,) = upcast(x)
    exps = torch.exp(work - _finite_or_zero(running_max)[..., None])
    total = torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)
    return (exps / total[..., None]).to(x.dtype)


def _key_block(mask: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """The columns ``start:stop`` of a mask that may broadcast along the keys (size 1 there)."""
    return mask if mask.ndim == 0 or mask.shape[-1] == 1 else mask[..., start:stop]


def _require_boolean_mask(mask) -> None:
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool):
        raise TypeError(
            "mask must be a boolean tensor (True = may attend), got "
            f"{getattr(mask, 'dtype', type(mask))}"
        )


def tiled_attention(
    queries,
    keys,
    values,
    mask=None,
    block_size: int = 64,
    return_lse: bool = False,
    *,
    half_products: bool = False,
):
    """Eq. (1) over blocks of ``block_size`` keys and values (see
    ``attention_ref.np.tiled_attention``).

    Never holds more than ``n_q x block_size`` scores per batch entry; equal to
    ``F.scaled_dot_product_attention`` with the same boolean mask (fully masked rows: zeros).
    ``half_products``: see the module's docstring (it changes nothing for float32/float64 inputs).
    """
    queries, keys = as_float_tensor("queries", queries), as_float_tensor("keys", keys)
    values = as_float_tensor("values", values)
    same_dtype(queries=queries, keys=keys, values=values)
    _require_boolean_mask(mask)
    batch = _checks.tiled_inputs(queries, keys, values, mask, block_size)
    dtype = queries.dtype
    work = torch.promote_types(dtype, torch.float32)
    products = dtype if half_products else work
    queries = queries.to(products)
    n_q, n_k, d_v = queries.shape[-2], keys.shape[-2], values.shape[-1]
    scale = 1.0 / math.sqrt(queries.shape[-1])
    device = queries.device

    tracked = torch.is_grad_enabled() and any(t.requires_grad for t in (queries, keys, values))
    running_max = torch.full(batch + (n_q, 1), -torch.inf, dtype=work, device=device)
    running_sum = torch.zeros(batch + (n_q, 1), dtype=work, device=device)
    acc = torch.zeros(batch + (n_q, d_v), dtype=work, device=device)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = (queries @ keys[..., start:stop, :].to(products).transpose(-1, -2)).to(work)
        scores.mul_(scale)
        if mask is not None:
            scores = scores.masked_fill(~_key_block(mask, start, stop), -torch.inf)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        shift = _finite_or_zero(new_max)
        # 0 while nothing was seen; 1 if the maximum did not move
        alpha = torch.exp(running_max - shift)
        if tracked:  # autograd keeps the scores (for amax) and the statistics: nothing in place
            weights = torch.exp(scores - shift)
            running_sum = running_sum * alpha + weights.sum(dim=-1, keepdim=True)
        else:  # in place: no second (n_q, block) tensor, no new statistics every block
            weights = scores.sub_(shift).exp_()
            running_sum.mul_(alpha).add_(weights.sum(dim=-1, keepdim=True))
        block_out = (weights.to(products) @ values[..., start:stop, :].to(products)).to(work)
        acc = acc * alpha + block_out if tracked else acc.mul_(alpha).add_(block_out)
        running_max = new_max
    out = (acc / torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)).to(dtype)
    if not return_lse:
        return out
    return out, (running_max + torch.log(running_sum))[..., 0].to(dtype)


def merge_attention(out_a, lse_a, out_b, lse_b) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over keys A and B from the results over A alone and over B alone
    (see ``attention_ref.np.merge_attention``): ``lse = logaddexp(lse_a, lse_b)``,
    ``out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b``."""
    out_a, lse_a = as_float_tensor("out_a", out_a), as_float_tensor("lse_a", lse_a)
    out_b, lse_b = as_float_tensor("out_b", out_b), as_float_tensor("lse_b", lse_b)
    same_dtype(out_a=out_a, lse_a=lse_a, out_b=out_b, lse_b=lse_b)
    _checks.merge_inputs(out_a, lse_a, out_b, lse_b)
    dtype = out_a.dtype
    out_a, lse_a, out_b, lse_b = upcast(out_a, lse_a, out_b, lse_b)
    lse = torch.logaddexp(lse_a, lse_b)
    shift = _finite_or_zero(lse)
    weight_a, weight_b = torch.exp(lse_a - shift)[..., None], torch.exp(lse_b - shift)[..., None]
    return (weight_a * out_a + weight_b * out_b).to(dtype), lse.to(dtype)

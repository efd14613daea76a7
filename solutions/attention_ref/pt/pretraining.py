"""Lesson 10, Encoder-only and decoder-only models -- PyTorch reference (the same functions as
``attention_ref.np.pretraining``, whose docstring explains the two objectives). Every function
runs on the device of its inputs; random draws come from ``rng`` (a ``torch.Generator`` on the
CPU, or None) and are moved there."""

from __future__ import annotations

import torch

from .. import _checks
from ..np.pretraining import (  # plain arithmetic and option checks: one copy serves both
    MASK_SHARE,
    RANDOM_SHARE,
    bert_parameter_counts,
    masking_options,
)
from .retrieval import as_float_tensor

__all__ = ["mask_tokens", "masked_lm_loss", "next_token_loss", "bert_parameter_counts"]


def mask_tokens(
    tokens, rng, vocab_size: int, mask_id: int, num_special: int, select_prob: float = 0.15
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's input masking: ``(inputs, selected)`` (see the NumPy twin): 15 % of the ordinary
    tokens chosen; of those 80 % ``mask_id``, 10 % a random ordinary token, 10 % unchanged."""
    if not isinstance(tokens, torch.Tensor) or tokens.is_floating_point() or tokens.is_complex():
        raise TypeError(
            f"tokens must be a tensor of integer ids, got {getattr(tokens, 'dtype', tokens)}"
        )
    masking_options(vocab_size, mask_id, num_special, select_prob)
    shape, device = tokens.shape, tokens.device
    chosen = torch.rand(shape, generator=rng).to(device) < select_prob
    action = torch.rand(shape, generator=rng).to(device)
    random_tokens = torch.randint(num_special, vocab_size, shape, generator=rng).to(device)
    selected = chosen & (tokens >= num_special)
    inputs = torch.where(selected & (action < MASK_SHARE), mask_id, tokens)
    replace = selected & (action >= MASK_SHARE) & (action < MASK_SHARE + RANDOM_SHARE)
    inputs = torch.where(replace, random_tokens.to(tokens.dtype), inputs)
    return inputs.to(tokens.dtype), selected


def _token_losses(logits, targets) -> torch.Tensor:
    logits = as_float_tensor("logits", logits)
    _checks.require_ndim("logits", logits, 1, "(..., n, vocab)")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} need one row of vocabulary scores per target: targets "
            f"have shape {tuple(targets.shape)}, expected {tuple(logits.shape[:-1])}"
        )
    log_probs = torch.log_softmax(logits, dim=-1)
    return -log_probs.gather(-1, targets[..., None].long())[..., 0]


def masked_lm_loss(logits, targets, selected) -> torch.Tensor:
    """Mean cross-entropy over the ``selected`` positions only; 0 when nothing is selected (see
    the NumPy twin). Equals ``F.cross_entropy(..., ignore_index=-100)`` on
    ``where(selected, targets, -100)``, which gives NaN when nothing is selected."""
    losses = _token_losses(logits, targets)
    if selected.shape != losses.shape:
        raise ValueError(
            f"selected has shape {tuple(selected.shape)}, the targets {tuple(losses.shape)}"
        )
    selected = selected.bool()
    total = torch.where(selected, losses, 0.0).sum()  # keeps the graph when nothing is selected
    return total / selected.sum().clamp(min=1)


def next_token_loss(logits, tokens) -> torch.Tensor:
    """Mean cross-entropy of predicting token ``i + 1`` from position ``i``: ``logits[..., :-1]``
    against ``tokens[..., 1:]`` (see the NumPy twin)."""
    logits = as_float_tensor("logits", logits)
    _checks.require_ndim("logits", logits, 2, "(..., n, vocab)")
    if tokens.shape[-1] < 2:
        raise ValueError(
            f"a next-token loss needs at least 2 tokens, got shape {tuple(tokens.shape)}"
        )
    return _token_losses(logits[..., :-1, :], tokens[..., 1:]).mean()

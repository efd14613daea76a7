"""Lesson 8, training the Transformer the paper's way (section 5) -- PyTorch reference.

Three pieces of section 5 that ``attention_ref.pt.model.train`` uses and lesson 8 has the learner
write:

``label_smoothed_cross_entropy(logits, targets, smoothing, ignore_index)``
    Cross-entropy against a smoothed target distribution (section 5.4, "label smoothing of value
    eps_ls = 0.1", after Szegedy et al., 2016, section 7): the true class gets ``1 - eps``, and
    ``eps`` is spread uniformly over *all* ``V`` classes, the true one included, so the target is
    ``(1 - eps) * one_hot + eps / V``. Positions whose target is ``ignore_index`` (padding) count
    for nothing, and the mean runs over the others. This is exactly
    ``F.cross_entropy(logits, targets, ignore_index=..., label_smoothing=eps)``.
``lrate(step_num, d_model, warmup_steps, factor)``
    Eq. (3): ``factor * d_model ** -0.5 * min(step_num ** -0.5, step_num * warmup_steps ** -1.5)``,
    ``step_num`` counting from 1; it rises linearly for ``warmup_steps`` steps, peaks at
    ``factor / sqrt(d_model * warmup_steps)``, then decays as ``1 / sqrt(step_num)``.
``dropout(x, p, training)``
    Inverted dropout, what ``F.dropout`` / ``nn.Dropout`` compute: in training each element is
    zeroed with probability ``p`` and the survivors are multiplied by ``1 / (1 - p)``, so that the
    expected value is unchanged and nothing needs rescaling at evaluation; otherwise the identity.
"""

from __future__ import annotations

import torch

__all__ = ["label_smoothed_cross_entropy", "lrate", "dropout"]


def label_smoothed_cross_entropy(
    logits, targets, smoothing: float = 0.1, ignore_index: int = -100
) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` ``(..., V)`` against integer ``targets`` ``(...)``, with
    label smoothing ``smoothing`` and the positions whose target is ``ignore_index`` left out.

    The target distribution of a position with class ``y`` is ``(1 - smoothing) * one_hot(y) +
    smoothing / V``: the loss there is ``(1 - smoothing) * (-log p_y) + smoothing * mean_k(-log
    p_k)``. Returns a scalar on the logits' device (NaN when every target is ignored, as
    ``F.cross_entropy`` returns). Half-precision logits are computed in float32.
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError("logits and targets must be torch tensors")
    if logits.shape[:-1] != targets.shape or logits.ndim < 1:
        raise ValueError(
            f"logits (..., V) and targets (...) do not fit: shapes {tuple(logits.shape)} and "
            f"{tuple(targets.shape)}"
        )
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise TypeError(f"targets must hold class indices (an integer dtype), got {targets.dtype}")
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing must lie in [0, 1], got {smoothing}")
    log_probs = torch.log_softmax(logits.float() if logits.dtype.itemsize < 4 else logits, dim=-1)
    keep = targets != ignore_index
    safe = torch.where(keep, targets, 0)  # any class: those positions are dropped below
    nll = -log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy against eps / V on every class
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return (loss * keep).sum() / keep.sum()


def lrate(step_num: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """The learning rate of Eq. (3) at step ``step_num`` (counted from 1), times ``factor``.

    ``d_model ** -0.5 * min(step_num ** -0.5, step_num * warmup_steps ** -1.5)``: linear warm-up
    over the first ``warmup_steps`` steps, the peak ``1 / sqrt(d_model * warmup_steps)`` at
    ``step_num = warmup_steps``, then proportional to ``1 / sqrt(step_num)``. The paper uses
    ``warmup_steps = 4000`` and ``factor = 1``. ``LambdaLR(optimizer, lambda e: lrate(e + 1, ...))``
    with a base learning rate of 1 follows it (its epochs count from 0).
    """
    if step_num < 1:
        raise ValueError(f"step_num counts from 1 (Eq. 3 has step_num ** -0.5), got {step_num}")
    if warmup_steps < 1 or d_model < 1:
        raise ValueError(f"need d_model >= 1 and warmup_steps >= 1, got {d_model}, {warmup_steps}")
    return factor * d_model**-0.5 * min(step_num**-0.5, step_num * warmup_steps**-1.5)


def dropout(x, p: float = 0.5, training: bool = True) -> torch.Tensor:
    """Inverted dropout with the signature of ``F.dropout``: in training, zero each element of
    ``x`` with probability ``p`` and scale the others by ``1 / (1 - p)``; otherwise return ``x``.

    The random draw uses PyTorch's generator on ``x``'s device (seed it with
    ``torch.manual_seed``). ``p = 1`` zeroes everything, as ``nn.Dropout(1.0)`` does.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch tensor, got {type(x).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    keep = torch.rand(x.shape, device=x.device) >= p  # each element survives with 1 - p
    return x * keep / (1.0 - p)

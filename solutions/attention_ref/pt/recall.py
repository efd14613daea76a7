"""Lesson 13 (PyTorch only): multi-query associative recall, and tiny stacks of linear- and
full-attention layers to train on it.

**MQAR** (Arora et al., 2024, Zoology): a sequence lists ``num_pairs`` key-value
pairs, then asks for some of the keys again; at each such query the model must name the value
that followed that key. Every pair must be kept until it is asked for, so the task measures how
much a layer can recall from its context: all of it for softmax attention, whose KV cache keeps
every token; what fits in its fixed state for a linear-attention layer.

``mqar_batch(batch_size, num_pairs, num_keys, num_values, generator)``: token 0 is ``BOS``, keys
are ids ``1 .. num_keys``, values ``num_keys + 1 .. num_keys + num_values``; the sequence is
``BOS k_1 v_1 ... k_N v_N q_1 ... q_N`` (the queries, the keys in a random order), and the
targets are -100 (ignored) except at the queries, where they are the values asked for.

``RecallModel(vocab_size, d_model, num_heads, layers, ...)``: an embedding, then one pre-norm
residual block per letter of ``layers`` (``"L"``: a Gated DeltaNet layer, ``"F"``: causal softmax
attention, optionally with Qiu et al.'s output gate), each followed by an MLP, and a linear read
out. The Gated DeltaNet layer follows Qwen3-Next's (Yang et al., 2025): a short
causal convolution over the projected queries, keys and values, L2-normalised queries and keys,
``beta = sigmoid(x W_beta)``, ``log alpha = logsigmoid(x W_alpha + 3)``, and the gated delta rule
computed by the function it is given (``delta_rule``: the library's chunked form by default,
the learner's in the lesson). No positional encoding: the convolution and the recurrence order the
tokens, and the full-attention layers read what they wrote.

``train_recall(model, steps, ...)`` trains with AdamW on fresh batches and returns the losses;
``recall_accuracy(model, ...)`` is the share of queries answered right on held-out sequences;
``first_position_share(model, tokens)`` the attention each full-attention layer's queries give
position 0 (lesson 12's measure of a sink).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .delta import gated_delta_rule_chunked
from .multihead import merge_heads, split_heads

__all__ = [
    "BOS",
    "mqar_batch",
    "RecallModel",
    "train_recall",
    "recall_accuracy",
    "first_position_share",
]

BOS = 0


def mqar_batch(batch_size: int, num_pairs: int, num_keys: int, num_values: int, generator):
    """``(tokens, targets)``, both ``(batch_size, 1 + 3 num_pairs)`` ``long``, drawn from
    ``generator`` (a ``torch.Generator`` on the CPU): see the module docstring."""
    if num_pairs > num_keys:
        raise ValueError(f"{num_pairs} pairs need as many distinct keys, got num_keys={num_keys}")
    draw = dict(generator=generator)
    keys = torch.rand(batch_size, num_keys, **draw).argsort(dim=-1)[:, :num_pairs] + 1
    values = torch.randint(num_values, (batch_size, num_pairs), **draw) + 1 + num_keys
    asked = torch.rand(batch_size, num_pairs, **draw).argsort(dim=-1)  # the order of the queries
    context = torch.stack([keys, values], dim=-1).flatten(1)
    bos = torch.full((batch_size, 1), BOS, dtype=torch.long)
    tokens = torch.cat([bos, context, keys.gather(1, asked)], dim=1)
    targets = torch.full_like(tokens, -100)
    targets[:, 1 + 2 * num_pairs :] = values.gather(1, asked)
    return tokens, targets


class ShortConv(nn.Module):
    """A causal depthwise convolution over the sequence: position t mixes t - kernel + 1 .. t."""

    def __init__(self, width: int, kernel: int = 4):
        super().__init__()
        self.kernel = kernel
        self.weight = nn.Parameter(torch.randn(width, 1, kernel) / kernel)

    def forward(self, x):  # (batch, n, width)
        padded = F.pad(x.transpose(1, 2), (self.kernel - 1, 0))
        return F.conv1d(padded, self.weight, groups=x.shape[-1]).transpose(1, 2)


class GatedDeltaNetLayer(nn.Module):
    """A Gated DeltaNet token mixer in the manner of Qwen3-Next's, ``delta_rule`` computing the
    recurrence (``(q, k, v, beta, log_decay, chunk_size) -> (out, state)``)."""

    def __init__(self, d_model: int, num_heads: int, delta_rule, chunk_size: int):
        super().__init__()
        self.num_heads, self.delta_rule, self.chunk_size = num_heads, delta_rule, chunk_size
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.conv = ShortConv(3 * d_model)
        self.beta = nn.Linear(d_model, num_heads)
        self.decay = nn.Linear(d_model, num_heads)
        nn.init.constant_(self.decay.bias, 3.0)  # alpha = sigmoid(3) ~ 0.95 at the start
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        mixed = F.silu(self.conv(self.qkv(x)))
        q, k, v = (split_heads(t, self.num_heads) for t in mixed.chunk(3, -1))
        q = F.normalize(q, dim=-1) * q.shape[-1] ** -0.5
        k = F.normalize(k, dim=-1)
        beta = torch.sigmoid(self.beta(x)).transpose(1, 2)  # (batch, h, n)
        log_decay = F.logsigmoid(self.decay(x)).transpose(1, 2)
        out, _ = self.delta_rule(q, k, v, beta, log_decay, self.chunk_size)
        return self.out(merge_heads(out))


class FullAttentionLayer(nn.Module):
    """Causal softmax attention, with Qiu et al.'s element-wise sigmoid gate before ``W^O`` when
    ``gated``; ``self.weights`` keeps the last forward's attention weights ``(batch, h, n, n)``
    and ``self.gates`` its gates ``(batch, h, n, d_head)`` (None without a gate)."""

    def __init__(self, d_model: int, num_heads: int, gated: bool = False):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.gate = nn.Linear(d_model, d_model) if gated else None
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.weights = self.gates = None

    def forward(self, x):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, -1))
        n = x.shape[-2]
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        self.weights = weights.detach()
        heads = weights @ v
        if self.gate is not None:
            gates = torch.sigmoid(split_heads(self.gate(x), self.num_heads))
            self.gates = gates.detach()
            heads = heads * gates
        return self.out(merge_heads(heads))


class RecallModel(nn.Module):
    """Embedding, one residual block per letter of ``layers`` ("L" linear, "F" full attention),
    read-out: ``model(tokens)`` -> logits ``(batch, n, vocab_size)``."""

    def __init__(self, vocab_size, d_model, num_heads, layers, *, gated=False,
                 delta_rule=gated_delta_rule_chunked, chunk_size=16, generator=None):  # fmt: skip
        super().__init__()
        if set(layers) - {"L", "F"}:
            raise ValueError(f'layers is a string of "L" (linear) and "F" (full), got {layers!r}')
        if generator is not None:
            torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
        self.layers = layers
        self.embed = nn.Embedding(vocab_size, d_model)
        self.mixers = nn.ModuleList(
            GatedDeltaNetLayer(d_model, num_heads, delta_rule, chunk_size) if kind == "L"
            else FullAttentionLayer(d_model, num_heads, gated) for kind in layers
        )  # fmt: skip
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * len(layers)))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, 2 * width), nn.GELU(), nn.Linear(2 * width, d_model))
            for width in [d_model] * len(layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        x = self.embed(tokens)
        for i, (mixer, mlp) in enumerate(zip(self.mixers, self.mlps)):
            x = x + mixer(self.norms[2 * i](x))
            x = x + mlp(self.norms[2 * i + 1](x))
        return self.readout(self.final_norm(x))


def train_recall(model, steps, *, num_pairs, num_keys, num_values, batch_size=32, lr=3e-3,
                 generator=None, progress=None):  # fmt: skip
    """AdamW (weight decay 0.1) with a one-cycle learning rate, one fresh MQAR batch per step,
    the loss on the queries only. ``progress`` wraps the range of steps (a progress bar).
    Returns the loss of every step."""
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=steps, pct_start=0.1)
    losses = []
    model.train()
    for _ in progress(range(steps)) if progress else range(steps):
        tokens, targets = mqar_batch(batch_size, num_pairs, num_keys, num_values, generator)
        logits = model(tokens.to(device))
        loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def recall_accuracy(model, *, num_pairs, num_keys, num_values, batch_size=256, seed=1234) -> float:
    """The share of queries whose value the model ranks first, on ``batch_size`` sequences drawn
    with ``seed`` (the same held-out sequences for every model)."""
    tokens, targets = mqar_batch(batch_size, num_pairs, num_keys, num_values,
                                 torch.Generator().manual_seed(seed))  # fmt: skip
    device = next(model.parameters()).device
    predicted = model(tokens.to(device)).argmax(dim=-1).cpu()
    asked = targets != -100
    return (predicted[asked] == targets[asked]).float().mean().item()


@torch.no_grad()
def first_position_share(model, tokens, skip: int = 8) -> list[torch.Tensor]:
    """Per full-attention layer, per head: the mean attention weight that queries ``skip ..
    n - 1`` give position 0 (``BOS``) on ``tokens``."""
    device = next(model.parameters()).device
    model(tokens.to(device))
    return [m.weights[:, :, skip:, 0].mean(dim=(0, 2)).cpu() for m in model.mixers
            if isinstance(m, FullAttentionLayer)]  # fmt: skip

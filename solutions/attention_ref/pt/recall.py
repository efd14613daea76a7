"""Lesson 13 (PyTorch only): multi-query associative recall, and tiny one-layer models trained on
it, several seeds at once.

**MQAR** (Arora et al., 2024, Zoology): a sequence lists ``num_pairs`` key-value pairs, then asks
for every key again, in another order; at each such query the model must name the value that
followed that key. Every pair must be kept until it is asked for, so the task measures how much a
layer can recall from its context: all of it for softmax attention, whose KV cache keeps every
token; what fits in its fixed state for a linear-attention layer.

``mqar_batch(batch_size, num_pairs, num_keys, num_values, generator)``: token 0 is ``BOS``, keys
are ids ``1 .. num_keys``, values ``num_keys + 1 .. num_keys + num_values``; the sequence is
``BOS k_1 v_1 ... k_N v_N q_1 ... q_N`` (the queries, the keys in a random order), and the
targets are -100 (ignored) except at the queries, where they are the values asked for.

``RecallModels(seeds, mixer, ...)``: one model per seed, trained together (every parameter has a
leading axis, one slice per model, so one matrix product serves every model): an embedding, one
residual block with a token mixer, a read-out; no positional encoding. ``mixer``, ``conv`` and
``gated`` may be given per model, to train variants of one kind of mixer side by side (the delta
rule with the gated one, with and without the convolution; attention with and without its gate),
each model the one it would be alone. The mixer is

* ``"linear"``: linear attention without a normaliser, ``S_t = S_{t-1} + k_t v_t^T``;
* ``"delta"``: the delta rule (the gated delta rule with ``log_decay = 0``);
* ``"gated_delta"``: the gated delta rule, ``log alpha_t = logsigmoid(x_t W_alpha + 5)``
  (``alpha`` near 0.99 at first: MQAR needs no forgetting, and a state that forgets fast before
  the model has learnt when to keep makes the first steps of training slower);
* ``"attention"``: causal softmax attention, with Qiu et al.'s element-wise sigmoid gate on
  each head's output before ``W^O`` when ``gated``.

Every mixer projects ``x`` to q, k and v, then (``conv=True``) runs a **short causal
convolution** of width 4 over the sequence on each of their channels (depthwise), then SiLU; the
linear mixers L2-normalise q and k and scale q by ``1/sqrt(d_k)``, and compute ``beta =
sigmoid(x W_beta)``. The convolution is what lets one layer bind a key to the value after it: at
the value's position, k holds the key's token as well. The delta rules run the function they are
given (``delta_rule``: the library's chunked form by default, the learner's in the lesson).

This is the Gated DeltaNet layer *in the manner of* Qwen3-Next's (short convolution and SiLU,
L2-normalised q and k, sigmoid beta), simpler in three ways: Qwen3-Next's decay is ``g =
-exp(A_log) * softplus(x W_a + dt_bias)`` (Mamba-2's parametrisation), its output goes through a
gated RMSNorm (``RMSNormGated``: RMSNorm, then times ``SiLU(x W_z)``) before ``W^O``, and its 16
query/key heads are shared by 32 value heads. None of that is here.

``train_recall(models, steps, ...)`` trains with AdamW on fresh batches (each model its own,
drawn from its seed; the number of pairs drawn anew at each step, the same for every model) and
returns the losses, ``(steps, models)``; ``recall_accuracy(models, num_pairs, ...)`` is each
model's share of queries answered right on the same held-out sequences; ``first_position_share``
the attention weight each attention model's queries give position 0 (lesson 12's measure of a
sink).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .delta import gated_delta_rule_chunked

__all__ = [
    "BOS",
    "MIXERS",
    "mqar_batch",
    "RecallModels",
    "train_recall",
    "recall_accuracy",
    "first_position_share",
]

BOS = 0
DECAY_BIAS = 5.0  # log alpha = logsigmoid(x W_alpha + 5): alpha near 0.99 before training
MIXERS = ("linear", "delta", "gated_delta", "attention")


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


def _heads(x, num_heads):
    """``(models, batch, n, h * d)`` -> ``(models, batch, h, n, d)``, laid out in that order (the
    products that follow then copy nothing)."""
    return x.unflatten(-1, (num_heads, -1)).transpose(-2, -3).contiguous()


def _project(x, weight):
    """Each model's rows times its own matrix: ``x`` ``(models, ..., d)``, ``weight`` ``(models,
    d, e)`` -> ``(models, ..., e)``, as one batched product over the models (broadcasting the
    weight over the batch would copy it once per text)."""
    return (x.flatten(1, -2) @ weight).unflatten(1, x.shape[1:-1])


def _merge(x):
    return x.transpose(-2, -3).flatten(-2)


def _short_conv(x, weight):
    """A causal depthwise convolution per model: ``x`` ``(models, batch, n, c)``, ``weight``
    ``(models, c, width)``; position t mixes positions t - width + 1 .. t (as ``F.conv1d`` with
    ``groups=c`` and ``width - 1`` zeros in front, written as ``width`` shifted products: on a
    CPU, for inputs this small, several times faster to train than the convolution's kernels)."""
    n, width = x.shape[-2], weight.shape[-1]
    padded = F.pad(x, (0, 0, width - 1, 0))
    taps = weight.unsqueeze(1).unsqueeze(1)  # (models, 1, 1, c, width)
    mixed = padded[..., :n, :] * taps[..., 0]
    for j in range(1, width):
        mixed = mixed + padded[..., j : j + n, :] * taps[..., j]
    return mixed


def _stacked(draws, shape, scale, has=None):
    """One ``shape`` slice per model, each drawn from that model's own generator; zeros (and no
    draw) for a model that lacks the parameter (``has``: one bool per model)."""
    has = [True] * len(draws) if has is None else has
    slices = [torch.randn(shape, generator=g) * scale if used else torch.zeros(shape)
              for g, used in zip(draws, has)]  # fmt: skip
    return nn.Parameter(torch.stack(slices))


def _per_model(name, value, count):
    """``value`` given once for every model, or as one per model: a list of ``count``."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * count
    if len(values) != count:
        raise ValueError(f"{name}: one for every model ({count}), got {len(values)}")
    return values


FAMILY = {"linear": "linear", "delta": "delta", "gated_delta": "delta", "attention": "attention"}


class RecallModels(nn.Module):
    """One one-layer MQAR model per seed, trained together: ``models(tokens)`` with tokens
    ``(models, batch, n)`` gives logits ``(models, batch, n, vocab_size)``. See the module
    docstring. ``mixer``, ``conv`` and ``gated`` may also be given per model (lists as long as
    ``seeds``; the mixers then of one kind: ``"delta"`` with ``"gated_delta"``, plain attention
    with gated): variants of one mixer trained side by side, each model as it would be alone (a
    parameter a model lacks is zero and gets no gradient). After a forward, ``weights`` holds an
    attention mixer's weights ``(models, batch, h, n, n)`` and ``gates`` its gates ``(models,
    batch, h, n, d_v)`` (None otherwise; ones for a model without a gate)."""

    def __init__(self, seeds, mixer, *, vocab_size, d_model=16, num_heads=2, conv=True,
                 gated=False, delta_rule=gated_delta_rule_chunked, chunk_size=64):  # fmt: skip
        super().__init__()
        self.seeds = list(seeds)
        mixers = _per_model("mixer", mixer, len(self.seeds))
        convs, gates = (
            _per_model(n, v, len(self.seeds)) for n, v in (("conv", conv), ("gated", gated))
        )
        for name in mixers:
            if name not in MIXERS:
                raise ValueError(f"mixer is one of {MIXERS}, got {name!r}")
        if len({FAMILY[name] for name in mixers}) > 1:
            raise ValueError(
                f"models trained together run one kind of mixer, got {sorted(set(mixers))}"
            )
        for name, has_gate in zip(mixers, gates):
            if has_gate and name != "attention":
                raise ValueError(
                    f"only the attention mixer has a gate, got gated=True for {name!r}"
                )
        self.mixer, self.kind, self.num_heads = mixer, FAMILY[mixers[0]], num_heads
        self.delta_rule, self.chunk_size = delta_rule, chunk_size
        draws = [torch.Generator().manual_seed(int(s)) for s in self.seeds]
        decays = [name == "gated_delta" for name in mixers]
        d = d_model
        self.embed = _stacked(draws, (vocab_size, d), 1.0)
        self.qkv = _stacked(draws, (d, 3 * d), d**-0.5)
        self.conv = _stacked(draws, (3 * d, 4), 0.25, convs) if any(convs) else None
        self.beta = _stacked(draws, (d, num_heads), d**-0.5) if self.kind == "delta" else None
        self.decay = _stacked(draws, (d, num_heads), d**-0.5, decays) if any(decays) else None
        self.gate = _stacked(draws, (d, d), d**-0.5, gates) if any(gates) else None
        self.out = _stacked(draws, (d, d), d**-0.5)
        self.readout = _stacked(draws, (d, vocab_size), d**-0.5)
        for name, flags in (
            ("conv_on", convs),
            ("decay_on", decays),
            ("gate_on", gates),
        ):  # (models, 1, 1, 1)
            self.register_buffer(name, torch.tensor(flags).reshape(-1, 1, 1, 1), persistent=False)
        self.weights = self.gates = None

    def _linear(self, x, q, k, v):
        q = F.normalize(q, dim=-1) * q.shape[-1] ** -0.5
        k = F.normalize(k, dim=-1)
        if self.kind == "linear":
            return (q @ k.transpose(-1, -2)).tril() @ v  # S_t = sum_{i<=t} k_i v_i^T, read by q_t
        beta = torch.sigmoid(_project(x, self.beta)).transpose(-1, -2)  # (models, batch, h, n)
        log_decay = torch.zeros_like(beta)
        if self.decay is not None:  # 0 (no decay) for a model without one
            logits = _project(x, self.decay) + DECAY_BIAS
            log_decay = F.logsigmoid(logits).transpose(-1, -2) * self.decay_on
        out, _ = self.delta_rule(q, k, v, beta, log_decay, self.chunk_size)
        return out

    def _attention(self, x, q, k, v):
        n = q.shape[-2]
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        self.weights = weights.detach()
        heads = weights @ v
        if self.gate is not None:
            gates = torch.sigmoid(_heads(_project(x, self.gate), self.num_heads))
            if not bool(self.gate_on.all()):  # ones for a model without a gate
                gates = torch.where(self.gate_on.unsqueeze(-1), gates, 1.0)
            self.gates = gates.detach()
            heads = heads * gates
        return heads

    def forward(self, tokens):
        which = torch.arange(len(self.seeds), device=tokens.device)[:, None, None]
        x = self.embed[which, tokens]  # each model's own embedding of its own tokens
        h = F.layer_norm(x, x.shape[-1:])
        qkv = _project(h, self.qkv)
        if self.conv is not None:
            mixed = _short_conv(qkv, self.conv)
            qkv = mixed if bool(self.conv_on.all()) else torch.where(self.conv_on, mixed, qkv)
        q, k, v = (_heads(t, self.num_heads) for t in F.silu(qkv).chunk(3, dim=-1))
        mixed = (self._attention if self.kind == "attention" else self._linear)(h, q, k, v)
        x = x + _project(_merge(mixed), self.out)
        return _project(F.layer_norm(x, x.shape[-1:]), self.readout)


def _batches(models, batch_size, num_pairs, num_keys, num_values, draws):
    """Each model's own batch, from its own generator: ``(models, batch, n)`` tokens, targets."""
    made = [mqar_batch(batch_size, num_pairs, num_keys, num_values, g) for g in draws]
    return torch.stack([t for t, _ in made]), torch.stack([y for _, y in made])


def train_recall(models, steps, *, pairs, num_keys, num_values, batch_size=32, lr=3e-2,
                 progress=None):  # fmt: skip
    """AdamW (weight decay 0.1) with a one-cycle learning rate; at each step ``num_pairs`` drawn
    from ``pairs`` (an int, or ``(low, high)`` inclusive; the same for every model) and each model
    a fresh batch from its own seed. The loss is on the queries only, summed over the models.
    ``progress`` wraps the range of steps (a progress bar). Returns the losses ``(steps,
    models)``."""
    device = models.embed.device
    low, high = (pairs, pairs) if isinstance(pairs, int) else pairs
    schedule_draw = torch.Generator().manual_seed(0)  # the pair counts: the same for every seed
    draws = [torch.Generator().manual_seed(10_000 + int(s)) for s in models.seeds]
    optimizer = torch.optim.AdamW(models.parameters(), lr=lr, weight_decay=0.1, fused=True)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=steps, pct_start=0.1)
    losses = []
    models.train()
    for _ in progress(range(steps)) if progress else range(steps):
        num_pairs = int(torch.randint(low, high + 1, (1,), generator=schedule_draw))
        tokens, targets = _batches(models, batch_size, num_pairs, num_keys, num_values, draws)
        logits = models(tokens.to(device))
        loss = F.cross_entropy(logits.permute(0, 3, 1, 2), targets.to(device), reduction="none")
        per_model = loss.sum(dim=(1, 2)) / (targets != -100).sum(dim=(1, 2)).to(device)
        optimizer.zero_grad()
        per_model.sum().backward()
        optimizer.step()
        schedule.step()
        losses.append(per_model.detach().cpu())
    models.eval()
    return torch.stack(losses)


@torch.no_grad()
def recall_accuracy(models, num_pairs, *, num_keys, num_values, batch_size=256, seed=1234):
    """Each model's share of queries whose value it ranks first, on ``batch_size`` sequences
    drawn with ``seed`` (the same held-out sequences for every model): ``(models,)``."""
    tokens, targets = mqar_batch(batch_size, num_pairs, num_keys, num_values,
                                 torch.Generator().manual_seed(seed))  # fmt: skip
    device = models.embed.device
    tokens = tokens.expand(len(models.seeds), *tokens.shape)
    predicted = models(tokens.to(device)).argmax(dim=-1).cpu()
    asked = targets != -100
    return (predicted[:, asked] == targets[asked]).float().mean(dim=-1)


@torch.no_grad()
def first_position_share(models, tokens, skip: int = 8) -> torch.Tensor:
    """An attention mixer's mean weight on position 0 (``BOS``) from queries ``skip .. n - 1``
    of ``tokens`` ``(batch, n)``: ``(models, heads)``."""
    if models.kind != "attention":
        raise ValueError(f"only an attention mixer has weights to read, got {models.mixer!r}")
    models(tokens.expand(len(models.seeds), *tokens.shape).to(models.embed.device))
    return models.weights[:, :, :, skip:, 0].mean(dim=(1, 3)).cpu()

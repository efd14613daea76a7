"""Lesson 15, What attention learns -- PyTorch only: a small attention-only Transformer, the
sequences of repeated segments it learns to copy, and its training loop.

The model is the decoder-only Transformer of lesson 10 with everything but attention taken out,
as Elhage et al. (2021) study it: token embeddings plus lesson 7's sinusoids, then layers of
lesson 4's multi-head self-attention under lesson 3's causal mask, each *added* to the residual
stream, and a linear unembedding. No LayerNorm, no feed-forward layer, no biases: the logits are
then exactly a sum of terms, one per head and one for the embeddings, which is what makes the
lesson's circuits exact.

What lives here:

``BOS``: the id at position 0 of every sequence (a start symbol the heads may rest on).
``repeated_segments(batch_size, n_ctx, vocab_size, min_len, max_len, generator)``: the training
    data, a random segment of random length repeated until the context is full.
``repeated_random_tokens(batch_size, seg_len, vocab_size, generator)``: BOS and a random segment
    twice, the sequences the heads are read on (Olsson et al., 2022).
``AttentionOnly(vocab_size, d_model, num_heads, num_layers, n_ctx, d_head, generator)``:
    ``model(tokens, edit_heads=None, return_weights=False)``; ``model.components(tokens)``, the
    residual stream as the sum of what each part writes; ``W_E``, ``W_pos``, ``W_Q``, ``W_K``,
    ``W_V``, ``W_O``, ``W_U`` in the layout TransformerLens uses.
``train_attention_only(model, steps, ...)``: Adam on the next-token loss of fresh batches; the
    loss of every step on the first segment and on the repeats.
``position_losses(model, tokens)``: the mean loss at each position, for the in-context score.
``with_heads(model, w_q, w_k, w_v, w_o)``: a model with the same embeddings and other heads.
``mystery_model(model, previous_token, induction, generator)``: the lesson's challenge: the heads
    of a trained model, a silent twin of its previous-token head and of one induction head added
    to each layer, every layer's heads shuffled; with the answer.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .masking import causal_mask
from .model import Adam
from .multihead import init_params, merge_heads, split_heads
from .positional import positional_encoding
from .retrieval import weighted_sum

__all__ = [
    "BOS",
    "repeated_segments",
    "repeated_random_tokens",
    "AttentionOnly",
    "train_attention_only",
    "position_losses",
    "with_heads",
    "mystery_model",
]

BOS = 0  # the start symbol; ordinary tokens are 1 .. vocab_size - 1


def _ordinary_tokens(shape, vocab_size: int, generator) -> torch.Tensor:
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2 (BOS and one token), got {vocab_size}")
    return torch.randint(1, vocab_size, shape, generator=generator)


def repeated_segments(
    batch_size: int,
    n_ctx: int = 41,
    vocab_size: int = 64,
    min_len: int = 6,
    max_len: int = 20,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens (batch_size, n_ctx), lengths (batch_size,))``: each row is BOS, then a segment of
    ``length`` random ordinary tokens (``length`` drawn per row from ``min_len .. max_len``),
    repeated until the row is full. Token ``t >= 1 + length`` repeats token ``t - length``: a model
    that finds where the current token occurred before can predict every token after the first
    segment; no position alone can, since the length varies."""
    if not 1 <= min_len <= max_len or n_ctx < 2:
        raise ValueError(
            f"need 1 <= min_len <= max_len and n_ctx >= 2, got min_len={min_len}, "
            f"max_len={max_len}, n_ctx={n_ctx}"
        )
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    segments = _ordinary_tokens((batch_size, max_len), vocab_size, generator)
    positions = torch.arange(n_ctx - 1)[None, :] % lengths[:, None]
    tokens = torch.cat([torch.full((batch_size, 1), BOS), segments.gather(1, positions)], dim=1)
    return tokens, lengths


def repeated_random_tokens(
    batch_size: int, seg_len: int, vocab_size: int = 64, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``(batch_size, 1 + 2 * seg_len)``: BOS, a segment of ``seg_len`` random ordinary tokens,
    the same segment again."""
    segment = _ordinary_tokens((batch_size, seg_len), vocab_size, generator)
    return torch.cat([torch.full((batch_size, 1), BOS), segment, segment], dim=1)


class AttentionOnly(nn.Module):
    """Token embeddings and lesson 7's sinusoids, ``num_layers`` layers of causal multi-head
    self-attention added to the residual stream, an unembedding; no LayerNorm, no FFN, no biases.

    Each layer's weights are lesson 4's parameter dict (``w_q``, ``w_k``, ``w_v`` of shape
    ``(d_model, num_heads * d_head)``, ``w_o`` of ``(num_heads * d_head, d_model)``), so a layer's
    output is ``multi_head_attention(x, x, x, model.layers[l], num_heads, causal_mask(n))``.
    """

    def __init__(
        self,
        vocab_size: int = 64,
        d_model: int = 64,
        num_heads: int = 2,
        num_layers: int = 2,
        n_ctx: int = 41,
        d_head: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        d_head = d_model // num_heads if d_head is None else d_head
        self.vocab_size, self.d_model, self.num_heads = vocab_size, d_model, num_heads
        self.num_layers, self.n_ctx, self.d_head = num_layers, n_ctx, d_head
        gauss = lambda *shape: torch.randn(*shape, generator=generator) / math.sqrt(d_model)  # noqa: E731
        self.embed = nn.Parameter(gauss(vocab_size, d_model))
        self.register_buffer("positions", positional_encoding(n_ctx, d_model))
        self.layers = nn.ModuleList(
            nn.ParameterDict(
                {
                    name: nn.Parameter(w)
                    for name, w in init_params(
                        d_model, num_heads, generator, d_k=d_head, d_v=d_head, bias=False
                    ).items()
                }
            )
            for _ in range(num_layers)
        )
        self.unembed = nn.Parameter(gauss(d_model, vocab_size))
        # lesson 3's causal mask as a term added to the scores: 0 where key j <= query i, -inf
        # above the diagonal. Not saved with the weights (persistent=False): the model makes it.
        addend = torch.zeros(n_ctx, n_ctx).masked_fill(~causal_mask(n_ctx), -torch.inf)
        self.register_buffer("mask_addend", addend, persistent=False)

    # The weights in TransformerLens's layout: W_Q, W_K, W_V (layers, heads, d_model, d_head),
    # W_O (layers, heads, d_head, d_model). Views of the parameters: gradients flow through them.
    def _per_head(self, name: str) -> torch.Tensor:
        h, d, dh = self.num_heads, self.d_model, self.d_head
        if name == "w_o":
            return torch.stack([layer["w_o"].reshape(h, dh, d) for layer in self.layers])
        return torch.stack([layer[name].reshape(d, h, dh).transpose(0, 1) for layer in self.layers])

    W_Q = property(lambda self: self._per_head("w_q"))
    W_K = property(lambda self: self._per_head("w_k"))
    W_V = property(lambda self: self._per_head("w_v"))
    W_O = property(lambda self: self._per_head("w_o"))
    W_E = property(lambda self: self.embed)
    W_pos = property(lambda self: self.positions)
    W_U = property(lambda self: self.unembed)

    def _check_tokens(self, tokens: torch.Tensor) -> None:
        if tokens.dtype not in (torch.int64, torch.int32) or tokens.ndim < 1:
            raise ValueError(f"tokens must be integer ids of shape (..., n), got {tokens.dtype}")
        if tokens.shape[-1] > self.n_ctx:
            raise ValueError(
                f"{tokens.shape[-1]} positions, but the model has n_ctx = {self.n_ctx}"
            )

    def _attend(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each head's ``(z (..., h, n, d_head), weights (..., h, n, n))`` in ``layer``: lesson 2's
        softmax(Q K^T / sqrt(d_head)) V under lesson 3's causal mask, in fewer steps than
        ``attention_weights`` takes (most of training's time is spent here): the mask is added to
        the scores rather than filled in, and the softmax is torch's own, since a causal mask
        leaves every query its own key and no row is -inf throughout (lesson 2's care for such
        rows has nothing to do)."""
        params, n = self.layers[layer], x.shape[-2]
        if n > self.n_ctx:
            raise ValueError(f"{n} positions, but the model has n_ctx = {self.n_ctx}")
        q, k, v = (split_heads(x @ params[f"w_{c}"], self.num_heads) for c in "qkv")
        q = q * (1.0 / math.sqrt(self.d_head))  # as lesson 2 scales: the queries, not the scores
        weights = torch.softmax(q @ k.transpose(-1, -2) + self.mask_addend[:n, :n], dim=-1)
        return weighted_sum(weights, v), weights

    def head_outputs(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """What each head of ``layer`` writes to the residual stream ``x`` ``(..., n, d_model)``:
        ``(outputs (..., h, n, d_model), weights (..., h, n, n))``; their sum over the heads is
        lesson 4's multi-head attention of ``x``."""
        z, weights = self._attend(x, layer)
        w_o = self.layers[layer]["w_o"].reshape(self.num_heads, self.d_head, self.d_model)
        return z @ w_o, weights

    def _layer_output(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The sum of what the heads of ``layer`` write, ``(..., n, d_model)``, and their weights:
        lesson 4's Concat(head_1, ..., head_h) W_O, one product where ``head_outputs`` takes h
        products and a sum (the same numbers, to rounding; the forward pass's way when no head
        is edited)."""
        z, weights = self._attend(x, layer)
        return merge_heads(z) @ self.layers[layer]["w_o"], weights

    def forward(self, tokens: torch.Tensor, edit_heads=None, return_weights: bool = False):
        """Logits ``(..., n, vocab)`` of the token ids ``(..., n)``.

        ``edit_heads(layer, outputs)``, if given, is called in every layer with what each head
        writes, ``(..., h, n, d_model)``, and returns what the heads write instead (an ablation);
        later layers read the edited residual stream. ``return_weights=True`` also returns each
        layer's attention weights ``(..., h, n, n)``, as a list."""
        self._check_tokens(tokens)
        x = self.embed[tokens] + self.positions[: tokens.shape[-1]]
        weights = []
        for layer in range(self.num_layers):
            if edit_heads is None:
                written, w = self._layer_output(x, layer)
            else:
                outputs, w = self.head_outputs(x, layer)
                written = edit_heads(layer, outputs).sum(dim=-3)
            x = x + written
            weights.append(w)
        logits = x @ self.unembed
        return (logits, weights) if return_weights else logits

    def components(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
        """The residual stream before the unembedding as the sum of what each part wrote:
        ``(parts (..., 2 + layers * heads, n, d_model), labels)``, the token embeddings
        (``"embed"``), the positions (``"pos"``), then each head (``"L0H0"``, ``"L0H1"``, ...)."""
        self._check_tokens(tokens)
        n = tokens.shape[-1]
        embed, pos = self.embed[tokens], self.positions[:n].expand(*tokens.shape, self.d_model)
        parts, x = [embed[..., None, :, :], pos[..., None, :, :]], embed + pos
        for layer in range(self.num_layers):
            outputs, _ = self.head_outputs(x, layer)
            parts.append(outputs)
            x = x + outputs.sum(dim=-3)
        labels = ["embed", "pos"] + [
            f"L{layer}H{head}" for layer in range(self.num_layers) for head in range(self.num_heads)
        ]
        return torch.cat(parts, dim=-3), labels


def position_losses(model: AttentionOnly, tokens: torch.Tensor) -> torch.Tensor:
    """``(n - 1,)``: the next-token loss at each position (position i predicts token i + 1),
    averaged over the batch of ``tokens`` ``(batch, n)``."""
    with torch.no_grad():
        log_probs = torch.log_softmax(model(tokens)[..., :-1, :], dim=-1)
    return -log_probs.gather(-1, tokens[..., 1:, None])[..., 0].mean(dim=0)


def train_attention_only(
    model: AttentionOnly,
    steps: int = 400,
    batch_size: int = 32,
    lr: float = 1e-2,
    min_len: int = 6,
    max_len: int = 20,
    generator: torch.Generator | None = None,
    progress=None,
) -> dict[str, list[float]]:
    """Train ``model`` on ``steps`` fresh batches of ``repeated_segments`` with Adam (lesson 8's, at
    a constant learning rate ``lr``) on the mean next-token loss; returns the loss of every step
    (``"loss"``) and its two parts: the tokens of each row's first segment, which no model can
    predict (``"first"``), and the tokens after it, which repeat earlier ones (``"repeated"``).
    Batches are drawn on the CPU with ``generator``; ``progress`` wraps the step range (tqdm)."""
    device = model.embed.device
    optimizer = Adam(model.parameters())
    record = {"loss": [], "first": [], "repeated": []}
    steps_iter = range(steps) if progress is None else progress(range(steps))
    for _ in steps_iter:
        tokens, lengths = repeated_segments(
            batch_size, model.n_ctx, model.vocab_size, min_len, max_len, generator
        )
        tokens, lengths = tokens.to(device), lengths.to(device)
        # the last token predicts nothing here: leave it out (causal, so nothing else changes)
        log_probs = torch.log_softmax(model(tokens[:, :-1]), dim=-1)
        losses = -log_probs.gather(-1, tokens[:, 1:, None])[..., 0]  # (batch, n - 1)
        repeats = torch.arange(1, model.n_ctx, device=device)[None, :] > lengths[:, None]
        loss = losses.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step(lr)
        with torch.no_grad():
            record["loss"].append(loss.item())
            record["first"].append(losses[~repeats].mean().item())
            record["repeated"].append(losses[repeats].mean().item())
        if hasattr(steps_iter, "set_postfix"):
            steps_iter.set_postfix(repeated=f"{record['repeated'][-1]:.2f}", refresh=False)
    model.eval()
    return record


def with_heads(model: AttentionOnly, w_q, w_k, w_v, w_o) -> AttentionOnly:
    """A copy of ``model`` (its embeddings, positions and unembedding) whose heads are the given
    per-head weights: ``w_q``, ``w_k``, ``w_v`` ``(layers, heads, d_model, d_head)``, ``w_o``
    ``(layers, heads, d_head, d_model)``, in TransformerLens's layout (``model.W_Q`` ...)."""
    layers, heads, d_model, d_head = w_q.shape
    new = AttentionOnly(model.vocab_size, d_model, heads, layers, model.n_ctx, d_head)
    new = new.to(device=model.W_E.device, dtype=model.W_E.dtype)
    with torch.no_grad():
        new.embed.copy_(model.embed)
        new.unembed.copy_(model.unembed)
        for layer, params in enumerate(new.layers):
            for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
                params[name].copy_(w[layer].transpose(0, 1).reshape(d_model, heads * d_head))
            params["w_o"].copy_(w_o[layer].reshape(heads * d_head, d_model))
    return new.eval()


def mystery_model(
    model: AttentionOnly,
    previous_token: int,
    induction: list[int],
    generator: torch.Generator | None = None,
    quiet: float = 0.01,
) -> tuple[AttentionOnly, dict]:
    """The challenge's model, from a trained two-layer ``model``: to each layer one head more,
    a silent twin of head ``previous_token`` (layer 0) and of head ``induction[0]`` (layer 1): the
    same queries, keys and values, so the same attention pattern, but an output ``w_o`` scaled by
    ``quiet``, so that it changes next to nothing. Each layer's heads are then shuffled (by
    ``generator``). Returns ``(mystery, answer)``, the answer in the lesson's form:
    ``{"previous_token": its head in the mystery's layer 0, "induction": where the model's
    induction heads ``induction`` went in layer 1 (sorted)}``."""
    if model.num_layers != 2:
        raise ValueError(f"a two-layer model is needed, got {model.num_layers} layers")
    twins = (previous_token, induction[0])
    orders = [torch.randperm(model.num_heads + 1, generator=generator) for _ in range(2)]
    weights = []
    for w, scale in ((model.W_Q, 1.0), (model.W_K, 1.0), (model.W_V, 1.0), (model.W_O, quiet)):
        rows = [torch.cat([w[layer], scale * w[layer, twins[layer]][None]]) for layer in range(2)]
        weights.append(torch.stack([row[order] for row, order in zip(rows, orders)]))
    position = [order.argsort() for order in orders]  # where each original head went
    answer = {
        "previous_token": int(position[0][previous_token]),
        "induction": sorted(int(position[1][h]) for h in induction),
    }
    return with_heads(model, *weights), answer

"""Lesson 10, Encoder-only and decoder-only Transformers (PyTorch only): a character-level model of
either family, trained on a text that ships with Python, and a generator with a KV cache.

The two families share their layer, lesson 8's encoder layer (self-attention, then the FFN, each
in Add & Norm); only the self-attention's mask and the training objective differ:

* encoder-only (``TransformerLM(..., causal=False)``, BERT's shape): every position attends to
  every other, both sides; trained to restore masked tokens (``masked_lm_loss``);
* decoder-only (``causal=True``, the GPT family's shape): lesson 3's causal mask, so position i
  reads tokens 0 .. i; trained to predict token i + 1 (``next_token_loss``). Its layer is the
  paper's decoder layer without the encoder-decoder attention, since there is no encoder.

What lives here:

``zen_of_python()``: the text of Python's ``this`` module (nothing downloaded).
``CharTokenizer(text)``: one id per character, after ``PAD`` = 0 and ``MASK`` = 1.
``TransformerLM(vocab_size, d_model, num_heads, d_ff, num_layers, causal)``: ``model(tokens)`` ->
    logits ``(batch, n, vocab)``; ``model.step(tokens, caches, position)`` runs a causal model on
    the newest tokens only, with one KV cache per layer (lesson 9's ``cached_self_attention``).
``lm_batch``, ``train_lm``: random windows of the text; Adam with warm-up, the objective chosen by
    the model's family; returns the loss of every step.
``generate(model, prompt, max_new, temperature, top_k, rng, stop, use_cache)``: sampling
    (temperature 0: greedy), with or without the KV cache; the same tokens either way.
"""

from __future__ import annotations

import contextlib
import io
import math

import torch
from torch import nn

from .decoding import cached_self_attention
from .feedforward import position_wise_ffn
from .generation import next_token_distribution
from .masking import causal_mask
from .model import Adam, _as_parameters, learning_rate
from .positional import positional_encoding
from .pretraining import mask_tokens, masked_lm_loss, next_token_loss
from .transformer import add_and_norm, encoder_layer, init_encoder_layer_params

__all__ = [
    "PAD",
    "MASK",
    "NUM_SPECIAL",
    "zen_of_python",
    "CharTokenizer",
    "TransformerLM",
    "lm_batch",
    "train_lm",
    "generate",
]

PAD, MASK = 0, 1  # the special ids; characters come after them
NUM_SPECIAL = 2


def zen_of_python() -> str:
    """The Zen of Python (Tim Peters), from the standard library's ``this`` module: a title, an
    empty line and 19 aphorisms, 857 characters with the final newline added here. (Importing
    ``this`` prints it; the print is swallowed here.)"""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return "".join(this.d.get(c, c) for c in this.s) + "\n"


class CharTokenizer:
    """Characters to ids and back: ``PAD`` = 0, ``MASK`` = 1, then the text's characters, sorted."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.ids = {c: i + NUM_SPECIAL for i, c in enumerate(self.chars)}
        self.vocab_size = NUM_SPECIAL + len(self.chars)

    def encode(self, text: str, device=None) -> torch.Tensor:
        """A 1-D ``long`` tensor of ids; a character the text did not have is a KeyError."""
        unknown = sorted(set(text) - set(self.ids))
        if unknown:
            raise KeyError(f"characters not in the vocabulary: {unknown}")
        return torch.tensor([self.ids[c] for c in text], dtype=torch.long, device=device)

    def decode(self, ids, mask_symbol: str = "_") -> str:
        """The text of a row of ids; ``MASK`` shown as ``mask_symbol``, ``PAD`` dropped."""
        out = []
        for i in (int(i) for i in ids):
            if i >= NUM_SPECIAL:
                out.append(self.chars[i - NUM_SPECIAL])
            elif i == MASK:
                out.append(mask_symbol)
        return "".join(out)


class TransformerLM(nn.Module):
    """A stack of lesson 8's encoder layers over embeddings and sinusoidal positions, and a linear
    layer to the vocabulary: encoder-only (``causal=False``) or decoder-only (``causal=True``).
    Post-norm, ReLU, no dropout, like the rest of the course's models."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 48,
        num_heads: int = 4,
        d_ff: int = 192,
        num_layers: int = 2,
        causal: bool = True,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.vocab_size, self.d_model, self.num_heads = vocab_size, d_model, num_heads
        self.causal, self.pad, self.mask_id = causal, PAD, MASK
        self.embed_tokens = nn.Embedding(vocab_size, d_model)
        with torch.no_grad():  # the paper's scale: ~ 1/sqrt(d_model), times sqrt(d_model) below
            w = self.embed_tokens.weight
            w.copy_(torch.randn(w.shape, generator=generator) / math.sqrt(d_model))
        self.layers = nn.ModuleList(
            _as_parameters(init_encoder_layer_params(d_model, num_heads, d_ff, generator))
            for _ in range(num_layers)
        )
        self.out = nn.Linear(d_model, vocab_size)
        with torch.no_grad():
            bound = 1 / math.sqrt(d_model)
            self.out.weight.copy_(torch.rand(self.out.weight.shape, generator=generator) * 2 - 1)
            self.out.weight.mul_(bound)
            self.out.bias.zero_()

    def embed(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``sqrt(d_model) * E[tokens] + PE`` of positions ``offset, offset + 1, ...``."""
        x = self.embed_tokens(tokens) * math.sqrt(self.d_model)
        n = tokens.shape[-1]
        pe = positional_encoding(offset + n, self.d_model, device=x.device, dtype=x.dtype)
        return x + pe[offset:]

    def attention_mask(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(batch, n, n)``, True = may attend: the keys that are not padding, and for a
        decoder-only model only those up to the query (lesson 3's causal mask)."""
        mask = (tokens != self.pad)[..., None, :]
        if self.causal:
            mask = mask & causal_mask(tokens.shape[-1], device=tokens.device)
        return mask

    def forward(self, tokens: torch.Tensor, return_weights: bool = False):
        """Logits ``(batch, n, vocab)`` for the token ids ``(batch, n)``; with
        ``return_weights=True`` also each layer's self-attention weights ``(batch, h, n, n)``."""
        y, mask, weights = self.embed(tokens), self.attention_mask(tokens), []
        for layer in self.layers:
            y, w = encoder_layer(y, layer, self.num_heads, mask, return_weights=True)
            weights.append(w["self_attn"])
        return (self.out(y), weights) if return_weights else self.out(y)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, caches: list, position: int) -> torch.Tensor:
        """A decoder-only model on the newest tokens ``(batch, n_new)`` at positions ``position
        ..``: their logits ``(batch, n_new, vocab)``, every layer's keys and values appended to
        its cache (one dict per layer, empty at the start) instead of recomputed."""
        if not self.causal:
            raise ValueError("only a decoder-only (causal) model can decode with a KV cache")
        y = self.embed(tokens, offset=position)
        for layer, cache in zip(self.layers, caches):
            y = add_and_norm(
                y,
                lambda y: cached_self_attention(y, layer["self_attn"], self.num_heads, cache),
                layer["norm_1"],
            )
            y = add_and_norm(y, lambda y: position_wise_ffn(y, layer["ffn"]), layer["norm_2"])
        return self.out(y)


def lm_batch(data: torch.Tensor, batch_size: int, context: int, rng=None, device=None):
    """``(batch_size, context)`` windows of the 1-D token tensor ``data``, at random starts."""
    if data.ndim != 1 or len(data) < context:
        raise ValueError(f"data must be a 1-D tensor of at least {context} tokens")
    starts = torch.randint(0, len(data) - context + 1, (batch_size,), generator=rng)
    return torch.stack([data[s : s + context] for s in starts.tolist()]).to(device)


def train_lm(
    model: TransformerLM,
    data: torch.Tensor,
    steps: int,
    batch_size: int = 16,
    context: int = 32,
    lr: float = 1e-2,
    warmup: int = 20,
    loss_fn=None,
    rng: torch.Generator | None = None,
    progress=None,
) -> list[float]:
    """Train on ``steps`` batches of random windows of ``data``; returns every step's loss.

    A decoder-only model learns the next token: ``loss_fn(model(x), x)`` (default
    ``next_token_loss``). An encoder-only model restores masked tokens: the inputs are masked by
    BERT's rule (``mask_tokens``) and ``loss_fn(model(inputs), x, selected)`` (default
    ``masked_lm_loss``). ``progress`` wraps the step range (e.g. ``tqdm``).
    """
    if loss_fn is None:
        loss_fn = next_token_loss if model.causal else masked_lm_loss
    device = next(model.parameters()).device
    optimizer = Adam(model.parameters())
    steps_iter = range(steps) if progress is None else progress(range(steps))
    losses = []
    model.train()
    for step in steps_iter:
        x = lm_batch(data, batch_size, context, rng, device)
        if model.causal:
            loss = loss_fn(model(x), x)
        else:
            inputs, selected = mask_tokens(x, rng, model.vocab_size, model.mask_id, NUM_SPECIAL)
            loss = loss_fn(model(inputs), x, selected)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step(learning_rate(step, lr, warmup))
        losses.append(loss.item())
        if hasattr(steps_iter, "set_postfix"):
            steps_iter.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    model.eval()
    return losses


@torch.no_grad()
def generate(
    model: TransformerLM,
    prompt: torch.Tensor,
    max_new: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    rng: torch.Generator | None = None,
    stop: int | None = None,
    use_cache: bool = True,
    distribution=None,
) -> torch.Tensor:
    """Continue ``prompt`` ``(batch, t)`` by up to ``max_new`` tokens: ``(batch, n_new)``.

    Each step draws the next token from ``distribution(logits, temperature, top_k)`` (default
    ``next_token_distribution``) with ``torch.multinomial`` (``rng`` on the model's device);
    ``temperature=0`` takes the argmax (greedy). A row that has produced ``stop`` gets ``PAD``
    after it; generation ends when every row has. ``use_cache=True`` feeds the prompt once and
    then one token per step through ``model.step`` (KV caches); ``False`` feeds the whole text so
    far at every step. Both give the same tokens.
    """
    distribution = next_token_distribution if distribution is None else distribution
    caches = [{} for _ in model.layers]
    text, feed, out = prompt, prompt, []
    finished = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    for _ in range(max_new):
        if use_cache:
            logits = model.step(feed, caches, text.shape[1] - feed.shape[1])[:, -1]
        else:
            logits = model(text)[:, -1]
        if temperature == 0:
            token = logits.argmax(-1)
        else:
            probs = distribution(logits, temperature, top_k).float()
            token = torch.multinomial(probs, 1, generator=rng)[:, 0]
        token = token.masked_fill(finished, model.pad)
        out.append(token)
        feed = token[:, None]
        text = torch.cat([text, feed], dim=1)
        if stop is not None:
            finished |= token == stop
            if finished.all():
                break
    return torch.stack(out, dim=1) if out else prompt[:, :0]

"""Lesson 8, a small trainable Transformer (PyTorch only), greedy decoding and a synthetic task.

The model is the paper's encoder-decoder, built from the reference functions of lessons 3-8:

    memory = encoder(PE(sqrt(d_model) * E_src[src]))                      (encode, once)
    logits = decoder(PE(sqrt(d_model) * E_tgt[tgt]), memory) @ W_out + b_out   (decode)

Its layers' parameters are ``nn.ParameterDict``s inside ``nn.ModuleDict``s, in the nested layout
of ``attention_ref.pt.transformer`` (``model.decoder_layers[i]["cross_attn"]["w_q"]``, ...), so the
reference functions run on them directly and autograd trains them. Residual dropout (section
5.4) is off by default (on fresh random batches the toy task cannot overfit, and without it
training is deterministic given the seed): ``dropout=0.1`` turns it on, in training mode only.
Lesson 8's ablations switch parts off: ``positional=False`` (no positional encoding),
``residual=False`` (``LayerNorm(Sublayer(x))``), ``scale=1.0`` (unscaled dot products).

What lives here, for the lessons after 8 (a KV cache re-uses the decoder step by step):

``Transformer(src_vocab, tgt_vocab, d_model, num_heads, d_ff, num_encoder_layers,
num_decoder_layers, pad, generator, *, dropout, positional, residual, scale, dropout_fn)``
    ``.encode(src, src_mask)`` -> memory; ``.decode(tgt, memory, memory_mask)`` -> logits
    (teacher forcing, causal mask inside); ``.embed_tgt(tgt, offset)`` embeds target tokens at
    positions ``offset, offset + 1, ...``; ``.source_mask(src)`` is the padding mask of ``src``;
    ``.encoder_layers`` / ``.decoder_layers`` hold the layer parameters; ``.out`` is the final
    linear.
``greedy_decode(model, src, max_len, bos, eos)``: encode once, then one token at a time, each
    output fed back as the next input, until every sequence has produced ``eos``.
``make_batch(task, batch_size, ...)``: copy / reverse / sort / swap_halves digit sequences
    (nothing downloaded).
``train(model, steps, ...)``: Adam with warm-up on fresh batches; returns the loss of every step
    (``Adam`` is written out here: creating a ``torch.optim`` optimizer imports ``torch._dynamo``);
    label smoothing and Eq. (3)'s schedule are in ``attention_ref.pt.training``.
``exact_match(predicted, target, pad)``: the fraction of sequences predicted exactly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .positional import positional_encoding
from .training import label_smoothed_cross_entropy, lrate
from .transformer import decoder, encoder, init_decoder_layer_params, init_encoder_layer_params

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "FIRST_DIGIT",
    "VOCAB_SIZE",
    "TASKS",
    "Transformer",
    "greedy_decode",
    "make_batch",
    "Adam",
    "learning_rate",
    "lrate",
    "label_smoothed_cross_entropy",
    "train",
    "exact_match",
    "tokens_to_digits",
]

# The synthetic tasks' vocabulary: three special symbols, then the digits 0-9.
PAD, BOS, EOS = 0, 1, 2
FIRST_DIGIT = 3  # digit d is token FIRST_DIGIT + d
VOCAB_SIZE = FIRST_DIGIT + 10
# swap_halves: the second half, then the first (s[n // 2:] + s[:n // 2], 123456 -> 456123): a fixed
# alignment that is not monotone, unlike copy's (the diagonal) and reverse's (the anti-diagonal).
TASKS = ("copy", "reverse", "sort", "swap_halves")


def _as_parameters(params: dict) -> nn.ModuleDict:
    """A nested dict of tensors as trainable parameters, with the same keys."""
    return nn.ModuleDict(
        {
            name: nn.ParameterDict({k: nn.Parameter(v) for k, v in part.items()})
            for name, part in params.items()
        }
    )


class Transformer(nn.Module):
    """An encoder-decoder Transformer (post-norm, ReLU FFN, sinusoidal positions).

    ``dropout`` is the residual dropout P_drop of section 5.4, applied in training mode (and only
    there: ``model.eval()`` switches it off) to every sub-layer's output before Add & Norm and to
    the sums of embeddings and positional encodings, by ``dropout_fn(t, p, training)``
    (``F.dropout`` unless given, e.g. a learner's own). ``positional``, ``residual`` and ``scale``
    (``attention_weights``'s) are for ablations; the defaults are the paper's model.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 32,
        num_heads: int = 4,
        d_ff: int = 64,
        num_encoder_layers: int = 1,
        num_decoder_layers: int = 1,
        pad: int = PAD,
        generator: torch.Generator | None = None,
        *,
        dropout: float = 0.0,
        positional: bool = True,
        residual: bool = True,
        scale: float | None = None,
        dropout_fn=None,
    ):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.d_model, self.num_heads, self.pad = d_model, num_heads, pad
        self.dropout, self.positional, self.residual, self.scale = (
            dropout,
            positional,
            residual,
            scale,
        )
        self.dropout_fn = F.dropout if dropout_fn is None else dropout_fn
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        # the paper's scale: embeddings ~ 1/sqrt(d_model), times sqrt(d_model) below
        with torch.no_grad():
            for table in (self.src_embed.weight, self.tgt_embed.weight):
                table.copy_(torch.randn(table.shape, generator=generator) / math.sqrt(d_model))
        self.encoder_layers = nn.ModuleList(
            _as_parameters(init_encoder_layer_params(d_model, num_heads, d_ff, generator))
            for _ in range(num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            _as_parameters(init_decoder_layer_params(d_model, num_heads, d_ff, generator))
            for _ in range(num_decoder_layers)
        )
        self.out = nn.Linear(d_model, tgt_vocab)
        with torch.no_grad():
            bound = 1 / math.sqrt(d_model)
            self.out.weight.copy_(
                torch.rand(self.out.weight.shape, generator=generator) * 2 * bound - bound
            )
            self.out.bias.zero_()

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        """``(batch, 1, n_src)``: True for the real source tokens, False for padding (True = may
        attend)."""
        return (src != self.pad).unsqueeze(-2)

    def _drop(self, t: torch.Tensor) -> torch.Tensor:
        """Residual dropout: called in evaluation too, where ``training=False`` returns ``t``."""
        return self.dropout_fn(t, self.dropout, self.training)

    def layer_options(self) -> dict:
        """The options every encoder and decoder layer runs with: dropout, residual, scale."""
        drop = self._drop if self.dropout > 0 else None
        return {"dropout": drop, "residual": self.residual, "scale": self.scale}

    def _embed(self, table: nn.Embedding, tokens: torch.Tensor, offset: int) -> torch.Tensor:
        x = table(tokens) * math.sqrt(self.d_model)
        if self.positional:
            pe = positional_encoding(
                offset + tokens.shape[-1], self.d_model, device=x.device, dtype=x.dtype
            )
            x = x + pe[offset:]
        return self._drop(x) if self.dropout > 0 else x

    def embed_src(self, src: torch.Tensor) -> torch.Tensor:
        """``sqrt(d_model) * E_src[src] + PE`` (then dropout): ``(batch, n_src)`` -> ``(batch,
        n_src, d_model)``."""
        return self._embed(self.src_embed, src, 0)

    def embed_tgt(self, tgt: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``sqrt(d_model) * E_tgt[tgt] + PE`` of positions ``offset .. offset + n_tgt - 1``
        (``offset`` > 0 embeds the next tokens of a sequence decoded step by step)."""
        return self._embed(self.tgt_embed, tgt, offset)

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | None = None, return_weights: bool = False
    ):
        """The encoder stack on the source tokens ``(batch, n_src)``: memory ``(batch, n_src,
        d_model)``.

        ``src_mask`` (True = may attend, e.g. ``self.source_mask(src)``) hides padding keys.
        With ``return_weights=True``: ``(memory, [{"self_attn": (batch, h, n_src, n_src)}, ...])``.
        """
        return encoder(
            self.embed_src(src),
            self.encoder_layers,
            self.num_heads,
            src_mask,
            return_weights,
            **self.layer_options(),
        )

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        return_weights: bool = False,
    ):
        """Logits ``(batch, n_tgt, tgt_vocab)`` for the next token after each prefix of ``tgt``.

        Teacher forcing: all target positions at once, the causal mask inside the decoder's
        self-attention keeping each position from seeing the ones after it. ``memory_mask``
        hides the source's padding. With ``return_weights=True``: ``(logits, [{"self_attn": ...,
        "cross_attn": (batch, h, n_tgt, n_src)}, ...])``.
        """
        out = decoder(
            self.embed_tgt(tgt),
            memory,
            self.decoder_layers,
            self.num_heads,
            None,
            memory_mask,
            return_weights,
            **self.layer_options(),
        )
        if return_weights:
            return self.out(out[0]), out[1]
        return self.out(out)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits; the source's padding mask is built from ``self.pad``."""
        mask = self.source_mask(src)
        return self.decode(tgt, self.encode(src, mask), mask)


@torch.no_grad()
def greedy_decode(
    model: Transformer, src: torch.Tensor, max_len: int, bos: int, eos: int
) -> torch.Tensor:
    """Greedy decoding, as the paper's model runs at inference.

    The encoder runs once. Then, step by step, the decoder reads everything produced so far
    (starting from ``bos``), the most likely next token is appended and fed back as input at the
    next step, until every sequence of the batch has produced ``eos`` or ``max_len`` tokens were
    produced. Returns ``(batch, n_steps)`` tokens without ``bos``: each row ends with ``eos``
    (if it got there), followed by ``model.pad`` once that sequence has finished.
    """
    src_mask = model.source_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        # (batch, step, vocab); only the last row is new
        logits = model.decode(ys, memory, src_mask)
        next_token = logits[:, -1].argmax(-1)
        next_token = next_token.masked_fill(finished, model.pad)  # finished sequences only pad
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= next_token == eos
        if finished.all():
            break
    return ys[:, 1:]


def make_batch(
    task: str,
    batch_size: int,
    min_len: int = 6,
    max_len: int = 6,
    generator: torch.Generator | None = None,
    device=None,
):
    """A batch of the synthetic task: random digit strings and their copy, reversal, sorted form,
    or ``swap_halves`` (the second half, then the first: 381924 -> 924381; of an odd length n,
    the last n - n // 2 digits come first: 38192 -> 19238).

    Returns ``(src, tgt_in, tgt_out)`` of token ids (``long``):

    * ``src`` ``(batch, max_len)``: the digits (lengths uniform in ``min_len .. max_len``), then
      PAD;
    * ``tgt_out`` ``(batch, max_len + 1)``: the answer, then EOS, then PAD (what is predicted);
    * ``tgt_in`` ``(batch, max_len + 1)``: BOS followed by ``tgt_out`` without its last column: the
      decoder's input under teacher forcing, shifted one step right.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    digits = torch.randint(0, 10, (batch_size, max_len), generator=generator)
    real = torch.arange(max_len)[None, :] < lengths[:, None]
    src = torch.where(real, digits + FIRST_DIGIT, PAD)
    answer = torch.where(real, src.gather(1, _alignment(task, src, lengths)), PAD)
    tgt_out = torch.cat([answer, torch.full((batch_size, 1), PAD)], dim=1)
    tgt_out[torch.arange(batch_size), lengths] = EOS
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), tgt_out[:, :-1]], dim=1)
    tgt_in = tgt_in.masked_fill(tgt_in == EOS, PAD)  # EOS is never an input
    return src.to(device), tgt_in.to(device), tgt_out.to(device)


def _alignment(task: str, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``(batch, max_len)``: the source position that each answer position copies (any valid
    position beyond a sequence's length)."""
    position = torch.arange(src.shape[1]).expand_as(src)
    n = lengths[:, None]
    if task == "copy":
        return position
    if task == "reverse":
        return (n - 1 - position).clamp(min=0)
    if task == "swap_halves":
        first = n // 2  # the length of the first half, which moves to the end
        order = torch.where(position < n - first, position + first, position - (n - first))
        return order.clamp(max=src.shape[1] - 1)
    return torch.where(src == PAD, VOCAB_SIZE, src).argsort(dim=1, stable=True)  # sort


class Adam:
    """Adam (Kingma and Ba, 2015), the update of ``torch.optim.Adam`` without weight decay, written
    out.

    Written here because the first ``torch.optim`` optimizer a process creates imports
    ``torch._dynamo``, which takes longer on a 2-core CPU than this module's whole training run.
    ``step(lr)`` takes the learning rate of the step, so a schedule is just a function of the step.
    """

    def __init__(self, params, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-9):
        self.params = [p for p in params if p.requires_grad]
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.m = [torch.zeros_like(p) for p in self.params]  # running mean of the gradients
        self.v = [torch.zeros_like(p) for p in self.params]  # running mean of their squares
        self.steps = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lr: float) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:  # no gradient anywhere: nothing moves, as with torch.optim.Adam
            return
        self.steps += 1
        correction1 = 1 - self.beta1**self.steps  # the running means start at 0: undo that bias
        correction2 = math.sqrt(1 - self.beta2**self.steps)
        params = [self.params[i] for i in live]
        grads = [p.grad for p in params]
        m, v = [self.m[i] for i in live], [self.v[i] for i in live]
        # each line updates every parameter in one call (torch._foreach_*, as
        # torch.optim.Adam(foreach=True) does, instead of a Python loop over the parameters):
        # m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2,
        # p <- p - lr / correction1 * m / (sqrt(v) / correction2 + eps)
        torch._foreach_lerp_(m, grads, 1 - self.beta1)
        torch._foreach_mul_(v, self.beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - self.beta2)
        denominator = torch._foreach_sqrt(v)
        torch._foreach_div_(denominator, correction2)
        torch._foreach_add_(denominator, self.eps)
        torch._foreach_addcdiv_(params, m, denominator, value=-lr / correction1)


def learning_rate(step: int, lr: float, warmup: int) -> float:
    """The paper's schedule (section 5.3, Eq. 3) scaled to peak at ``lr``: linear warm-up over
    ``warmup`` steps to ``lr``, then decay as 1/sqrt(step). ``step`` counts from 0, so this is
    ``lrate(step + 1, d_model, warmup, factor=lr * sqrt(d_model * warmup))`` for any d_model."""
    return lr * min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def train(
    model: Transformer,
    steps: int,
    task: str = "reverse",
    batch_size: int = 128,
    lr: float = 8e-3,
    warmup: int = 10,
    min_len: int = 6,
    max_len: int = 6,
    generator: torch.Generator | None = None,
    progress=None,
    *,
    smoothing: float = 0.0,
    schedule=None,
) -> list[float]:
    """Train ``model`` on ``steps`` fresh batches of ``task`` with Adam and cross-entropy over the
    real target tokens (PAD ignored); returns the loss of every step.

    The learning rate follows ``learning_rate(step, lr, warmup)``, or ``schedule(step_num)``
    (``step_num`` from 1, e.g. ``lambda s: lrate(s, d_model, warmup, factor)``, Eq. 3) when
    given. ``smoothing`` is the label smoothing of section 5.4 (the paper: 0.1), applied by
    ``F.cross_entropy`` (``label_smoothed_cross_entropy`` computes the same). ``progress`` wraps
    the step range, e.g. ``tqdm.tqdm`` for a progress bar (the library itself depends only on
    numpy and torch). Batches are drawn on the CPU with ``generator`` and moved to the model's
    device. The model trains in training mode (dropout on) and is left in evaluation mode.
    """
    device = next(model.parameters()).device
    optimizer = Adam(model.parameters())
    steps_iter = range(steps) if progress is None else progress(range(steps))
    losses = []
    model.train()
    for step in steps_iter:
        src, tgt_in, tgt_out = make_batch(task, batch_size, min_len, max_len, generator, device)
        logits = model(src, tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            tgt_out.reshape(-1),
            ignore_index=model.pad,
            label_smoothing=smoothing,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step(learning_rate(step, lr, warmup) if schedule is None else schedule(step + 1))
        losses.append(loss.item())
        if hasattr(steps_iter, "set_postfix"):
            steps_iter.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    model.eval()
    return losses


def exact_match(predicted: torch.Tensor, target: torch.Tensor, pad: int = PAD) -> float:
    """The fraction of rows where ``predicted`` equals ``target`` up to and including EOS.

    Both are ``(batch, n)`` token ids padded with ``pad`` after their end (of any widths n):
    a row counts only if every token matches, the end symbol included.
    """
    width = max(predicted.shape[1], target.shape[1])

    def padded(t):
        return F.pad(t, (0, width - t.shape[1]), value=pad)

    return (padded(predicted) == padded(target)).all(dim=1).float().mean().item()


def tokens_to_digits(tokens) -> str:
    """A row of token ids as a string: digits as themselves, then ``.`` for EOS; PAD dropped."""
    out = []
    for t in (int(t) for t in tokens):
        if t == EOS:
            out.append(".")
            break
        if t >= FIRST_DIGIT:
            out.append(str(t - FIRST_DIGIT))
        elif t == BOS:
            out.append("^")
    return "".join(out)

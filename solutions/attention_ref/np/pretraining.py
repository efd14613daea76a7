"""Lesson 10, Encoder-only and decoder-only models -- NumPy reference: their two training
objectives and BERT's size.

* **Masked language modelling** (BERT, Devlin et al. 2019, section 3.1): choose 15 % of the
  positions at random; of those, replace 80 % by ``[MASK]``, 10 % by a random token and leave 10 %
  unchanged; predict the original token at the chosen positions only (``mask_tokens``,
  ``masked_lm_loss``). The encoder sees the whole sequence, both sides of every blank.
* **Next-token prediction** (decoder-only language models): position ``i`` reads tokens
  ``0 .. i`` (the causal mask) and predicts token ``i + 1``; every position has a target
  (``next_token_loss``).
* ``bert_parameter_counts``: what BERT-base (110M) and BERT-large (340M) hold, part by part.

Token ids are integers; ids below ``num_special`` are special symbols (padding, ``[MASK]``, ...),
which are never chosen for prediction and never drawn as a random replacement.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .feedforward import layer_parameter_counts
from .retrieval import as_float_array

__all__ = ["mask_tokens", "masked_lm_loss", "next_token_loss", "bert_parameter_counts"]

# BERT's rule for the chosen positions: [MASK], a random token, unchanged
MASK_SHARE, RANDOM_SHARE = 0.8, 0.1


def masking_options(vocab_size: int, mask_id: int, num_special: int, select_prob: float) -> None:
    """ValueError unless the options of ``mask_tokens`` make sense (shared with PyTorch)."""
    if not 0 <= select_prob <= 1:
        raise ValueError(f"select_prob must be a probability in [0, 1], got {select_prob!r}")
    if not 0 < num_special < vocab_size:
        raise ValueError(
            f"need 0 < num_special < vocab_size (some ordinary tokens to draw), got "
            f"num_special={num_special}, vocab_size={vocab_size}"
        )
    if not 0 <= mask_id < num_special:
        raise ValueError(
            f"mask_id = {mask_id} must be a special id, below num_special = {num_special}"
        )


def mask_tokens(
    tokens, rng, vocab_size: int, mask_id: int, num_special: int, select_prob: float = 0.15
) -> tuple[np.ndarray, np.ndarray]:
    """BERT's input masking: ``(inputs, selected)``, both of the shape of ``tokens``.

    Each ordinary token (id >= ``num_special``) is chosen with probability ``select_prob``
    (``selected``, True where the model must predict the original token). A chosen token becomes
    ``mask_id`` with probability 0.8, a random ordinary token (uniform over ``num_special ..
    vocab_size - 1``, possibly itself) with probability 0.1, and stays as it is otherwise. Tokens
    not chosen are copied. ``rng`` is a ``np.random.Generator``; ``tokens`` is not modified.
    """
    tokens = np.asarray(tokens)
    if not np.issubdtype(tokens.dtype, np.integer):
        raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    masking_options(vocab_size, mask_id, num_special, select_prob)
    selected = (rng.random(tokens.shape) < select_prob) & (tokens >= num_special)
    action = rng.random(tokens.shape)
    random_tokens = rng.integers(num_special, vocab_size, tokens.shape)
    inputs = np.where(selected & (action < MASK_SHARE), mask_id, tokens)
    replace = selected & (action >= MASK_SHARE) & (action < MASK_SHARE + RANDOM_SHARE)
    inputs = np.where(replace, random_tokens, inputs)
    return inputs.astype(tokens.dtype, copy=False), selected


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    peak = logits.max(axis=-1, keepdims=True)
    shifted = logits - peak
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _token_losses(logits, targets) -> np.ndarray:
    """``-log softmax(logits)[target]`` at every position: ``(..., n)``."""
    logits = as_float_array("logits", logits)
    targets = np.asarray(targets)
    _checks.require_ndim("logits", logits, 1, "(..., n, vocab)")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {logits.shape} need one row of vocabulary scores per target: targets have "
            f"shape {targets.shape}, expected {logits.shape[:-1]}"
        )
    log_probs = _log_softmax(logits)
    return -np.take_along_axis(log_probs, targets[..., None].astype(np.intp), axis=-1)[..., 0]


def masked_lm_loss(logits, targets, selected) -> np.ndarray:
    """Mean cross-entropy over the ``selected`` positions only (BERT's masked-token objective).

    ``logits`` ``(..., n, vocab)``, ``targets`` ``(..., n)`` the original token ids, ``selected``
    ``(..., n)`` boolean. The unselected positions (whose input was the answer) contribute nothing;
    with nothing selected the loss is 0, not the NaN of a mean over nothing. The same number as
    ``F.cross_entropy(logits, where(selected, targets, -100), ignore_index=-100)``.
    """
    selected = np.asarray(selected, dtype=bool)
    losses = _token_losses(logits, targets)
    if selected.shape != losses.shape:
        raise ValueError(f"selected has shape {selected.shape}, the targets {losses.shape}")
    count = selected.sum()
    total = np.where(selected, losses, 0.0).sum()
    return (total / count if count else total * 0).astype(losses.dtype)


def next_token_loss(logits, tokens) -> np.ndarray:
    """Mean cross-entropy of predicting token ``i + 1`` from position ``i`` (decoder-only LMs).

    ``logits`` ``(..., n, vocab)`` are the model's outputs for ``tokens`` ``(..., n)``: the
    prediction at the last position has no target, the first token is never predicted, so
    ``n - 1`` predictions per sequence count.
    """
    logits, tokens = as_float_array("logits", logits), np.asarray(tokens)
    _checks.require_ndim("logits", logits, 2, "(..., n, vocab)")
    if tokens.shape[-1] < 2:
        raise ValueError(f"a next-token loss needs at least 2 tokens, got shape {tokens.shape}")
    return _token_losses(logits[..., :-1, :], tokens[..., 1:]).mean()


def bert_parameter_counts(
    vocab_size: int = 30522,
    d_model: int = 768,
    num_layers: int = 12,
    num_heads: int = 12,
    d_ff: int = 3072,
    max_positions: int = 512,
    num_segments: int = 2,
) -> dict:
    """Parameters of a BERT encoder by part, as Devlin et al. count their 110M / 340M.

    ``token_embeddings`` (vocab x d_model), learned ``position_embeddings`` (max_positions x
    d_model), ``segment_embeddings`` (sentence A / B: num_segments x d_model), the
    ``embedding_norm`` (a LayerNorm: gain and bias), ``layers``: num_layers encoder layers (lesson
    6's ``layer_parameter_counts``: self-attention with biases, FFN, two LayerNorms) and the
    ``pooler`` (a d_model x d_model linear layer with bias on the [CLS] position). The
    pre-training heads (masked-token transform and output bias, next-sentence classifier) are not
    counted; the output layer of the masked-token head reuses the token embeddings.
    Defaults: BERT-base (109,482,240); BERT-large is d_model=1024, 24 layers, 16 heads, d_ff=4096.
    """
    for name, value in (("vocab_size", vocab_size), ("num_layers", num_layers)):
        _checks.require_positive(name, value)
    layer = sum(layer_parameter_counts(d_model, num_heads, d_ff).values())
    return {
        "token_embeddings": vocab_size * d_model,
        "position_embeddings": max_positions * d_model,
        "segment_embeddings": num_segments * d_model,
        "embedding_norm": 2 * d_model,
        "layers": num_layers * layer,
        "pooler": d_model * d_model + d_model,
    }

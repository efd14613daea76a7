"""Lesson 15, Reading what attention learned -- PyTorch reference: the scores that find a head by
its attention pattern, ablation, a head's QK and OV circuits kept as two factors, the copying
score, K-composition, and direct logit attribution (Elhage et al., 2021; Olsson et al., 2022).

Conventions (the course's row vectors, ``x @ W``): a head's query is ``x @ w_q`` with ``w_q``
``(d_model, d_head)``, its output ``z @ w_o`` with ``w_o`` ``(d_head, d_model)``; the embedding
``w_e`` is ``(vocab, d_model)``, the unembedding ``w_u`` ``(d_model, vocab)``. So

* the QK circuit ``w_e w_q (w_e w_k)^T`` (vocab x vocab): row i, column j is the score (before
  the 1 / sqrt(d_head)) of a query token i for a key token j;
* the OV circuit ``w_e w_v w_o w_u`` (vocab x vocab): row i is what attending to token i adds
  to each logit;
* ``W_QK = w_q w_k^T`` and ``W_OV = w_v w_o`` (d_model x d_model) are the two maps a head is made
  of; Elhage et al. write column vectors (their W_Q is ``w_q^T``): their W_QK is this one, their
  W_OV the transpose of this one.

Every function runs on the device of its inputs.
"""

from __future__ import annotations

import torch

from .induction import repeated_random_tokens

__all__ = [
    "previous_token_score",
    "first_token_score",
    "induction_score",
    "ablate_head",
    "qk_circuit",
    "ov_circuit",
    "copying_score",
    "k_composition_scores",
    "direct_logit_attribution",
    "find_induction_circuit",
]


def _square(weights: torch.Tensor, least: int) -> int:
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2] or weights.shape[-1] < least:
        raise ValueError(
            f"weights must be (..., n, n) with n >= {least}, got {tuple(weights.shape)}"
        )
    return weights.shape[-1]


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """The mean weight a query puts on the position just before it, over queries 1 .. n - 1:
    ``(..., n, n)`` -> ``(...)`` (query 0 has no previous position)."""
    _square(weights, 2)
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(dim=-1)


def first_token_score(weights: torch.Tensor) -> torch.Tensor:
    """The mean weight on position 0 over queries 1 .. n - 1 (query 0 can read nothing else):
    ``(..., n, n)`` -> ``(...)``."""
    _square(weights, 2)
    return weights[..., 1:, 0].mean(dim=-1)


def induction_score(weights: torch.Tensor, seg_len: int) -> torch.Tensor:
    """On BOS and a segment of ``seg_len`` tokens repeated (n = 1 + 2 seg_len): the mean weight a
    query in the repeat (positions seg_len + 1 .. 2 seg_len) puts on the position after the earlier
    occurrence of its token, ``seg_len - 1`` back. ``(..., n, n)`` -> ``(...)``."""
    n = _square(weights, 3)
    if seg_len < 1 or n != 1 + 2 * seg_len:
        raise ValueError(f"weights of {n} positions are not BOS and twice seg_len = {seg_len}")
    stripe = torch.diagonal(weights, offset=-(seg_len - 1), dim1=-2, dim2=-1)
    return stripe[..., 2:].mean(dim=-1)  # rows seg_len - 1 and seg_len precede the repeat


def ablate_head(model, tokens: torch.Tensor, layer: int, head: int, method: str = "zero"):
    """The logits of ``model`` (an ``AttentionOnly``) on ``tokens`` with one head's output
    replaced: by 0 (``"zero"``), or by its mean over the batch at each position (``"mean"``).
    Later layers read the ablated residual stream; the model is left as it was."""
    if method not in ("zero", "mean"):
        raise ValueError(f"method must be 'zero' or 'mean', got {method!r}")
    if not (0 <= layer < model.num_layers and 0 <= head < model.num_heads):
        raise ValueError(
            f"no head {head} in layer {layer}: the model has {model.num_layers} layers of "
            f"{model.num_heads} heads"
        )

    def edit(at: int, outputs: torch.Tensor) -> torch.Tensor:
        if at != layer:
            return outputs
        one = outputs[..., head, :, :]
        replacement = torch.zeros_like(one) if method == "zero" else one.mean(dim=0).expand_as(one)
        return torch.cat(
            [
                outputs[..., :head, :, :],
                replacement[..., None, :, :],
                outputs[..., head + 1 :, :, :],
            ],
            dim=-3,
        )

    return model(tokens, edit_heads=edit)


def qk_circuit(w_e: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor):
    """The QK circuit ``w_e w_q (w_e w_k)^T`` as its two factors ``(left (vocab, d_head),
    right (d_head, vocab))``, never multiplied out: ``left @ right`` is the vocab x vocab matrix."""
    return w_e @ w_q, (w_e @ w_k).T


def ov_circuit(w_e: torch.Tensor, w_v: torch.Tensor, w_o: torch.Tensor, w_u: torch.Tensor):
    """The OV circuit ``w_e w_v w_o w_u`` as ``(left (vocab, d_head), right (d_head, vocab))``."""
    return w_e @ w_v, w_o @ w_u


def copying_score(left: torch.Tensor, right: torch.Tensor) -> float:
    """sum(eigenvalues) / sum(|eigenvalues|) of ``left @ right`` (Elhage et al.'s summary of a
    copying matrix: 1 when every eigenvalue is positive), from the eigenvalues of the small
    ``right @ left`` (d_head x d_head), which are the nonzero eigenvalues of ``left @ right``."""
    eigenvalues = torch.linalg.eigvals((right @ left).double())
    return (eigenvalues.sum().real / eigenvalues.abs().sum()).item()


def k_composition_scores(
    w_v: torch.Tensor, w_o: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor
) -> torch.Tensor:
    """How much each later head's keys read what each earlier head writes: ``(h_early, h_late)``,
    ``||W_QK^j W_OV^i^T||_F / (||W_QK^j||_F ||W_OV^i||_F)`` with ``W_OV^i = w_v[i] w_o[i]`` of the
    earlier heads (``w_v`` ``(h_early, d_model, d_head)``, ``w_o`` ``(h_early, d_head, d_model)``)
    and ``W_QK^j = w_q[j] w_k[j]^T`` of the later ones (``w_q``, ``w_k`` ``(h_late, d_model,
    d_head)``): Elhage et al.'s K-composition, their ``||W_QK W_OV||_F`` in column vectors."""
    w_ov = w_v @ w_o  # (h_early, d, d)
    w_qk = w_q @ w_k.transpose(-1, -2)  # (h_late, d, d)
    products = w_qk[None, :] @ w_ov.transpose(-1, -2)[:, None]  # (h_early, h_late, d, d)
    norm = lambda m: torch.linalg.matrix_norm(m)  # noqa: E731  (Frobenius)
    return norm(products) / (norm(w_ov)[:, None] * norm(w_qk)[None, :])


def direct_logit_attribution(
    components: torch.Tensor, w_u: torch.Tensor, tokens: torch.Tensor
) -> torch.Tensor:
    """What each part of the residual stream adds to the logit of the correct next token:
    ``components`` ``(..., c, n, d_model)`` (``AttentionOnly.components``), ``tokens`` ``(..., n)``
    -> ``(..., c, n - 1)``, where position i is scored on token i + 1. Only the unembedding's
    columns of those tokens are used: no logit of any other token is computed."""
    columns = w_u.T[tokens[..., 1:]]  # (..., n - 1, d_model)
    return torch.einsum("...cnd,...nd->...cn", components[..., :-1, :], columns)


def find_induction_circuit(model, seg_len: int = 20, batch_size: int = 32) -> dict:
    """In a two-layer ``AttentionOnly`` model (the challenge's), the layer-0 head the induction
    heads read their keys from, and the layer-1 heads that copy by induction: ``{"previous_token":
    h, "induction": [heads]}``, found by zero-ablating each head on repeated random tokens (a head
    that writes next to nothing changes nothing, whatever its pattern)."""
    tokens = repeated_random_tokens_for(model, batch_size, seg_len)
    repeat = slice(seg_len + 1, None)

    def repeat_loss(logits):
        log_probs = torch.log_softmax(logits[:, repeat][:, :-1], dim=-1)
        return -log_probs.gather(-1, tokens[:, repeat][:, 1:, None]).mean().item()

    with torch.no_grad():
        base = repeat_loss(model(tokens))
        harm = [
            [
                repeat_loss(ablate_head(model, tokens, layer, h)) - base
                for h in range(model.num_heads)
            ]
            for layer in range(2)
        ]
        _, weights = model(tokens, return_weights=True)
        scores = induction_score(weights[1], seg_len).mean(dim=0)
    previous = max(range(model.num_heads), key=lambda h: harm[0][h])
    induction = [h for h in range(model.num_heads) if harm[1][h] > 0.1 and scores[h] > 0.3]
    return {"previous_token": previous, "induction": induction}


def repeated_random_tokens_for(model, batch_size: int, seg_len: int) -> torch.Tensor:
    """Repeated random tokens for ``model``'s vocabulary, from a fixed seed, on its device."""
    generator = torch.Generator().manual_seed(1505)
    tokens = repeated_random_tokens(batch_size, seg_len, model.vocab_size, generator)
    return tokens.to(model.W_E.device)

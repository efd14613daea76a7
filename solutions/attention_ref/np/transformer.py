"""Lesson 8, The Transformer assembled -- NumPy reference.

Each sub-layer (an attention or the FFN) is wrapped in a residual connection followed by layer
normalization, the paper's post-norm (section 3.1):

    LayerNorm(x + Sublayer(x))

An encoder layer is two such sub-layers, self-attention then the FFN; a decoder layer is three,
masked self-attention, encoder-decoder (cross) attention over the encoder's output ``memory``,
then the FFN. A stack applies its layers one after another (no final LayerNorm: the paper's
post-norm stacks end with the last layer's own).

Parameters of one layer are a nested dict (``nn.TransformerEncoderLayer`` / ``DecoderLayer``'s
weights in the course's row-vector layout, ``x @ w + b``)::

    encoder layer  {"self_attn": MHA, "norm_1": NORM, "ffn": FFN, "norm_2": NORM}
    decoder layer  {"self_attn": MHA, "norm_1": NORM, "cross_attn": MHA, "norm_2": NORM,
                    "ffn": FFN, "norm_3": NORM}

    MHA   lesson 4's {"w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"}
    FFN   lesson 6's {"w_1", "b_1", "w_2", "b_2"}
    NORM  {"gamma": (d_model,), "beta": (d_model,)}, and optionally "eps" (default 1e-5)

``norm_k`` follows the k-th sub-layer; PyTorch calls them ``norm1``, ``norm2``, ``norm3``, and
the cross-attention ``multihead_attn``. A stack's parameters are a list of layer dicts.
Masks are boolean, True = may attend (lesson 3); the decoder's causal mask is always on.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .feedforward import init_ffn_params, position_wise_ffn
from .multihead import init_params
from .retrieval import as_float_array
from .three_uses import decoder_self_attention, encoder_decoder_attention, encoder_self_attention

EPS = 1e-5  # nn.LayerNorm's default


def layer_norm(x, gamma, beta, eps: float = EPS) -> np.ndarray:
    """Normalize each position's features to mean 0 and variance 1, then scale and shift.

    ``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis of ``x`` ``(..., d_model)``;
    ``var`` is the biased variance (divided by d_model, not d_model - 1), as in ``nn.LayerNorm``.
    """
    x, gamma, beta = (as_float_array(n, a) for n, a in (("x", x), ("gamma", gamma), ("beta", beta)))
    _checks.layer_norm_inputs(x, gamma, beta, eps)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def add_and_norm(x, sublayer, norm: dict, *, dropout=None, residual: bool = True) -> np.ndarray:
    """The paper's "Add & Norm": ``LayerNorm(x + sublayer(x))`` with ``norm``'s gamma and beta.

    ``dropout``, a function, is applied to the sub-layer's output before it is added to ``x``:
    ``LayerNorm(x + dropout(sublayer(x)))``, the paper's residual dropout (section 5.4).
    ``residual=False`` leaves the ``x +`` out, ``LayerNorm(sublayer(x))``: an ablation.
    """
    _checks.norm_params(norm)
    out = sublayer(x)
    if dropout is not None:
        out = dropout(out)
    return layer_norm(
        x + out if residual else out, norm["gamma"], norm["beta"], norm.get("eps", EPS)
    )


def encoder_layer(
    x,
    params: dict,
    num_heads: int,
    src_mask=None,
    return_weights: bool = False,
    *,
    dropout=None,
    residual: bool = True,
    scale=None,
):
    """One encoder layer: self-attention, then the FFN, each inside Add & Norm.

    ``x`` ``(..., n_src, d_model)`` -> same shape. With ``return_weights=True`` the result is
    ``(output, {"self_attn": weights (..., h, n_src, n_src)})``.
    ``dropout``, ``residual`` and ``scale`` are those of ``add_and_norm`` and ``attention_weights``
    (the residual dropout of section 5.4, and lesson 8's ablations); the defaults are the paper's
    layer without dropout.
    """
    _checks.layer_params(params, "encoder")
    weights = {}

    def self_attention(x):
        out, weights["self_attn"] = encoder_self_attention(
            x, params["self_attn"], num_heads, src_mask, return_weights=True, scale=scale
        )
        return out

    def add_norm(x, sublayer, norm):
        return add_and_norm(x, sublayer, norm, dropout=dropout, residual=residual)

    x = add_norm(x, self_attention, params["norm_1"])
    x = add_norm(x, lambda x: position_wise_ffn(x, params["ffn"]), params["norm_2"])
    return (x, weights) if return_weights else x


def decoder_layer(
    y,
    memory,
    params: dict,
    num_heads: int,
    tgt_mask=None,
    memory_mask=None,
    return_weights: bool = False,
    *,
    dropout=None,
    residual: bool = True,
    scale=None,
):
    """One decoder layer: masked self-attention, cross-attention over ``memory``, the FFN.

    ``y`` ``(..., n_tgt, d_model)``, ``memory`` ``(..., n_src, d_model)`` (the encoder's output)
    -> ``(..., n_tgt, d_model)``. The causal mask is always applied to the self-attention
    (``tgt_mask``, e.g. target padding, is combined with it); ``memory_mask`` hides source keys.
    With ``return_weights=True``: ``(output, {"self_attn": (..., h, n_tgt, n_tgt),
    "cross_attn": (..., h, n_tgt, n_src)})``.
    ``dropout``, ``residual`` and ``scale`` are those of ``add_and_norm`` and ``attention_weights``
    (the residual dropout of section 5.4, and lesson 8's ablations); the defaults are the paper's
    layer without dropout.
    """
    _checks.layer_params(params, "decoder")
    weights = {}

    def self_attention(y):
        out, weights["self_attn"] = decoder_self_attention(
            y, params["self_attn"], num_heads, tgt_mask, return_weights=True, scale=scale
        )
        return out

    def cross_attention(y):
        out, weights["cross_attn"] = encoder_decoder_attention(
            y,
            memory,
            params["cross_attn"],
            num_heads,
            memory_mask,
            return_weights=True,
            scale=scale,
        )
        return out

    def add_norm(y, sublayer, norm):
        return add_and_norm(y, sublayer, norm, dropout=dropout, residual=residual)

    y = add_norm(y, self_attention, params["norm_1"])
    y = add_norm(y, cross_attention, params["norm_2"])
    y = add_norm(y, lambda y: position_wise_ffn(y, params["ffn"]), params["norm_3"])
    return (y, weights) if return_weights else y


def encoder(x, layers, num_heads: int, src_mask=None, return_weights: bool = False, **options):
    """The encoder stack: ``encoder_layer`` for each parameter dict in ``layers``, in order.

    With ``return_weights=True``: ``(output, [weights of layer 1, ..., weights of layer N])``.
    ``options`` (``dropout``, ``residual``, ``scale``) are passed on to every layer.
    """
    all_weights = []
    for params in _checks.stack_layers(layers):
        x, weights = encoder_layer(x, params, num_heads, src_mask, return_weights=True, **options)
        all_weights.append(weights)
    return (x, all_weights) if return_weights else x


def decoder(
    y,
    memory,
    layers,
    num_heads: int,
    tgt_mask=None,
    memory_mask=None,
    return_weights: bool = False,
    **options,
):
    """The decoder stack: every layer attends to the same ``memory`` (the encoder's final
    output); ``options`` are passed on to every layer."""
    all_weights = []
    for params in _checks.stack_layers(layers):
        y, weights = decoder_layer(
            y, memory, params, num_heads, tgt_mask, memory_mask, return_weights=True, **options
        )
        all_weights.append(weights)
    return (y, all_weights) if return_weights else y


def _norm(d_model: int) -> dict:
    return {"gamma": np.ones(d_model), "beta": np.zeros(d_model)}


def init_encoder_layer_params(d_model: int, num_heads: int, d_ff: int, rng=None) -> dict:
    """Random encoder-layer parameters: PyTorch's initialization (Xavier attention, nn.Linear's
    uniform FFN, LayerNorm gamma = 1 and beta = 0)."""
    rng = np.random.default_rng() if rng is None else rng
    return {
        "self_attn": init_params(d_model, num_heads, rng),
        "norm_1": _norm(d_model),
        "ffn": init_ffn_params(d_model, d_ff, rng),
        "norm_2": _norm(d_model),
    }


def init_decoder_layer_params(d_model: int, num_heads: int, d_ff: int, rng=None) -> dict:
    """Random decoder-layer parameters, initialized like ``init_encoder_layer_params``."""
    rng = np.random.default_rng() if rng is None else rng
    return {
        "self_attn": init_params(d_model, num_heads, rng),
        "norm_1": _norm(d_model),
        "cross_attn": init_params(d_model, num_heads, rng),
        "norm_2": _norm(d_model),
        "ffn": init_ffn_params(d_model, d_ff, rng),
        "norm_3": _norm(d_model),
    }

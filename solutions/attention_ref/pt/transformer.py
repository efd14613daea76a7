"""Lesson 8, The Transformer assembled -- PyTorch reference (the same functions as
``attention_ref.np.transformer``, whose docstring describes the nested parameter layout), plus
``encoder_layer_params_from_torch`` / ``decoder_layer_params_from_torch``, which read the weights
of ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` into that layout.

Every function runs on the device of its inputs. The parameter dicts may be plain dicts of
tensors or ``nn.ModuleDict``s of ``nn.ParameterDict``s (what ``attention_ref.pt.model`` trains):
only ``params[name]`` and ``name in params`` are used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import _checks
from ..np.transformer import EPS
from .feedforward import ffn_params_from_torch, init_ffn_params, position_wise_ffn
from .multihead import init_params, params_from_torch
from .retrieval import as_float_tensor, upcast
from .three_uses import decoder_self_attention, encoder_decoder_attention, encoder_self_attention

__all__ = [
    "layer_norm",
    "add_and_norm",
    "encoder_layer",
    "decoder_layer",
    "encoder",
    "decoder",
    "init_encoder_layer_params",
    "init_decoder_layer_params",
    "encoder_layer_params_from_torch",
    "decoder_layer_params_from_torch",
]


def layer_norm(x, gamma, beta, eps: float = EPS) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis, biased variance
    (``nn.LayerNorm``). Half-precision inputs are normalized in float32.

    The normalization is ``F.layer_norm``'s, one fused operation, which computes what the NumPy
    twin writes out (the reference tests compare both with ``nn.LayerNorm``): the model of lesson 8
    runs five LayerNorms per step, and as eight separate operations they cost a sixth of a step.
    """
    x, gamma, beta = (
        as_float_tensor(n, a) for n, a in (("x", x), ("gamma", gamma), ("beta", beta))
    )
    _checks.layer_norm_inputs(x, gamma, beta, eps)
    if x.dtype in (torch.float32, torch.float64) and gamma.dtype == beta.dtype == x.dtype:
        return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)
    dtype = x.dtype
    (x,) = upcast(x)
    return F.layer_norm(x, x.shape[-1:], eps=eps).to(dtype) * gamma + beta


def add_and_norm(x, sublayer, norm, *, dropout=None, residual: bool = True) -> torch.Tensor:
    """The paper's "Add & Norm": ``LayerNorm(x + sublayer(x))`` with ``norm``'s gamma and beta.

    ``dropout`` (a function, e.g. ``lambda t: F.dropout(t, 0.1, training)``) is applied to the
    sub-layer's output before the addition, the residual dropout of section 5.4;
    ``residual=False`` computes ``LayerNorm(sublayer(x))`` (an ablation).
    """
    _checks.norm_params(norm)
    eps = norm["eps"] if "eps" in norm else EPS
    out = sublayer(x)
    if dropout is not None:
        out = dropout(out)
    return layer_norm(x + out if residual else out, norm["gamma"], norm["beta"], eps)


def encoder_layer(
    x,
    params,
    num_heads: int,
    src_mask=None,
    return_weights: bool = False,
    *,
    dropout=None,
    residual: bool = True,
    scale=None,
):
    """One encoder layer: self-attention, then the FFN, each inside Add & Norm (see the NumPy
    twin, also for ``dropout``, ``residual`` and ``scale``)."""
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
    params,
    num_heads: int,
    tgt_mask=None,
    memory_mask=None,
    return_weights: bool = False,
    *,
    dropout=None,
    residual: bool = True,
    scale=None,
):
    """One decoder layer: masked self-attention, cross-attention over ``memory``, the FFN."""
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
    """The encoder stack: ``encoder_layer`` for each parameter dict in ``layers``, in order;
    ``options`` (``dropout``, ``residual``, ``scale``) are passed on to every layer."""
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


def _norm(d_model: int, device, dtype) -> dict:
    return {
        "gamma": torch.ones(d_model, device=device, dtype=dtype),
        "beta": torch.zeros(d_model, device=device, dtype=dtype),
    }


def init_encoder_layer_params(
    d_model: int,
    num_heads: int,
    d_ff: int,
    rng: torch.Generator | None = None,
    *,
    device=None,
    dtype=torch.float32,
) -> dict:
    """Random encoder-layer parameters (drawn on the CPU with ``rng``, then moved to ``device``)."""
    kw = dict(device=device, dtype=dtype)
    return {
        "self_attn": init_params(d_model, num_heads, rng, **kw),
        "norm_1": _norm(d_model, **kw),
        "ffn": init_ffn_params(d_model, d_ff, rng, **kw),
        "norm_2": _norm(d_model, **kw),
    }


def init_decoder_layer_params(
    d_model: int,
    num_heads: int,
    d_ff: int,
    rng: torch.Generator | None = None,
    *,
    device=None,
    dtype=torch.float32,
) -> dict:
    """Random decoder-layer parameters, initialized like ``init_encoder_layer_params``."""
    kw = dict(device=device, dtype=dtype)
    return {
        "self_attn": init_params(d_model, num_heads, rng, **kw),
        "norm_1": _norm(d_model, **kw),
        "cross_attn": init_params(d_model, num_heads, rng, **kw),
        "norm_2": _norm(d_model, **kw),
        "ffn": init_ffn_params(d_model, d_ff, rng, **kw),
        "norm_3": _norm(d_model, **kw),
    }


def _norm_from_torch(norm: nn.LayerNorm) -> dict:
    if not isinstance(norm, nn.LayerNorm) or len(norm.normalized_shape) != 1:
        raise TypeError(f"expected an nn.LayerNorm over the last axis, got {norm}")
    if norm.weight is None or norm.bias is None:
        raise ValueError(
            "this reference's LayerNorm has gamma and beta: build the layer with "
            "elementwise_affine=True and bias=True"
        )
    params = {"gamma": norm.weight.detach(), "beta": norm.bias.detach()}
    # only when it differs from the default, so that most dicts stay {gamma, beta}
    if norm.eps != EPS:
        params["eps"] = norm.eps
    return params


def _check_torch_layer(layer, cls) -> None:
    if not isinstance(layer, cls):
        raise TypeError(f"expected an nn.{cls.__name__}, got {type(layer).__name__}")
    if layer.norm_first:
        raise ValueError(
            "norm_first=True is the pre-norm variant x + Sublayer(LayerNorm(x)); this "
            "reference is the paper's post-norm LayerNorm(x + Sublayer(x))"
        )
    if layer.activation is not torch.nn.functional.relu and not isinstance(
        layer.activation, nn.ReLU
    ):
        raise ValueError(f"the paper's FFN uses ReLU, this layer uses {layer.activation}")


def encoder_layer_params_from_torch(layer: nn.TransformerEncoderLayer) -> dict:
    """The weights of an ``nn.TransformerEncoderLayer`` (post-norm, ReLU) in this module's layout,
    detached. Dropout is not modelled: compare with the layer in ``eval()`` mode."""
    _check_torch_layer(layer, nn.TransformerEncoderLayer)
    return {
        "self_attn": params_from_torch(layer.self_attn),
        "norm_1": _norm_from_torch(layer.norm1),
        "ffn": ffn_params_from_torch(layer.linear1, layer.linear2),
        "norm_2": _norm_from_torch(layer.norm2),
    }


def decoder_layer_params_from_torch(layer: nn.TransformerDecoderLayer) -> dict:
    """The weights of an ``nn.TransformerDecoderLayer`` (post-norm, ReLU) in this module's
    layout."""
    _check_torch_layer(layer, nn.TransformerDecoderLayer)
    return {
        "self_attn": params_from_torch(layer.self_attn),
        "norm_1": _norm_from_torch(layer.norm1),
        "cross_attn": params_from_torch(layer.multihead_attn),
        "norm_2": _norm_from_torch(layer.norm2),
        "ffn": ffn_params_from_torch(layer.linear1, layer.linear2),
        "norm_3": _norm_from_torch(layer.norm3),
    }

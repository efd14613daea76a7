"""Lesson 6, The position-wise feed-forward network -- NumPy reference.

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

applied to each position separately and identically (the same W_1, W_2 at every position):
``x`` ``(..., n, d_model)`` -> ``(..., n, d_model)`` through a hidden layer of width d_ff.
The paper's sizes are d_model = 512, d_ff = 2048; BERT base uses 768 and 3072 = 4 x 768.
``layer_parameter_counts`` says where a whole encoder or decoder layer's parameters sit.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .multihead import parameter_count
from .retrieval import as_float_array


def init_ffn_params(d_model: int, d_ff: int, rng=None) -> dict:
    """Random ``w_1`` (d_model, d_ff), ``b_1`` (d_ff,), ``w_2`` (d_ff, d_model), ``b_2`` (d_model,).

    Uniform in +-1/sqrt(fan_in), weights and biases alike: what ``nn.Linear`` starts from.
    """
    _checks.require_positive("d_model", d_model)
    _checks.require_positive("d_ff", d_ff)
    rng = np.random.default_rng() if rng is None else rng

    def uniform(fan_in, shape):
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape)

    return {
        "w_1": uniform(d_model, (d_model, d_ff)),
        "b_1": uniform(d_model, (d_ff,)),
        "w_2": uniform(d_ff, (d_ff, d_model)),
        "b_2": uniform(d_ff, (d_model,)),
    }


def position_wise_ffn(x, params: dict) -> np.ndarray:
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 for every position of ``x`` ``(..., n, d_model)``."""
    x = as_float_array("x", x)
    params = {name: as_float_array(name, params[name]) for name in _checks.ffn_params(params)}
    _checks.ffn_inputs(x, params)
    hidden = np.maximum(0.0, x @ params["w_1"] + params["b_1"])
    return hidden @ params["w_2"] + params["b_2"]


def ffn_parameter_count(d_model: int, d_ff: int) -> int:
    """Weights and biases of one FFN: 2 d_model d_ff + d_ff + d_model (2,099,712 for 512 / 2048)."""
    return 2 * d_model * d_ff + d_ff + d_model


def layer_parameter_counts(d_model: int, num_heads: int, d_ff: int, decoder: bool = False) -> dict:
    """Parameters of one Transformer layer by part: ``{"attention": ..., "ffn": ..., "norms":
    ...}``.

    An encoder layer has one multi-head self-attention, one FFN and two LayerNorms (a gain and a
    bias of d_model each); a decoder layer has two multi-head attentions (masked self-attention and
    encoder-decoder attention), one FFN and three LayerNorms: what ``nn.TransformerEncoderLayer``
    and ``nn.TransformerDecoderLayer`` hold. At 512 / 8 heads / 2048 the FFN is 2/3 of an encoder
    layer.
    """
    _checks.require_positive("d_model", d_model)
    _checks.require_positive("num_heads", num_heads)
    _checks.require_positive("d_ff", d_ff)
    if d_model % num_heads:
        raise ValueError(
            f"d_model = {d_model} does not split into num_heads = {num_heads} equal heads"
        )
    attentions, norms = (2, 3) if decoder else (1, 2)
    return {
        "attention": attentions * parameter_count(d_model, num_heads),
        "ffn": ffn_parameter_count(d_model, d_ff),
        "norms": norms * 2 * d_model,
    }

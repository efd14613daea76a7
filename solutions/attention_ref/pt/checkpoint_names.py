"""Lesson 14, A checkpoint's tensors mapped onto the course's layers -- PyTorch reference.

A Hugging Face checkpoint names each tensor by the module that holds it
(``model.layers.3.self_attn.q_proj.weight``) and stores it in that module's layout:

* ``nn.Linear`` keeps its weight as ``(out_features, in_features)`` and computes ``x @ W.T``;
  the course computes ``x @ W`` with ``W`` ``(in, out)`` (lesson 4), so every linear weight is
  transposed on the way in. A square one (``o_proj`` when ``h * head_dim = d_model``) fits either
  way round, and only the outputs tell the difference;
* GLM-4 fuses the gate and up projections into one ``gate_up_proj`` ``(2 d_ff, d)``: the gate is
  its first half of rows, the up projection its second;
* gpt-oss stores its experts as parameters of its own, already ``(experts, in, out)`` (no
  transpose), and its ``gate_up_proj`` interleaves them: gate in the even columns, up in the odd;
* a model that ties its output layer to its embedding (``tie_word_embeddings``, Qwen3's small
  models) stores no ``lm_head.weight``: the logits are ``h @ embed.T``.

``checkpoint_shapes(spec)`` lists every tensor a family's checkpoint holds with its shape;
``params_from_checkpoint(config, tensors)`` builds the course's parameters (a dict with a list of
one dict per layer), refusing a missing tensor or one of another shape with a ValueError that names
it. ``random_checkpoint(family, seed)`` writes the config and tensors of a small random model in
exactly ``transformers``' format (the reference tests check that ``transformers`` loads it
strictly and computes the same logits); ``tiny_config(family)`` is its config.
"""

from __future__ import annotations

import torch

from .mxfp4 import dequantize_mxfp4, mxfp4_shapes
from .open_model import ModelSpec, spec_from_config

__all__ = ["checkpoint_shapes", "params_from_checkpoint", "tiny_config", "random_checkpoint"]


def _layer_shapes(spec: ModelSpec) -> dict:
    """The tensors of one layer: name (after ``model.layers.{i}.``) -> shape."""
    d, hd, kv = spec.d_model, spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    shapes = {"input_layernorm.weight": (d,), "post_attention_layernorm.weight": (d,)}
    for name, out in (("q", hd), ("k", kv), ("v", kv)):
        shapes[f"self_attn.{name}_proj.weight"] = (out, d)
        if spec.qkv_bias:
            shapes[f"self_attn.{name}_proj.bias"] = (out,)
    shapes["self_attn.o_proj.weight"] = (d, hd)
    if spec.o_bias:
        shapes["self_attn.o_proj.bias"] = (d,)
    if spec.qk_norm:
        shapes |= {
            "self_attn.q_norm.weight": (spec.head_dim,),
            "self_attn.k_norm.weight": (spec.head_dim,),
        }
    if spec.sinks:
        shapes["self_attn.sinks"] = (spec.num_heads,)
    if spec.post_norms:
        shapes |= {"post_self_attn_layernorm.weight": (d,), "post_mlp_layernorm.weight": (d,)}
    return shapes | _mlp_shapes(spec)


def _mlp_shapes(spec: ModelSpec) -> dict:
    d, f, e = spec.d_model, spec.d_ff, spec.num_experts
    if spec.mlp == "moe" and spec.mxfp4_experts:  # as published: MXFP4 blocks and scales
        (gate_up, gate_up_scales), (down, down_scales) = (
            mxfp4_shapes(e, 2 * f, d),
            mxfp4_shapes(e, d, f),
        )
        return {
            "mlp.router.weight": (e, d), "mlp.router.bias": (e,),
            "mlp.experts.gate_up_proj_blocks": gate_up,
            "mlp.experts.gate_up_proj_scales": gate_up_scales,
            "mlp.experts.gate_up_proj_bias": (e, 2 * f),
            "mlp.experts.down_proj_blocks": down, "mlp.experts.down_proj_scales": down_scales,
            "mlp.experts.down_proj_bias": (e, d),
        }  # fmt: skip
    if spec.mlp == "moe":
        return {
            "mlp.router.weight": (e, d), "mlp.router.bias": (e,),
            "mlp.experts.gate_up_proj": (e, d, 2 * f), "mlp.experts.gate_up_proj_bias": (e, 2 * f),
            "mlp.experts.down_proj": (e, f, d), "mlp.experts.down_proj_bias": (e, d),
        }  # fmt: skip
    if spec.family == "glm4":
        return {"mlp.gate_up_proj.weight": (2 * f, d), "mlp.down_proj.weight": (d, f)}
    return {
        "mlp.gate_proj.weight": (f, d),
        "mlp.up_proj.weight": (f, d),
        "mlp.down_proj.weight": (d, f),
    }


def checkpoint_shapes(spec: ModelSpec) -> dict:
    """Every tensor of the family's checkpoint, ``name -> shape``, in ``transformers``' names."""
    shapes = {"model.embed_tokens.weight": (spec.vocab_size, spec.d_model)}
    for layer in range(spec.num_layers):
        shapes |= {f"model.layers.{layer}.{n}": s for n, s in _layer_shapes(spec).items()}
    shapes["model.norm.weight"] = (spec.d_model,)
    if not spec.tie_embeddings:
        shapes["lm_head.weight"] = (spec.vocab_size, spec.d_model)
    return shapes


def _taker(tensors: dict, shapes: dict):
    """``take(name)``: the tensor ``name``, checked against the shape the config implies."""

    def take(name: str) -> torch.Tensor:
        if name not in tensors:
            raise ValueError(f"the checkpoint has no tensor {name} (shape {shapes[name]} expected)")
        t = tensors[name]
        if tuple(t.shape) != tuple(shapes[name]):
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} in the checkpoint, but the config implies "
                f"{tuple(shapes[name])}"
            )
        return t

    return take


def _attention_params(take, spec: ModelSpec, prefix: str) -> dict:
    p = {"attn_norm": take(prefix + "input_layernorm.weight"),
         "mlp_norm": take(prefix + "post_attention_layernorm.weight")}  # fmt: skip
    for name in ("q", "k", "v", "o"):
        p["w_" + name] = take(f"{prefix}self_attn.{name}_proj.weight").T  # (out, in) -> (in, out)
        if spec.o_bias if name == "o" else spec.qkv_bias:
            p["b_" + name] = take(f"{prefix}self_attn.{name}_proj.bias")
    if spec.qk_norm:
        p["q_norm"], p["k_norm"] = (
            take(prefix + "self_attn.q_norm.weight"),
            take(prefix + "self_attn.k_norm.weight"),
        )
    if spec.sinks:
        p["sinks"] = take(prefix + "self_attn.sinks")
    if spec.post_norms:
        p["post_attn_norm"] = take(prefix + "post_self_attn_layernorm.weight")
        p["post_mlp_norm"] = take(prefix + "post_mlp_layernorm.weight")
    return p


def _experts(take, spec: ModelSpec, prefix: str, dtype) -> tuple:
    """gpt-oss's ``gate_up_proj`` and ``down_proj`` ``(experts, in, out)``: as stored, or
    dequantized from their MXFP4 blocks and scales into ``dtype``."""
    names = (prefix + "mlp.experts.gate_up_proj", prefix + "mlp.experts.down_proj")
    if not spec.mxfp4_experts:
        return tuple(take(name) for name in names)
    return tuple(
        dequantize_mxfp4(take(name + "_blocks"), take(name + "_scales"), dtype) for name in names
    )


def _mlp_params(take, spec: ModelSpec, prefix: str) -> dict:
    if spec.mlp == "moe":
        router = take(prefix + "mlp.router.weight")
        (gate_up, down), bias = (
            _experts(take, spec, prefix, router.dtype),
            take(prefix + "mlp.experts.gate_up_proj_bias"),
        )
        return {
            "router_w": router.T,
            "router_b": take(prefix + "mlp.router.bias"),
            "expert_gate": gate_up[..., 0::2], "expert_up": gate_up[..., 1::2],  # interleaved
            "expert_gate_b": bias[..., 0::2], "expert_up_b": bias[..., 1::2],
            "expert_down": down,  # already (experts, in, out)
            "expert_down_b": take(prefix + "mlp.experts.down_proj_bias"),
        }  # fmt: skip
    if spec.family == "glm4":
        gate, up = take(prefix + "mlp.gate_up_proj.weight").T.chunk(2, dim=-1)  # gate rows first
        return {"w_gate": gate, "w_up": up, "w_down": take(prefix + "mlp.down_proj.weight").T}
    return {
        "w_gate": take(prefix + "mlp.gate_proj.weight").T,
        "w_up": take(prefix + "mlp.up_proj.weight").T,
        "w_down": take(prefix + "mlp.down_proj.weight").T,
    }


def params_from_checkpoint(config: dict, tensors: dict) -> dict:
    """The course's parameters of a checkpoint (``config.json`` as a dict, its tensors by name):
    ``{"embed", "layers": [one dict per layer], "norm", "lm_head" (d_model, vocab)}``; a ValueError
    naming any tensor that is missing or whose shape is not the config's."""
    spec = spec_from_config(config)
    take = _taker(tensors, checkpoint_shapes(spec))
    layers = []
    for layer in range(spec.num_layers):
        prefix = f"model.layers.{layer}."
        layers.append(_attention_params(take, spec, prefix) | _mlp_params(take, spec, prefix))
    embed = take("model.embed_tokens.weight")
    lm_head = embed.T if spec.tie_embeddings else take("lm_head.weight").T
    return {"embed": embed, "layers": layers, "norm": take("model.norm.weight"), "lm_head": lm_head}


_TINY = {"vocab_size": 128, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16, "rms_norm_eps": 1e-6, "bos_token_id": None, "eos_token_id": None,
         "pad_token_id": 0, "dtype": "float32"}  # fmt: skip
_FAMILY_CONFIGS = {
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "intermediate_size": 96,
              "num_hidden_layers": 3, "max_position_embeddings": 40960,
              "tie_word_embeddings": True, "attention_bias": False,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
    "gpt_oss": {"architectures": ["GptOssForCausalLM"], "intermediate_size": 32,
                "num_hidden_layers": 4, "max_position_embeddings": 131072,
                "tie_word_embeddings": False,
                "attention_bias": True, "sliding_window": 8, "num_local_experts": 4,
                "num_experts_per_tok": 2, "swiglu_limit": 7.0, "rms_norm_eps": 1e-5,
                "layer_types": ["sliding_attention", "full_attention"] * 2,
                "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                    "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                                    "beta_slow": 1.0, "truncate": False}},
    "glm4": {"architectures": ["Glm4ForCausalLM"], "intermediate_size": 96, "num_hidden_layers": 2,
             "max_position_embeddings": 32768, "tie_word_embeddings": False, "attention_bias": True,
             "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                 "partial_rotary_factor": 0.5}},
}  # fmt: skip


def tiny_config(family: str, **overrides) -> dict:
    """The ``config.json`` (a dict) of a small model of ``family``: 64 wide, 4 query heads of 16
    over 2 key/value heads, a vocabulary of 128; the family's own layer pattern and RoPE."""
    if family not in _FAMILY_CONFIGS:
        raise ValueError(f"family must be one of {sorted(_FAMILY_CONFIGS)}, got {family!r}")
    return {"model_type": family} | _TINY | _FAMILY_CONFIGS[family] | overrides


def _random_tensor(name: str, shape: tuple, gen: torch.Generator) -> torch.Tensor:
    """Random numbers at a scale that keeps every layer's activations near 1: norms' weights near
    1, biases and sinks small but not zero, matrices of variance 1 / fan-in."""
    noise = torch.randn(shape, generator=gen)
    if "norm" in name:
        return 1.0 + 0.2 * noise
    if name.endswith("bias") or name.endswith("sinks"):
        return 0.5 * noise
    if "embed" in name:
        return noise
    fan_in = shape[-2] if "experts" in name else shape[-1]  # experts: (experts, in, out)
    gain = 2.0 if name == "lm_head.weight" else 1.0
    return gain * noise / fan_in**0.5


def random_checkpoint(family: str, seed: int = 0, **overrides) -> tuple[dict, dict]:
    """``(config, tensors)`` of a small random ``family`` model in ``transformers``' format: the
    config of ``tiny_config(family, **overrides)``, float32 tensors by name, drawn from ``seed``."""
    config = tiny_config(family, **overrides)
    gen = torch.Generator().manual_seed(seed)
    shapes = checkpoint_shapes(spec_from_config(config))
    return config, {name: _random_tensor(name, shape, gen) for name, shape in shapes.items()}

"""Lesson 14, A real open model, with the course's attention -- PyTorch reference: three families of
decoder-only models read from their Hugging Face ``config.json`` and run layer by layer.

``spec_from_config(config)`` reads what the layers need from a config (a dict, as
``config.json`` holds it) into a ``ModelSpec``: the sizes, the kind of each layer (full or
sliding-window), the rotary embedding's parameters, layout and width, and the traits of the
family:

==========  ======================  ========  =====  ==========  =========================
family      RoPE layout and width   QK-norm   sinks  extra norms feed-forward
==========  ======================  ========  =====  ==========  =========================
qwen3       half, whole head        yes       no     no          SwiGLU
gpt_oss     half, whole head, YaRN  no        yes    no          mixture of SwiGLU experts
glm4        interleaved, partial    no        no     yes         SwiGLU (one fused matrix)
==========  ======================  ========  =====  ==========  =========================

``model_forward(params, spec, tokens, caches, start, layer_outputs)`` runs the model (params as
``attention_ref.pt.checkpoint_names.params_from_checkpoint`` lays them out); ``greedy_generate``
decodes with one KV cache per layer, token by token; ``first_difference`` names the first layer
whose output differs between two runs (the reference tests hook ``transformers``' layers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .norms import rms_norm
from .open_blocks import attention_block, gpt_oss_moe, swiglu

__all__ = [
    "FAMILIES",
    "ModelSpec",
    "spec_from_config",
    "open_layer",
    "model_forward",
    "new_caches",
    "greedy_generate",
    "first_difference",
    "cache_bytes",
]

# what each family's layers are made of, beyond what its config says
FAMILIES = {
    "qwen3": {"rope_layout": "half", "qk_norm": True, "sinks": False, "post_norms": False,
              "mlp": "swiglu", "o_bias": True},
    "gpt_oss": {"rope_layout": "half", "qk_norm": False, "sinks": True, "post_norms": False,
                "mlp": "moe", "o_bias": True},
    "glm4": {"rope_layout": "interleaved", "qk_norm": False, "sinks": False, "post_norms": True,
             "mlp": "swiglu", "o_bias": False},
}  # fmt: skip
LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class ModelSpec:
    """What the layers of a model need from its config (see the module's docstring)."""

    family: str
    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    d_ff: int
    eps: float
    layer_types: tuple
    window: int | None
    rope: dict = field(compare=False)
    rotary_dim: int
    rope_layout: str
    qk_norm: bool
    sinks: bool
    qkv_bias: bool
    o_bias: bool
    post_norms: bool
    mlp: str
    tie_embeddings: bool
    num_experts: int = 0
    top_k: int = 0
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0


def _layer_types(config: dict, num_layers: int) -> tuple:
    types = tuple(config.get("layer_types") or ["full_attention"] * num_layers)
    unknown = sorted(set(types) - set(LAYER_TYPES))
    if len(types) != num_layers or unknown:
        raise ValueError(
            f"layer_types must name one of {LAYER_TYPES} for each of the {num_layers} layers, "
            f"got {list(types)}"
        )
    if "sliding_attention" in types and not config.get("sliding_window"):
        raise ValueError("the config has sliding-window layers but no sliding_window")
    return types


def _rope(config: dict, head_dim: int) -> tuple[dict, int]:
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if "type" in rope:  # the older key of rope_scaling
        rope.setdefault("rope_type", rope.pop("type"))
    rope.setdefault("rope_type", "default")
    rope.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    share = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    return rope, int(head_dim * share)


def spec_from_config(config: dict) -> ModelSpec:
    """The ``ModelSpec`` of a Hugging Face ``config.json`` (a dict) of a Qwen3, gpt-oss or GLM-4
    model; a ValueError naming what does not fit."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"model_type {family!r} is not one of {sorted(FAMILIES)}")
    traits = FAMILIES[family]
    layers, heads = int(config["num_hidden_layers"]), int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    rope, rotary_dim = _rope(config, head_dim)
    types = _layer_types(config, layers)
    bias = bool(config.get("attention_bias", False))
    window = config.get("sliding_window") if "sliding_attention" in types else None
    return ModelSpec(
        family=family, vocab_size=int(config["vocab_size"]), d_model=int(config["hidden_size"]),
        num_layers=layers, num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads", heads)), head_dim=head_dim,
        d_ff=int(config["intermediate_size"]), eps=float(config["rms_norm_eps"]),
        layer_types=types, window=window, rope=rope, rotary_dim=rotary_dim,
        rope_layout=traits["rope_layout"], qk_norm=traits["qk_norm"], sinks=traits["sinks"],
        qkv_bias=bias, o_bias=bias and traits["o_bias"], post_norms=traits["post_norms"],
        mlp=traits["mlp"], tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        num_experts=int(config.get("num_local_experts", 0)),
        top_k=int(config.get("num_experts_per_tok", 0)),
        swiglu_alpha=float(config.get("swiglu_alpha", 1.702)),
        swiglu_limit=float(config.get("swiglu_limit", 7.0)),
    )  # fmt: skip


def open_layer(h, p: dict, spec: ModelSpec, layer: int, start: int = 0, cache=None, attend=None):
    """One pre-norm decoder layer: ``h + attention(norm(h))``, then ``+ feed_forward(norm(.))``
    (GLM-4 normalises each sub-layer's output too, before the residual); ``attend``: see
    ``attention_block``."""
    a = attention_block(rms_norm(h, p["attn_norm"], spec.eps), p, spec, layer, start, cache, attend)
    if spec.post_norms:
        a = rms_norm(a, p["post_attn_norm"], spec.eps)
    h = h + a
    x = rms_norm(h, p["mlp_norm"], spec.eps)
    if spec.mlp == "moe":
        f = gpt_oss_moe(x, p, spec)
    else:
        f = swiglu(x, p["w_gate"], p["w_up"], p["w_down"])
    if spec.post_norms:
        f = rms_norm(f, p["post_mlp_norm"], spec.eps)
    return h + f


def model_forward(params: dict, spec: ModelSpec, tokens, caches=None, start: int = 0,
                  layer_outputs=None, attend=None) -> torch.Tensor:  # fmt: skip
    """Logits ``(batch, n, vocab)`` of the tokens ``(batch, n)`` at positions ``start ..
    start + n - 1``; ``caches``: one dict per layer (``new_caches``), or None; each layer's output
    is appended to ``layer_outputs`` when it is a list; ``attend``: see ``attention_block``."""
    h = params["embed"][tokens]
    for layer, p in enumerate(params["layers"]):
        cache = None if caches is None else caches[layer]
        h = open_layer(h, p, spec, layer, start, cache, attend)
        if layer_outputs is not None:
            layer_outputs.append(h)
    return rms_norm(h, params["norm"], spec.eps) @ params["lm_head"]


def new_caches(spec: ModelSpec) -> list:
    """One empty KV cache (a dict) per layer."""
    return [{} for _ in range(spec.num_layers)]


def greedy_generate(params: dict, spec: ModelSpec, prompt, max_new: int, forward=model_forward):
    """Greedy decoding with a KV cache, one token per call of ``forward`` (the prompt's too):
    returns the new tokens ``(batch, max_new)`` and the logits each was chosen from ``(batch,
    max_new, vocab)``."""
    tokens, caches, steps = prompt, new_caches(spec), []
    for position in range(prompt.shape[-1] + max_new - 1):
        logits = forward(params, spec, tokens[:, position : position + 1], caches, position)
        if position >= prompt.shape[-1] - 1:
            steps.append(logits[:, -1])
            tokens = torch.cat((tokens, logits[:, -1:].argmax(dim=-1)), dim=-1)
    return tokens[:, prompt.shape[-1] :], torch.stack(steps, dim=1)


def first_difference(ours, theirs, rtol: float = 1e-4, atol: float = 1e-4, names=None):
    """None if every pair ``ours[i]``, ``theirs[i]`` agrees within the tolerances; else a message
    that names the first that does not (``names[i]``, default "layer i") and by how much."""
    if len(ours) != len(theirs):
        return f"{len(ours)} outputs against {len(theirs)}: not the same number of layers"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        name = names[i] if names else f"layer {i}"
        a, b = a.detach().cpu().double(), b.detach().cpu().double()
        if a.shape != b.shape:
            return f"{name} differs first: shapes {tuple(a.shape)} and {tuple(b.shape)}"
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            return f"{name} differs first: by up to {(a - b).abs().max().item():.3g}"
    return None


def cache_bytes(caches) -> int:
    """The bytes of every tensor held in a list of per-layer caches (dicts)."""
    return sum(
        t.numel() * t.element_size()
        for cache in caches
        for t in cache.values()
        if isinstance(t, torch.Tensor)
    )

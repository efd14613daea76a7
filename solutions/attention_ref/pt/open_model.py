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
    "left_pad",
    "generate_batch",
    "first_difference",
    "cache_bytes",
]

# what each family's layers are made of, beyond what its config says
FAMILIES = {
    "qwen3": {"rope_layout": "half", "qk_norm": True, "sinks": False, "post_norms": False,
              "mlp": "swiglu", "o_bias": True, "norm_round_first": True},
    "gpt_oss": {"rope_layout": "half", "qk_norm": False, "sinks": True, "post_norms": False,
                "mlp": "moe", "o_bias": True, "norm_round_first": False},
    "glm4": {"rope_layout": "interleaved", "qk_norm": False, "sinks": False, "post_norms": True,
             "mlp": "swiglu", "o_bias": False, "norm_round_first": True},
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
    norm_round_first: bool = False
    mxfp4_experts: bool = False


# What transformers 5.23 fills in for every key the course reads when a config.json lacks it (the
# defaults of Qwen3Config, GptOssConfig and Glm4Config; the reference tests compare the two key by
# key). Hub configs leave out what their writer's version did not know: a missing key read with
# another default gives a model that runs and computes something else.
DEFAULTS = {
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
              "head_dim": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
              "attention_bias": False, "max_position_embeddings": 32768, "rope_theta": 10000.0,
              "partial_rotary_factor": 1.0, "use_sliding_window": False, "sliding_window": 4096,
              "max_window_layers": 28},
    "gpt_oss": {"vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
                "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8,
                "head_dim": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                "attention_bias": True, "max_position_embeddings": 131072,
                "rope_theta": 150000.0, "partial_rotary_factor": 1.0, "sliding_window": 128,
                "num_local_experts": 128, "num_experts_per_tok": 4, "swiglu_alpha": 1.702,
                "swiglu_limit": 7.0,
                "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                    "beta_slow": 1.0, "truncate": False,
                                    "original_max_position_embeddings": 4096}},
    "glm4": {"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696,
             "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2,
             "head_dim": 128, "rms_norm_eps": 1.5625e-07, "tie_word_embeddings": False,
             "attention_bias": True, "max_position_embeddings": 131072, "rope_theta": 10000.0,
             "partial_rotary_factor": 0.5},
}  # fmt: skip


def _value(config: dict, family: str, key: str):
    """``config[key]``, or transformers' default where the config lacks the key."""
    return config[key] if key in config else DEFAULTS[family].get(key)


def _layer_types(config: dict, family: str, num_layers: int) -> tuple:
    types = config.get("layer_types")
    if types is None and family == "gpt_oss":  # even layers local: (i + 1) % 2
        types = [
            "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(num_layers)
        ]
    if types is None and family == "qwen3" and _window(config, family) is not None:
        first = _value(config, family, "max_window_layers")  # Qwen3: local from this layer on
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(num_layers)]
    types = tuple(types or ["full_attention"] * num_layers)
    unknown = sorted(set(types) - set(LAYER_TYPES))
    if len(types) != num_layers or unknown:
        raise ValueError(
            f"layer_types must name one of {LAYER_TYPES} for each of the {num_layers} layers, "
            f"got {list(types)}"
        )
    if "sliding_attention" in types and not _window(config, family):
        raise ValueError("the config has sliding-window layers but no sliding_window")
    return types


def _window(config: dict, family: str):
    """The sliding window (Qwen3's only when use_sliding_window says so; GLM-4 has none)."""
    if family == "glm4" or (family == "qwen3" and not _value(config, family, "use_sliding_window")):
        return None
    return _value(config, family, "sliding_window")


def _rope(config: dict, family: str, head_dim: int) -> tuple[dict, int]:
    """The rope dict as transformers 5 holds it (``rope_parameters``), from either form of the
    config: transformers 5's ``rope_parameters``, or the hub's ``rope_scaling`` with a top-level
    ``rope_theta`` (and GLM-4's top-level ``partial_rotary_factor``); and the rotary width."""
    given = config.get("rope_scaling") or config.get("rope_parameters")
    rope = dict(given or DEFAULTS[family].get("rope_parameters") or {})
    if "type" in rope:  # the older key of rope_scaling
        rope.setdefault("rope_type", rope.pop("type"))
    rope.setdefault("rope_type", "default")
    rope.setdefault("rope_theta", _value(config, family, "rope_theta"))
    if rope["rope_type"] == "yarn":
        context = config.get("original_max_position_embeddings")  # top level first, as Phi-3's
        rope.setdefault("original_max_position_embeddings",
                        context or _value(config, family, "max_position_embeddings"))  # fmt: skip
    share = rope.get("partial_rotary_factor", _value(config, family, "partial_rotary_factor"))
    return rope, int(head_dim * share)


def _sizes(config: dict, family: str) -> dict:
    heads = int(_value(config, family, "num_attention_heads"))
    kv_heads = _value(config, family, "num_key_value_heads")
    head_dim = _value(config, family, "head_dim")
    return {
        "vocab_size": int(_value(config, family, "vocab_size")),
        "d_model": int(_value(config, family, "hidden_size")),
        "num_layers": int(_value(config, family, "num_hidden_layers")),
        "num_heads": heads,
        "num_kv_heads": heads if kv_heads is None else int(kv_heads),
        "head_dim": int(head_dim or _value(config, family, "hidden_size") // heads),
        "d_ff": int(_value(config, family, "intermediate_size")),
        "eps": float(_value(config, family, "rms_norm_eps")),
    }


def spec_from_config(config: dict) -> ModelSpec:
    """The ``ModelSpec`` of a Hugging Face ``config.json`` (a dict) of a Qwen3, gpt-oss or GLM-4
    model, as published on the hub or as transformers 5 writes it, every key it lacks filled as
    transformers fills it (``DEFAULTS``); a ValueError naming what does not fit."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"model_type {family!r} is not one of {sorted(FAMILIES)}")
    traits, sizes = FAMILIES[family], _sizes(config, family)
    rope, rotary_dim = _rope(config, family, sizes["head_dim"])
    types = _layer_types(config, family, sizes["num_layers"])
    bias = bool(_value(config, family, "attention_bias"))
    quantization = config.get("quantization_config") or {}
    return ModelSpec(
        family=family, **sizes, layer_types=types,
        window=_window(config, family) if "sliding_attention" in types else None,
        rope=rope, rotary_dim=rotary_dim, rope_layout=traits["rope_layout"],
        qk_norm=traits["qk_norm"], sinks=traits["sinks"], qkv_bias=bias,
        o_bias=bias and traits["o_bias"], post_norms=traits["post_norms"], mlp=traits["mlp"],
        tie_embeddings=bool(_value(config, family, "tie_word_embeddings")),
        num_experts=int(_value(config, family, "num_local_experts") or 0),
        top_k=int(_value(config, family, "num_experts_per_tok") or 0),
        swiglu_alpha=float(_value(config, family, "swiglu_alpha") or 1.702),
        swiglu_limit=float(_value(config, family, "swiglu_limit") or 7.0),
        norm_round_first=traits["norm_round_first"],
        mxfp4_experts=quantization.get("quant_method") == "mxfp4",
    )  # fmt: skip


def open_layer(h, p: dict, spec: ModelSpec, layer: int, start: int = 0, cache=None, attend=None,
               pad=None):  # fmt: skip
    """One pre-norm decoder layer: ``h + attention(norm(h))``, then ``+ feed_forward(norm(.))``
    (GLM-4 normalises each sub-layer's output too, before the residual); ``attend``, ``pad``:
    see ``attention_block``."""

    def norm(v, weight):
        return rms_norm(v, weight, spec.eps, spec.norm_round_first)

    a = attention_block(norm(h, p["attn_norm"]), p, spec, layer, start, cache, attend, pad)
    if spec.post_norms:
        a = norm(a, p["post_attn_norm"])
    h = h + a
    x = norm(h, p["mlp_norm"])
    if spec.mlp == "moe":
        f = gpt_oss_moe(x, p, spec)
    else:
        f = swiglu(x, p["w_gate"], p["w_up"], p["w_down"])
    if spec.post_norms:
        f = norm(f, p["post_mlp_norm"])
    return h + f


def model_forward(params: dict, spec: ModelSpec, tokens, caches=None, start: int = 0,
                  layer_outputs=None, attend=None, pad=None) -> torch.Tensor:  # fmt: skip
    """Logits ``(batch, n, vocab)`` of the tokens ``(batch, n)`` at indices ``start ..
    start + n - 1``; ``caches``: one dict per layer (``new_caches``), or None; each layer's output
    is appended to ``layer_outputs`` when it is a list; ``attend``, ``pad`` (the left pads of each
    row): see ``attention_block``."""
    h = params["embed"][tokens]
    for layer, p in enumerate(params["layers"]):
        cache = None if caches is None else caches[layer]
        h = open_layer(h, p, spec, layer, start, cache, attend, pad)
        if layer_outputs is not None:
            layer_outputs.append(h)
    return rms_norm(h, params["norm"], spec.eps, spec.norm_round_first) @ params["lm_head"]


def new_caches(spec: ModelSpec) -> list:
    """One empty KV cache (a dict) per layer."""
    return [{} for _ in range(spec.num_layers)]


def greedy_generate(params: dict, spec: ModelSpec, prompt, max_new: int, forward=model_forward):
    """Greedy decoding with a KV cache, one token per call of ``forward`` (the prompt's too):
    returns the new tokens ``(batch, max_new)`` and the logits each was chosen from ``(batch,
    max_new, vocab)``."""
    if max_new < 1:
        return prompt[:, :0], torch.zeros(prompt.shape[0], 0, spec.vocab_size)
    tokens, caches, steps = prompt, new_caches(spec), []
    for position in range(prompt.shape[-1] + max_new - 1):
        logits = forward(params, spec, tokens[:, position : position + 1], caches, position)
        if position >= prompt.shape[-1] - 1:
            steps.append(logits[:, -1])
            tokens = torch.cat((tokens, logits[:, -1:].argmax(dim=-1)), dim=-1)
    return tokens[:, prompt.shape[-1] :], torch.stack(steps, dim=1)


def left_pad(prompts, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts of different lengths (1-D tensors or lists of ids) as one ``(batch, n)`` tensor,
    each padded with ``pad_id`` on the left to the longest, and ``pad`` ``(batch,)``: the number
    of pads of each row."""
    rows = [torch.as_tensor(p, dtype=torch.long) for p in prompts]
    if not rows or min(len(r) for r in rows) < 1:
        raise ValueError("every prompt needs at least one token")
    n = max(len(r) for r in rows)
    pad = torch.tensor([n - len(r) for r in rows])
    device = rows[0].device
    tokens = torch.stack(
        [torch.cat((torch.full((n - len(r),), pad_id, device=device), r.to(device))) for r in rows]
    )
    return tokens, pad


def generate_batch(params: dict, spec: ModelSpec, prompts, max_new: int, forward=model_forward,
                   pad_id: int = 0):  # fmt: skip
    """Greedy decoding of prompts of different lengths together: left-padded (``left_pad``), the
    padded prompts in one call of ``forward(params, spec, tokens, caches, start, pad=pad)``, then
    one token per call; one cache per layer holding every row. Returns the new tokens ``(batch,
    max_new)`` and the logits each was chosen from ``(batch, max_new, vocab)``."""
    tokens, pad = left_pad(prompts, pad_id)
    if max_new < 1:
        return tokens[:, :0], torch.zeros(tokens.shape[0], 0, spec.vocab_size)
    caches, steps, n = new_caches(spec), [], tokens.shape[1]
    logits = forward(params, spec, tokens, caches, 0, pad=pad)[:, -1]
    for position in range(n, n + max_new):
        steps.append(logits)
        tokens = torch.cat((tokens, logits.argmax(dim=-1, keepdim=True)), dim=-1)
        if position < n + max_new - 1:
            logits = forward(params, spec, tokens[:, -1:], caches, position, pad=pad)[:, -1]
    return tokens[:, n:], torch.stack(steps, dim=1)


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


def _held(value, seen: set) -> int:
    """The bytes ``value`` holds that ``seen`` has not counted yet: a tensor's whole storage (a
    view of a larger buffer keeps all of it alive), once per storage; containers walked."""
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        key = (value.device, storage.data_ptr(), storage.nbytes())
        if key in seen:
            return 0
        seen.add(key)
        return storage.nbytes()
    if isinstance(value, dict):
        return sum(_held(k, seen) + _held(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_held(v, seen) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return 8 if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    raise ValueError(
        f"a cache holds a {type(value).__name__}: the course counts tensors, numbers, strings, "
        "bytes, and dicts, lists and tuples of them"
    )


def cache_bytes(caches) -> int:
    """The bytes held by a list of per-layer caches (dicts): every tensor reached through their
    keys and values, lists, tuples and sets, each storage counted whole and once; a number 8
    bytes. A ValueError names anything else a cache holds."""
    seen: set = set()
    return sum(_held(cache, seen) for cache in caches)

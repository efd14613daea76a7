"""Lesson 14, Checkpoints as the Hugging Face hub publishes them -- the course's test folders.

The lesson's checkpoints are small and random, but laid out as the published ones are: the same
``config.json`` keys (the hub's files keep ``rope_theta`` at the top level and the scaling in
``rope_scaling``, where ``transformers`` 5 writes ``rope_parameters``), the same tensor names,
shapes and dtypes (bfloat16), the same files (one ``model.safetensors``, or shards listed by
``model.safetensors.index.json``), and gpt-oss's experts in MXFP4 (``attention_ref.pt.mxfp4``).

``PUBLISHED[family]`` records, for each family, the published model it copies, the address of its
``config.json``, every key and value of that file, and its tensors' files and formats. They were
transcribed from the files on the hub (Qwen/Qwen3-0.6B and openai/gpt-oss-20b checked again
against copies of those files quoted in public repositories; zai-org/GLM-4-9B-0414 against
``transformers``' ``Glm4Config``, whose defaults were written from it). ``TINY[family]`` lists each
value the course's folder changes, and why: only sizes and token ids; every other key is the
published one. What the folders do not share with the real ones: the sizes, and random weights.

``hub_config(family)`` is the tiny folder's ``config.json``; ``hub_tensors(family, seed)`` its
tensors, by name, as the files hold them; ``HUB_FILES[family]`` how they are split into files.
"""

from __future__ import annotations

import torch

from .checkpoint_names import _random_tensor, checkpoint_shapes
from .mxfp4 import quantize_mxfp4
from .open_model import spec_from_config

__all__ = ["PUBLISHED", "TINY", "HUB_FILES", "hub_config", "hub_tensors"]

PUBLISHED = {
    "qwen3": {
        "repository": "Qwen/Qwen3-0.6B",
        "config_url": "https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json",
        "files": "one model.safetensors (1.5 GB), bfloat16; tied embeddings: no lm_head.weight",
        "config": {
            "architectures": ["Qwen3ForCausalLM"], "attention_bias": False,
            "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
            "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
            "initializer_range": 0.02, "intermediate_size": 3072,
            "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
            "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
            "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
            "vocab_size": 151936,
        },
    },
    "gpt_oss": {
        "repository": "openai/gpt-oss-20b",
        "config_url": "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json",
        "files": "three shards model-00000-of-00002 .. model-00002-of-00002.safetensors and their "
                 "index; experts in MXFP4 (uint8 blocks and scales), everything else bfloat16",
        "config": {
            "architectures": ["GptOssForCausalLM"], "attention_bias": True,
            "attention_dropout": 0.0, "eos_token_id": 200002, "experts_per_token": 4,
            "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
            "initial_context_length": 4096, "initializer_range": 0.02,
            "intermediate_size": 2880,
            "layer_types": ["sliding_attention", "full_attention"] * 12,
            "max_position_embeddings": 131072, "model_type": "gpt_oss",
            "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
            "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False,
            "pad_token_id": 199999,
            "quantization_config": {
                "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                           "model.embed_tokens", "lm_head"],
                "quant_method": "mxfp4"},
            "rms_norm_eps": 1e-05,
            "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                             "original_max_position_embeddings": 4096, "rope_type": "yarn",
                             "truncate": False},
            "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
            "swiglu_limit": 7.0, "tie_word_embeddings": False,
            "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088,
        },
    },
    "glm4": {
        "repository": "zai-org/GLM-4-9B-0414 (formerly THUDM/GLM-4-9B-0414)",
        "config_url": "https://huggingface.co/zai-org/GLM-4-9B-0414/blob/main/config.json",
        "files": "shards model-00001-of-0000N.safetensors and their index, bfloat16",
        "config": {
            "architectures": ["Glm4ForCausalLM"], "attention_bias": True,
            "attention_dropout": 0.0, "eos_token_id": [151329, 151336, 151338],
            "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
            "initializer_range": 0.02, "intermediate_size": 13696,
            "max_position_embeddings": 32768, "model_type": "glm4",
            "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 2,
            "pad_token_id": 151329, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "transformers_version": "4.51.3", "use_cache": True, "vocab_size": 151552,
        },
    },
}  # fmt: skip

_SIZES = "small enough for a laptop's CPU in a second"
_IDS = "ids of the course's tokenizer of 128 tokens (0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|>)"
TINY = {
    "qwen3": {"vocab_size": (128, _IDS), "hidden_size": (64, _SIZES),
              "intermediate_size": (96, _SIZES), "num_hidden_layers": (3, _SIZES),
              "max_window_layers": (3, "the number of layers, as published"),
              "num_attention_heads": (4, _SIZES), "num_key_value_heads": (2, _SIZES),
              "head_dim": (16, _SIZES), "bos_token_id": (0, _IDS), "eos_token_id": (2, _IDS)},
    "gpt_oss": {"vocab_size": (128, _IDS), "hidden_size": (64, _SIZES),
                "intermediate_size": (32, _SIZES), "num_hidden_layers": (4, _SIZES),
                "layer_types": (["sliding_attention", "full_attention"] * 2,
                                "the published pattern, for 4 layers"),
                "num_attention_heads": (4, _SIZES), "num_key_value_heads": (2, _SIZES),
                "head_dim": (16, _SIZES), "num_local_experts": (4, _SIZES),
                "experts_per_token": (2, _SIZES), "num_experts_per_tok": (2, _SIZES),
                "sliding_window": (8, "shorter than the tests' texts, as 128 is than real ones"),
                "eos_token_id": (2, _IDS), "pad_token_id": (0, _IDS)},
    "glm4": {"vocab_size": (128, _IDS), "hidden_size": (64, _SIZES),
             "intermediate_size": (96, _SIZES), "num_hidden_layers": (2, _SIZES),
             "num_attention_heads": (4, _SIZES), "head_dim": (16, _SIZES),
             "eos_token_id": ([0, 2], _IDS), "pad_token_id": (0, _IDS)},
}  # fmt: skip

# how the course's folders split their tensors into files, as the published ones do
HUB_FILES = {
    "qwen3": ["model.safetensors"],
    "gpt_oss": [f"model-0000{i}-of-00002.safetensors" for i in range(3)],
    "glm4": [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)],
}


def hub_config(family: str) -> dict:
    """The ``config.json`` of the course's folder of ``family``: the published keys and values,
    the sizes and token ids of ``TINY`` in place of the published ones."""
    if family not in PUBLISHED:
        raise ValueError(f"family must be one of {sorted(PUBLISHED)}, got {family!r}")
    config = PUBLISHED[family]["config"]
    tiny = {key: value for key, (value, _) in TINY[family].items()}
    assert set(tiny) <= set(config), "the tiny folder changes values, never the keys"
    return {key: tiny.get(key, value) for key, value in config.items()}


def hub_tensors(family: str, seed: int = 14) -> dict:
    """The tensors of the course's folder of ``family`` by name, as the files hold them: bfloat16,
    gpt-oss's experts as MXFP4 blocks and scales (uint8). The numbers are drawn as
    ``random_checkpoint`` draws them, then rounded to what the files can hold."""
    config = hub_config(family)
    shapes = checkpoint_shapes(spec_from_config({**config, "quantization_config": None}))
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape in shapes.items():
        t = _random_tensor(name, shape, gen)
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            tensors[name + "_blocks"], tensors[name + "_scales"] = quantize_mxfp4(t)
        else:
            tensors[name] = t.to(torch.bfloat16)
    return tensors

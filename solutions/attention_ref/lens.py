"""Lesson 15, The course's attention-only model in TransformerLens (optional: needs
``transformer_lens``, which nothing else in the library imports).

TransformerLens 4 runs every model through a ``TransformerBridge``; its own native transformer
(``transformer_lens.model_bridge.sources.native``) builds one from a config, with no Hugging Face
checkpoint, and accepts the weights of a ``HookedTransformer`` state dict (per-head ``W_Q``,
``W_K``, ``W_V`` of ``(heads, d_model, d_head)``, ``W_O`` of ``(heads, d_head, d_model)``) once
``convert_tl_checkpoint`` has laid them out its way. An ``AttentionOnly`` model is such a model
with ``attn_only=True``, ``normalization_type=None``, zero biases and its sinusoids as the learned
position table ``W_pos``.

``to_transformer_lens(model)`` -> a ``TransformerBridge`` with the model's weights (float32 or
float64, on the model's device): ``bridge(tokens)`` gives the same logits, ``bridge.run_with_cache``
the same attention patterns (``"blocks.{l}.attn.hook_pattern"``), ``bridge.OV`` and ``bridge.QK``
the same circuits (TransformerLens's ``FactoredMatrix``), and ``bridge.all_composition_scores("K")``
the K-composition scores of ``attention_ref.pt.circuits.k_composition_scores``.
"""

from __future__ import annotations

import torch


def _config(model):
    from transformer_lens.config import TransformerBridgeConfig

    return TransformerBridgeConfig(
        d_model=model.d_model,
        n_layers=model.num_layers,
        d_mlp=4 * model.d_model,  # unused: attn_only has no MLP
        d_head=model.d_head,
        n_heads=model.num_heads,
        n_ctx=model.n_ctx,
        d_vocab=model.vocab_size,
        act_fn="relu",
        attn_only=True,
        normalization_type=None,
        positional_embedding_type="standard",
        architecture="TransformerLensNative",
    )


def hooked_state_dict(model) -> dict[str, torch.Tensor]:
    """The model's weights under HookedTransformer's names and shapes, biases at zero."""
    h, dh, d = model.num_heads, model.d_head, model.d_model
    state = {
        "embed.W_E": model.W_E,
        "pos_embed.W_pos": model.W_pos,
        "unembed.W_U": model.W_U,
        "unembed.b_U": torch.zeros(model.vocab_size),
    }
    for layer in range(model.num_layers):
        prefix = f"blocks.{layer}.attn."
        for name, weights in (("Q", model.W_Q), ("K", model.W_K), ("V", model.W_V)):
            state[prefix + f"W_{name}"] = weights[layer]
            state[prefix + f"b_{name}"] = torch.zeros(h, dh)
        state[prefix + "W_O"] = model.W_O[layer]
        state[prefix + "b_O"] = torch.zeros(d)
    dtype, device = model.W_E.dtype, model.W_E.device
    return {k: v.detach().to(device=device, dtype=dtype).clone() for k, v in state.items()}


def to_transformer_lens(model):
    """A TransformerLens ``TransformerBridge`` that computes what ``model`` computes."""
    from transformer_lens.model_bridge.sources.native import boot
    from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

    config = _config(model)
    dtype, device = model.W_E.dtype, model.W_E.device
    bridge = boot(config, device=device, dtype=dtype)
    converted = convert_tl_checkpoint(hooked_state_dict(model), config)
    result = bridge.load_state_dict(converted, strict=True)
    if result.missing_keys or result.unexpected_keys:  # strict=True raises first; kept as a guard
        raise RuntimeError(f"TransformerLens weights do not fit: {result}")
    bridge.eval()
    return bridge

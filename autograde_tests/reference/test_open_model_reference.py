"""Lesson 14's three model families (Qwen3, gpt-oss, GLM-4) run by the course's library against
``transformers``' own implementation with the same weights: the checkpoint's names and shapes are
the ones ``transformers`` writes and loads strictly; every layer's output (hooked), the logits, and
greedy generation with a KV cache token by token agree, in float32 and float64; a folder written
by ``save_pretrained`` (one file or shards) loads; missing and misshapen tensors are refused by
name; the local layers' caches hold their window and no more; on every device present and on
PyTorch's meta device.

What needs ``transformers`` or ``safetensors`` skips, saying so, where they are not installed
(a bare GPU machine); the rest needs numpy, torch and pytest only."""

from __future__ import annotations

import pytest
import torch

import attention_ref.pt as rpt

FAMILIES = ["qwen3", "gpt_oss", "glm4"]
NO_TRANSFORMERS = "transformers is not installed here: the comparisons with it need it"


def _hf_config(config: dict):
    """``transformers``' config of ``config``, its mixtures of experts computed by the loop over
    experts ("eager"): the default grouped matrix product has no float64 and no meta kernel."""
    pytest.importorskip("transformers", reason=NO_TRANSFORMERS)
    from transformers import AutoConfig

    return AutoConfig.for_model(**config, experts_implementation="eager")


def _hf_model(config: dict, tensors: dict, dtype=torch.float32, device="cpu"):
    """``transformers``' model of ``config`` holding ``tensors`` (loaded strictly)."""
    hf_config = _hf_config(config)  # skips, saying why, where transformers is not installed
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(hf_config).eval()
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if config.get("tie_word_embeddings") else set()
    assert set(missing) == tied and not unexpected, (missing, unexpected)
    return model.to(device=device, dtype=dtype)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    """A family's random checkpoint, our spec and params, and transformers' model of it."""
    config, tensors = rpt.random_checkpoint(request.param, seed=14)
    spec = rpt.spec_from_config(config)
    return request.param, config, tensors, spec


def _hooked(model, tokens):
    """``transformers``' logits and each decoder layer's output, through forward hooks."""
    outputs = []
    hooks = [
        layer.register_forward_hook(
            lambda m, i, out: outputs.append(out[0] if isinstance(out, tuple) else out)
        )
        for layer in model.model.layers
    ]
    try:
        with torch.no_grad():
            logits = model(tokens).logits
    finally:
        for hook in hooks:
            hook.remove()
    return outputs, logits


def _to(params, **options):
    if isinstance(params, dict):
        return {k: _to(v, **options) for k, v in params.items()}
    if isinstance(params, list):
        return [_to(v, **options) for v in params]
    return params.to(**options)


def _tokens(n, batch=2, seed=0, device="cpu"):
    return torch.randint(0, 128, (batch, n), generator=torch.Generator().manual_seed(seed)).to(
        device
    )


def test_the_checkpoint_has_transformers_names_and_shapes(family):
    name, config, tensors, spec = family
    model = _hf_model(config, tensors)
    theirs = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if spec.tie_embeddings:
        theirs.pop("lm_head.weight")
    assert rpt.checkpoint_shapes(spec) == theirs


# transformers turns its float64 models' queries and keys by float32 angles: 1e-6 apart at best
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.float64, 1e-5)], ids=str)
def test_every_layer_and_the_logits_match_transformers(family, device, dtype, tol):
    name, config, tensors, spec = family
    model = _hf_model(config, tensors, dtype, device)
    params = _to(rpt.params_from_checkpoint(config, tensors), device=device, dtype=dtype)
    tokens = _tokens(20, device=device)  # longer than gpt-oss's window of 8
    theirs, their_logits = _hooked(model, tokens)
    ours = []
    with torch.no_grad():
        logits = rpt.model_forward(params, spec, tokens, layer_outputs=ours)
    assert rpt.first_difference(ours, theirs, rtol=tol, atol=tol) is None
    torch.testing.assert_close(logits, their_logits, rtol=tol, atol=tol)


def test_greedy_generation_with_a_cache_matches_transformers(family, device):
    name, config, tensors, spec = family
    model = _hf_model(config, tensors, torch.float64, device)
    params = _to(rpt.params_from_checkpoint(config, tensors), device=device, dtype=torch.float64)
    prompt = _tokens(5, seed=1, device=device)
    with torch.no_grad():
        new, step_logits = rpt.greedy_generate(params, spec, prompt, 14)
        theirs = model.generate(prompt, max_new_tokens=14, do_sample=False, output_logits=True,
                                return_dict_in_generate=True, pad_token_id=0)  # fmt: skip
    assert torch.equal(new, theirs.sequences[:, 5:])
    their_steps = torch.stack(theirs.logits, dim=1).double()  # generate hands them back in float32
    torch.testing.assert_close(step_logits, their_steps, rtol=1e-5, atol=1e-5)
    full = rpt.model_forward(params, spec, torch.cat((prompt, new), dim=-1))[:, 4:-1]
    torch.testing.assert_close(step_logits, full, rtol=1e-9, atol=1e-9)  # the cache changes nothing


def test_steps_of_several_tokens_match_the_whole_text(family):
    """A prompt in one step, then steps of 3 and 1 tokens: the causal mask offset by the cache."""
    name, config, tensors, spec = family
    params = _to(rpt.params_from_checkpoint(config, tensors), dtype=torch.float64)
    tokens = _tokens(21, seed=2)
    whole = rpt.model_forward(params, spec, tokens)
    caches, start, parts = rpt.new_caches(spec), 0, []
    for size in (11, 3, 1, 3, 3):
        parts.append(
            rpt.model_forward(params, spec, tokens[:, start : start + size], caches, start)
        )
        start += size
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=1e-10, atol=1e-10)
    for layer, cache in enumerate(caches):
        kept = 21 if spec.layer_types[layer] == "full_attention" else spec.window
        assert cache["k"].shape == (2, spec.num_kv_heads, kept, spec.head_dim), (
            layer,
            cache["k"].shape,
        )


def test_a_folder_written_by_save_pretrained_loads(family, tmp_path):
    pytest.importorskip("safetensors", reason="safetensors is not installed here")
    from attention_ref.checkpoints import load_checkpoint, read_checkpoint, write_checkpoint

    name, config, tensors, spec = family
    model = _hf_model(config, tensors)
    model.save_pretrained(tmp_path / "one")
    model.save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    assert (tmp_path / "shards" / "model.safetensors.index.json").exists()
    tokens = _tokens(9)
    _, want = _hooked(model, tokens)
    for folder in ("one", "shards"):
        loaded_spec, params = load_checkpoint(tmp_path / folder)
        assert loaded_spec == spec
        with torch.no_grad():
            torch.testing.assert_close(
                rpt.model_forward(params, spec, tokens), want, rtol=1e-4, atol=1e-4
            )
    ours = write_checkpoint(tmp_path / "ours", config, tensors)
    again_config, again = read_checkpoint(ours)
    assert again_config == config and set(again) == set(tensors)
    assert all(torch.equal(again[k], tensors[k]) for k in tensors)


def test_missing_and_misshapen_tensors_are_refused_by_name(family):
    name, config, tensors, spec = family
    gone = dict(tensors)
    del gone["model.layers.1.self_attn.k_proj.weight"]
    with pytest.raises(ValueError, match=r"no tensor model\.layers\.1\.self_attn\.k_proj\.weight"):
        rpt.params_from_checkpoint(config, gone)
    turned = dict(tensors)
    turned["model.layers.0.self_attn.q_proj.weight"] = tensors[
        "model.layers.0.self_attn.q_proj.weight"
    ][:, :-1]
    with pytest.raises(
        ValueError, match=r"q_proj\.weight has shape \(64, 63\).*implies \(64, 64\)"
    ):
        rpt.params_from_checkpoint(config, turned)
    with pytest.raises(ValueError, match="layer_types"):
        rpt.params_from_checkpoint(config | {"layer_types": ["full_attention"]}, tensors)


def test_the_model_runs_where_its_parameters_live(family):
    """On PyTorch's meta device (shapes only), as transformers' model does."""
    name, config, tensors, spec = family
    params = _to(rpt.params_from_checkpoint(config, tensors), device="meta")
    tokens = _tokens(6).to("meta")
    logits = rpt.model_forward(params, spec, tokens, rpt.new_caches(spec))
    assert logits.device.type == "meta" and logits.shape == (2, 6, 128)
    if spec.mlp == "moe":
        return  # transformers' gpt-oss reads which experts each token chose: values meta lacks
    hf_config = _hf_config(config)
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    assert model(tokens).logits.shape == logits.shape


def test_spec_refuses_what_it_cannot_run():
    config = rpt.tiny_config("qwen3")
    with pytest.raises(ValueError, match="model_type 'llama'"):
        rpt.spec_from_config(config | {"model_type": "llama"})
    with pytest.raises(ValueError, match="no sliding_window"):
        rpt.spec_from_config(config | {"layer_types": ["sliding_attention"] * 3})
    with pytest.raises(ValueError, match="family must be"):
        rpt.tiny_config("llama")


def test_spec_reads_the_older_config_format():
    """Configs written before transformers 5 keep rope_theta at the top and the scaling in
    rope_scaling (with "type"); Qwen3-0.6B's config.json on the hub is one."""
    older = {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
             "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
             "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
             "rope_scaling": None, "sliding_window": None, "tie_word_embeddings": True}  # fmt: skip
    spec = rpt.spec_from_config(older)
    assert spec.rope == {"rope_type": "default", "rope_theta": 1000000} and spec.rotary_dim == 128
    assert (
        spec.layer_types == ("full_attention",) * 28 and spec.window is None and spec.tie_embeddings
    )
    yarn = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert rpt.spec_from_config(older | {"rope_scaling": yarn}).rope == {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
        "rope_theta": 1000000,
    }  # fmt: skip


def test_first_difference_names_the_first_layer():
    a = [torch.zeros(2), torch.ones(2), torch.ones(2)]
    assert rpt.first_difference(a, [t.clone() for t in a]) is None
    b = [torch.zeros(2), torch.ones(2) * 1.5, torch.ones(2) * 9]
    assert rpt.first_difference(a, b) == "layer 1 differs first: by up to 0.5"
    assert "attention" in rpt.first_difference(a, b, names=["embed", "attention", "ffn"])
    assert "shapes" in rpt.first_difference([torch.zeros(3)], [torch.zeros(2)])
    assert "not the same number" in rpt.first_difference(a, a[:2])


def test_cache_bytes_counts_every_tensor(family):
    name, config, tensors, spec = family
    params = rpt.params_from_checkpoint(config, tensors)
    caches = rpt.new_caches(spec)
    with torch.no_grad():
        rpt.model_forward(params, spec, _tokens(12, batch=1), caches)
    kept = sum(
        12 if t == "full_attention" else min(12, spec.window or 12) for t in spec.layer_types
    )
    assert rpt.cache_bytes(caches) == kept * 2 * spec.num_kv_heads * spec.head_dim * 4


MORE_CONFIGURATIONS = {
    # h * head_dim != d_model, 4 query heads per key/value head (Qwen3-0.6B: 16 x 128 over 1,024)
    "qwen3, head_dim 32, 8 heads over 2": ("qwen3", {"head_dim": 32, "num_attention_heads": 8}),
    "qwen3 untied, with biases": ("qwen3", {"tie_word_embeddings": False, "attention_bias": True}),
    "qwen3, YaRN s = 4 from 16 positions": ("qwen3", {"rope_parameters": {
        "rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
        "original_max_position_embeddings": 16}}),
    "gpt_oss, window 5, YaRN from 16 positions": ("gpt_oss", {
        "sliding_window": 5, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
        "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False}}),
    "glm4, head_dim 24, partial 0.5": ("glm4", {"head_dim": 24}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MORE_CONFIGURATIONS))
def test_more_configurations_match_transformers(case):
    """Shapes and scalings the tiny checkpoints do not have: 48 positions (past YaRN's original
    16), float64, every logit and 30 greedy tokens."""
    family, overrides = MORE_CONFIGURATIONS[case]
    config, tensors = rpt.random_checkpoint(family, seed=41, **overrides)
    spec = rpt.spec_from_config(config)
    model = _hf_model(config, tensors, torch.float64)
    params = _to(rpt.params_from_checkpoint(config, tensors), dtype=torch.float64)
    tokens = _tokens(48, seed=4)
    with torch.no_grad():
        _, theirs = _hooked(model, tokens)
        torch.testing.assert_close(
            rpt.model_forward(params, spec, tokens), theirs, rtol=1e-5, atol=1e-5
        )
        new, _ = rpt.greedy_generate(params, spec, tokens[:, :6], 30)
        want = model.generate(tokens[:, :6], max_new_tokens=30, do_sample=False, pad_token_id=0)
    assert torch.equal(new, want[:, 6:])

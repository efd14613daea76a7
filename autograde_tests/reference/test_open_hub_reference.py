"""Lesson 14 as published: the course's checkpoint folders in the hub's layout (config.json keys,
bfloat16 shards and their index, gpt-oss's experts in MXFP4) load with ``transformers``'
``from_pretrained`` and give the course's logits and tokens; every config key the course reads is
filled as ``transformers`` fills it; MXFP4 dequantizes as ``transformers`` does; RMSNorm rounds in
bfloat16 as each family's own module; bfloat16 logits stay within bfloat16's drift of float64;
batches of left-padded prompts give each prompt's own tokens and ``transformers``' batched
``generate``; the chat template renders as ``apply_chat_template``; top-p keeps what
``TopPLogitsWarper`` keeps; the lazy reader reads only what it is asked; the cache's bytes count
everything a cache reaches.

What needs ``transformers``, ``safetensors``, ``jinja2`` or ``tokenizers`` skips, saying so, where
it is not installed (a bare GPU machine)."""

from __future__ import annotations

import json

import pytest
import torch

import attention_ref.pt as rpt

FAMILIES = ["qwen3", "gpt_oss", "glm4"]
NO_TRANSFORMERS = "transformers is not installed here: the comparisons with it need it"


def _transformers():
    return pytest.importorskip("transformers", reason=NO_TRANSFORMERS)


def _checkpoints():
    return pytest.importorskip(
        "attention_ref.checkpoints", reason="safetensors is not installed here"
    )


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The course's three folders in the hub's layout."""
    checkpoints = _checkpoints()
    root = tmp_path_factory.mktemp("hub")
    return {f: checkpoints.write_hub_checkpoint(root / f, f, seed=14) for f in FAMILIES}


def _hf_from_folder(folder, dtype=torch.float32):
    transformers = _transformers()
    config = json.loads((folder / "config.json").read_text())
    extra = {}
    if config.get("quantization_config"):  # MXFP4: dequantized, as on a machine without kernels
        extra["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, experts_implementation="eager", **extra
    ).eval()
    for experts in (m for m in model.modules() if type(m).__name__ == "GptOssExperts"):
        experts.to(dtype)  # transformers before 5.23 dequantizes into bfloat16 (exact: FP4 x 2^k)
    return model


def _tokens(n, batch=2, seed=0):
    return torch.randint(3, 128, (batch, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_hub_folders_have_the_published_keys_and_files(hub, family):
    folder = hub[family]
    config = json.loads((folder / "config.json").read_text())
    published = rpt.PUBLISHED[family]["config"]
    assert set(config) == set(published), "the tiny folder has the published keys, no more"
    changed = {k for k in config if config[k] != published[k]}
    assert changed == set(rpt.TINY[family]), "only the sizes and token ids differ"
    assert "rope_parameters" not in config  # the hub's form: rope_theta (and rope_scaling)
    files = sorted(p.name for p in folder.iterdir())
    sharded = family != "qwen3"
    assert ("model.safetensors.index.json" in files) == sharded
    dtypes = {t.dtype for t in _checkpoints().LazyTensors(folder).values()}
    assert dtypes == ({torch.bfloat16, torch.uint8} if family == "gpt_oss" else {torch.bfloat16})


@pytest.mark.parametrize("family", FAMILIES)
def test_transformers_loads_the_hub_folders_and_computes_the_same(hub, family):
    model = _hf_from_folder(hub[family])
    spec, params = _checkpoints().load_checkpoint(hub[family], torch.float32)
    tokens = _tokens(20)
    with torch.no_grad():
        theirs = model(tokens).logits
        ours = rpt.model_forward(params, spec, tokens)
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
        new, _ = rpt.greedy_generate(params, spec, tokens[:, :5], 14)
        want = model.generate(tokens[:, :5], max_new_tokens=14, do_sample=False, pad_token_id=0,
                              eos_token_id=None)[:, 5:]  # fmt: skip
    assert torch.equal(new, want)


def _hf_config_values(hf) -> dict:
    """What transformers' filled config says of every value the course's spec reads."""
    rope = dict(hf.rope_parameters)
    share = rope.pop("partial_rotary_factor", 1.0)
    return {
        "d_model": hf.hidden_size, "num_layers": hf.num_hidden_layers,
        "num_heads": hf.num_attention_heads, "num_kv_heads": hf.num_key_value_heads,
        "head_dim": hf.head_dim, "d_ff": hf.intermediate_size, "eps": hf.rms_norm_eps,
        "vocab_size": hf.vocab_size, "tie_embeddings": hf.tie_word_embeddings,
        "layer_types": tuple(getattr(hf, "layer_types", None)
                             or ["full_attention"] * hf.num_hidden_layers),
        "rope": rope, "rotary_dim": int(hf.head_dim * share),
        "window": getattr(hf, "sliding_window", None),
    }  # fmt: skip


READ_KEYS = ["head_dim", "num_key_value_heads", "rope_theta", "rope_scaling",
             "partial_rotary_factor", "rms_norm_eps", "tie_word_embeddings", "attention_bias",
             "layer_types", "sliding_window", "use_sliding_window", "max_window_layers",
             "num_local_experts", "num_experts_per_tok", "intermediate_size",
             "vocab_size"]  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("key", READ_KEYS)
def test_a_missing_key_is_filled_as_transformers_fills_it(family, key):
    """The hub config without ``key``: the spec reads what transformers' config holds."""
    transformers = _transformers()
    config = {
        k: v for k, v in rpt.hub_config(family).items() if k not in (key, "quantization_config")
    }
    hf = transformers.AutoConfig.for_model(**config)
    spec = rpt.spec_from_config(config)
    want = _hf_config_values(hf)
    got = {name: getattr(spec, name) for name in want}
    if "sliding_attention" not in got["layer_types"]:
        want["window"] = got["window"] = None  # no layer reads it
    assert got == want


def test_yarn_without_its_original_context_reads_max_position_embeddings():
    transformers = _transformers()
    config = rpt.hub_config("gpt_oss")
    rope = {
        k: v for k, v in config["rope_scaling"].items() if k != "original_max_position_embeddings"
    }
    config = config | {"rope_scaling": rope, "quantization_config": None}
    hf = transformers.AutoConfig.for_model(**config)
    spec = rpt.spec_from_config(config)
    assert spec.rope["original_max_position_embeddings"] == 131072
    assert spec.rope == dict(hf.rope_parameters)


def test_mxfp4_dequantizes_as_transformers_does():
    _transformers()
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    gen = torch.Generator().manual_seed(5)
    blocks = torch.randint(0, 256, (3, 40, 2, 16), generator=gen, dtype=torch.uint8)
    scales = torch.randint(100, 150, (3, 40, 2), generator=gen, dtype=torch.uint8)
    for dtype in (torch.bfloat16, torch.float32):
        want = convert_moe_packed_tensors(blocks, scales, dtype=dtype)
        assert torch.equal(rpt.dequantize_mxfp4(blocks, scales, dtype), want)
    weight = rpt.dequantize_mxfp4(blocks, scales, torch.float32)
    assert torch.equal(rpt.dequantize_mxfp4(*rpt.quantize_mxfp4(weight), torch.float32), weight)
    with pytest.raises(ValueError, match="uint8"):
        rpt.dequantize_mxfp4(blocks.float(), scales)


@pytest.mark.parametrize("family", FAMILIES)
def test_rms_norm_rounds_as_each_models_own_in_bfloat16(family):
    _transformers()
    from transformers.models.glm4.modeling_glm4 import Glm4RMSNorm
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRMSNorm
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    norm = {"qwen3": Qwen3RMSNorm, "gpt_oss": GptOssRMSNorm, "glm4": Glm4RMSNorm}[family](64, 1e-5)
    gen = torch.Generator().manual_seed(6)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(64, generator=gen))
        norm = norm.to(torch.bfloat16)
        x = (3 * torch.randn(5, 9, 64, generator=gen)).to(torch.bfloat16)
        want = norm(x)
    first = rpt.open_model.FAMILIES[family]["norm_round_first"]
    assert torch.equal(rpt.rms_norm(x, norm.weight, 1e-5, round_first=first), want)
    other = rpt.rms_norm(x, norm.weight, 1e-5, round_first=not first)
    assert (other != want).float().mean() > 0.05  # the other order is another function


@pytest.mark.parametrize("family", FAMILIES)
def test_bfloat16_logits_drift_within_bfloat16s_rounding(hub, family):
    """Both bfloat16 models (ours, transformers') near float64's logits, float32 far nearer."""
    spec, params = _checkpoints().load_checkpoint(hub[family])
    tokens = _tokens(24, batch=3, seed=8)

    def ours(dtype):
        with torch.no_grad():
            return rpt.model_forward(_to(params, dtype), spec, tokens).double()

    exact = ours(torch.float64)
    scale = exact.abs().max()
    with torch.no_grad():
        theirs16 = _hf_from_folder(hub[family], torch.bfloat16)(tokens).logits.double()
    assert (ours(torch.float32) - exact).abs().max() / scale < 1e-5
    bound = 0.5 if spec.mlp == "moe" else 0.05  # a router can flip on one rounding
    assert (ours(torch.bfloat16) - exact).abs().max() / scale < bound
    assert (theirs16 - exact).abs().max() / scale < bound


def _to(params, dtype):
    if isinstance(params, dict):
        return {k: _to(v, dtype) for k, v in params.items()}
    if isinstance(params, list):
        return [_to(v, dtype) for v in params]
    return params.to(dtype)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_batch_of_prompts_is_each_prompt_alone_and_transformers_batch(hub, family):
    spec, params = _checkpoints().load_checkpoint(hub[family], torch.float32)
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 128, (n,), generator=gen) for n in (3, 11, 7, 1)]
    with torch.no_grad():
        new, logits = rpt.generate_batch(params, spec, prompts, 12)
        for row, prompt in enumerate(prompts):
            alone, alone_logits = rpt.greedy_generate(params, spec, prompt[None], 12)
            assert torch.equal(new[row], alone[0])
            torch.testing.assert_close(logits[row], alone_logits[0], rtol=1e-4, atol=1e-4)
        tokens, pad = rpt.left_pad(prompts)
        mask = (torch.arange(tokens.shape[1])[None] >= pad[:, None]).long()
        theirs = _hf_from_folder(hub[family]).generate(
            tokens, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0,
            eos_token_id=None,
        )[:, tokens.shape[1]:]  # fmt: skip
    assert torch.equal(new, theirs)


def test_padding_keeps_each_rows_cached_keys():
    """The cache of a left-padded batch holds, per row, the keys the prompt has alone."""
    config, tensors = rpt.random_checkpoint("qwen3", seed=2)
    spec, params = rpt.spec_from_config(config), rpt.params_from_checkpoint(config, tensors)
    p = params["layers"][0]
    x = torch.randn(2, 7, 64, generator=torch.Generator().manual_seed(1))
    cache, alone = {}, {}
    rpt.attention_block(x, p, spec, 0, 0, cache, pad=torch.tensor([4, 0]))
    rpt.attention_block(x[:1, 4:], p, spec, 0, 0, alone)
    torch.testing.assert_close(cache["k"][:1, :, 4:], alone["k"])
    assert rpt.generate_batch(params, spec, [torch.tensor([5, 6])], 0)[0].shape == (1, 0)
    assert rpt.greedy_generate(params, spec, torch.tensor([[5, 6]]), 0)[1].shape == (1, 0, 128)


def test_the_lazy_reader_reads_only_what_it_is_asked(hub, tmp_path):
    checkpoints = _checkpoints()
    lazy = checkpoints.LazyTensors(hub["glm4"])
    broken = tmp_path / "glm4"
    broken.mkdir()
    for f in hub["glm4"].iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    (broken / "model-00002-of-00002.safetensors").write_bytes(b"not a safetensors file")
    partial = checkpoints.LazyTensors(broken, torch.float32)
    readable = [
        n for n, f in partial.files.items() if f.name.endswith("00001-of-00002.safetensors")
    ]
    assert readable and all(name in partial for name in partial.files)  # `in`: names only
    torch.testing.assert_close(partial[readable[0]], lazy[readable[0]].float())
    with pytest.raises(KeyError, match="no tensor nothing"):
        lazy["nothing"]
    config, tensors = checkpoints.read_checkpoint(hub["gpt_oss"], torch.float32)
    assert tensors["model.layers.0.mlp.router.weight"].dtype == torch.float32
    assert tensors["model.layers.0.mlp.experts.down_proj_blocks"].dtype == torch.uint8
    with pytest.raises(FileNotFoundError, match="neither"):
        checkpoints.tensor_files(tmp_path)


def test_the_cache_bytes_count_everything_a_cache_reaches():
    big = torch.zeros(10, 4)  # 160 bytes
    assert rpt.cache_bytes([{"k": big}]) == 160
    assert rpt.cache_bytes([{"k": big[-2:]}]) == 160  # a view keeps the whole storage
    assert rpt.cache_bytes([{"k": [big, big]}]) == 160  # once
    assert rpt.cache_bytes([{"k": [torch.zeros(3)], "v": (torch.zeros(2),)}]) == 20
    assert rpt.cache_bytes([{(1, 2): torch.zeros(1)}, {"n": 3}]) == 4 + 8 + 8 + 8
    with pytest.raises(ValueError, match="object"):
        rpt.cache_bytes([{"k": object()}])


def test_the_chat_template_renders_as_transformers_renders_it(tmp_path):
    pytest.importorskip("jinja2", reason="jinja2 is not installed here")
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed here")
    transformers = _transformers()
    from attention_ref.chat import CHATML, apply_chat_template

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=60, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator(["Beautiful is better than ugly.\nuser assistant system"], trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    thinking = CHATML.replace(
        "{{ '<|im_start|>assistant\\n' }}",
        "{{ '<|im_start|>assistant\\n' }}"
        "{% if enable_thinking is defined and not enable_thinking %}"
        "{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}",
    )
    conversation = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Is flat better than nested?"},
                    {"role": "assistant", "content": "Yes."},
                    {"role": "user", "content": "Why?"}]  # fmt: skip
    for template, variables in ((CHATML, {}), (thinking, {"enable_thinking": False})):
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
        theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
        for generation in (True, False):
            want = theirs.apply_chat_template(
                conversation, tokenize=False, add_generation_prompt=generation, **variables
            )
            assert apply_chat_template(template, conversation, generation, **variables) == want
    with pytest.raises(ValueError, match="role"):
        apply_chat_template(CHATML, ["hello"])


def test_top_p_keeps_what_transformers_keeps():
    _transformers()
    from transformers.generation.logits_process import TopPLogitsWarper

    logits = torch.randn(
        6, 50, generator=torch.Generator().manual_seed(4)
    )  # no probability underflows
    for top_p in (0.1, 0.5, 0.8, 0.95, 1.0):
        kept = rpt.top_p_distribution(logits, 0.7, top_p) > 0
        theirs = TopPLogitsWarper(top_p)(None, logits / 0.7) > -torch.inf
        assert torch.equal(kept, theirs), top_p
        torch.testing.assert_close(
            rpt.top_p_distribution(logits, 0.7, top_p).sum(-1), torch.ones(6)
        )
    with pytest.raises(ValueError, match="top_p"):
        rpt.top_p_distribution(logits, 1.0, 0.0)


def test_a_streamed_reply_stops_at_a_stop_token_and_decodes_piece_by_piece():
    config, tensors = rpt.random_checkpoint("qwen3", seed=3)
    spec, params = rpt.spec_from_config(config), rpt.params_from_checkpoint(config, tensors)
    prompt = torch.tensor([5, 9, 11])
    with torch.no_grad():
        greedy = list(rpt.stream_reply(rpt.model_forward, params, spec, prompt, 10, (), 0.0))
        want, _ = rpt.greedy_generate(params, spec, prompt[None], 10)
        assert greedy == want[0].tolist()
        stop = greedy[4]
        stopped = list(rpt.stream_reply(rpt.model_forward, params, spec, prompt, 10, (stop,), 0.0))
        assert stopped == greedy[: greedy.index(stop)]
        rng = torch.Generator().manual_seed(0)
        sampled = list(
            rpt.stream_reply(rpt.model_forward, params, spec, prompt, 10, (), 0.7, 0.8, rng)
        )
        assert len(sampled) == 10
    pieces = list(rpt.decode_stream(lambda ids: "".join(chr(97 + i % 26) for i in ids), [1, 2, 3]))
    assert pieces == ["b", "c", "d"]


def test_long_positions_turn_within_the_stated_tolerance_of_transformers():
    """float64 angles against transformers' float32 ones, at positions up to 131,071: within
    5e-3 (the lesson's statement), at 100 within 1e-5."""
    _transformers()
    from transformers import AutoConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

    config = rpt.hub_config("gpt_oss") | {"quantization_config": None}
    rotary = GptOssRotaryEmbedding(AutoConfig.for_model(**config))
    positions = torch.tensor([100, 4095, 20000, 65535, 131071])
    cos, _ = rotary(torch.zeros(1), positions[None])
    spec = rpt.spec_from_config(config)
    inv_freq, scale = rpt.rope_frequencies(spec.rope, spec.rotary_dim)
    ours = scale * torch.cos(positions.double()[:, None] * inv_freq)
    difference = (ours - cos[0, :, : spec.rotary_dim // 2].double()).abs().amax(dim=-1)
    assert difference[0] < 1e-5 and difference.max() < 5e-3

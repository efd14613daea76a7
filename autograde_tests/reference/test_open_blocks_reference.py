"""The pieces of lesson 14's attention block against PyTorch and ``transformers``: RMSNorm against
``F.rms_norm`` and the models' own norms; the rotary embedding through lesson 10's function and in
each family's layout (partial and YaRN-scaled included) against ``transformers``' rotary modules
and ``apply_rotary_pos_emb``; the frequencies against ``transformers``' RoPE initialisers; sink
attention against gpt-oss's eager attention and the definition, with its log-sum-exp, fully masked
rows and logits of 1e4; on every device present and on PyTorch's meta device.

The comparisons with ``transformers`` skip, saying so, where it is not installed (a bare GPU
machine): everything else needs numpy, torch and pytest only."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic

from .test_sdpa_reference import _randn
from .tolerances import FLOAT_DTYPES, TOLERANCES

NO_TRANSFORMERS = "transformers is not installed here: the comparisons with it need it"


def _transformers():
    return pytest.importorskip("transformers", reason=NO_TRANSFORMERS)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rms_norm_is_pytorchs(device, dtype):
    if device.type == "mps" and dtype == torch.float64:
        pytest.skip("MPS has no float64")
    x = _randn((3, 5, 24), dtype, device, seed=1) * 3
    w = _randn((24,), dtype, device, seed=2)
    want = F.rms_norm(x.double(), (24,), w.double(), eps=1e-6).to(dtype)
    torch.testing.assert_close(rpt.rms_norm(x, w, 1e-6), want, **TOLERANCES[dtype])
    assert rpt.rms_norm(x, w).dtype == dtype and rpt.rms_norm(x, w).device == x.device


@pytest.mark.parametrize("family", ["qwen3", "gpt_oss", "glm4"])
def test_rms_norm_is_each_models_own(family):
    _transformers()
    from transformers.models.glm4.modeling_glm4 import Glm4RMSNorm
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRMSNorm
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    norm = {"qwen3": Qwen3RMSNorm, "gpt_oss": GptOssRMSNorm, "glm4": Glm4RMSNorm}[family](
        16, eps=1e-5
    )
    with torch.no_grad():
        norm.weight.copy_(_randn((16,), torch.float32, "cpu", seed=3))
        x = _randn((2, 7, 16), torch.float32, "cpu", seed=4) * 5
        torch.testing.assert_close(
            rpt.rms_norm(x, norm.weight, 1e-5), norm(x), rtol=1e-6, atol=1e-6
        )


def test_rms_norm_refuses_a_weight_of_another_width():
    with pytest.raises(ValueError, match="one per feature"):
        rpt.rms_norm(torch.ones(2, 8), torch.ones(4))
    with pytest.raises(ValueError, match="eps"):
        rpt.rms_norm(torch.ones(2, 8), torch.ones(8), eps=-1.0)


def test_the_pairing_permutation_interleaves_the_halves():
    assert rpt.pairing_permutation(8).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    for bad in (0, 3, -2, 2.0, True):
        with pytest.raises(ValueError, match="rotary_dim"):
            rpt.pairing_permutation(bad)


def _hf_cos_sin(module_name: str, config: dict, positions, dtype=torch.float32, device="cpu"):
    """cos and sin ``(1, n, .)`` from the family's own rotary module for ``config``."""
    transformers = _transformers()
    from transformers import AutoConfig

    module = getattr(transformers.models, module_name)
    modeling = getattr(module, f"modeling_{module_name}")
    rotary_class = next(
        getattr(modeling, n) for n in dir(modeling) if n.endswith("RotaryEmbedding")
    )
    rotary = rotary_class(AutoConfig.for_model(**config)).to(device)
    x = torch.zeros(1, dtype=dtype, device=device)
    return rotary(x, torch.as_tensor(positions, device=device)[None]), modeling


def test_rope_via_lesson10_is_qwen3s_rope(device):
    positions = torch.tensor([0, 1, 5, 17, 300, 4095])
    config = rpt.tiny_config("qwen3")
    (cos, sin), modeling = _hf_cos_sin("qwen3", config, positions, device=device)
    q, k = (_randn((2, 4, 6, 16), torch.float32, device, seed=s) for s in (5, 6))
    want_q, want_k = modeling.apply_rotary_pos_emb(q, k, cos, sin)
    theta = config["rope_parameters"]["rope_theta"]
    torch.testing.assert_close(
        rpt.rope_via_lesson10(q, positions, theta), want_q, rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(
        rpt.rope_via_lesson10(k, positions, theta), want_k, rtol=1e-4, atol=1e-4
    )


def test_lesson10s_sign_mirrors_the_offsets():
    """Lesson 10's own rotation, in the checkpoint's pairing, scores offset m - n as the
    checkpoint's rotation scores n - m."""
    q, k = (_randn((1, 16), torch.float64, "cpu", seed=s) for s in (7, 8))
    perm = rpt.pairing_permutation(16)
    back = torch.argsort(perm)

    def lesson10(x, pos):
        return rpt.rotary_embedding(x[..., perm], torch.tensor([pos]))[..., back]

    for m, n in [(9, 2), (3, 11), (40, 0)]:
        mirrored = lesson10(q, m) @ lesson10(k, n).T
        checkpoint = rpt.rope_via_lesson10(q, [n]) @ rpt.rope_via_lesson10(k, [m]).T
        torch.testing.assert_close(mirrored, checkpoint)


@pytest.mark.parametrize("family", ["qwen3", "gpt_oss", "glm4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_apply_rope_is_each_familys(device, family, dtype):
    """Each family's layout, width and scaling: Qwen3 (half), gpt-oss (half, YaRN's frequencies
    and attention factor), GLM-4 (interleaved, half the head turned)."""
    if device.type == "mps" and dtype == torch.float64:
        pytest.skip("MPS has no float64")
    config = rpt.tiny_config(family)
    spec = rpt.spec_from_config(config)
    positions = torch.tensor([0, 3, 8, 100, 2047])
    (cos, sin), modeling = _hf_cos_sin(family, config, positions, dtype, device)
    q, k = (_randn((2, 4, 5, 16), dtype, device, seed=s) for s in (9, 10))
    want_q, want_k = modeling.apply_rotary_pos_emb(q, k, cos, sin)
    inv_freq, scale = rpt.rope_frequencies(spec.rope, spec.rotary_dim)
    got_q = rpt.apply_rope(q, positions, inv_freq, spec.rope_layout, scale)
    got_k = rpt.apply_rope(k, positions, inv_freq, spec.rope_layout, scale)
    tol = dict(rtol=1e-4, atol=1e-4)  # transformers' angles are float32
    torch.testing.assert_close(got_q, want_q, **tol)
    torch.testing.assert_close(got_k, want_k, **tol)
    assert got_q.dtype == dtype and got_q.device == q.device


def test_apply_rope_leaves_the_unturned_features_and_keeps_offsets():
    x = _randn((3, 7, 12), torch.float64, "cpu", seed=11)
    inv_freq = torch.tensor([1.0, 0.1])
    for layout in ("half", "interleaved"):
        out = rpt.apply_rope(x, torch.arange(7), inv_freq, layout)
        torch.testing.assert_close(out[..., 4:], x[..., 4:])
        torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))  # rotations keep lengths
        shifted = rpt.apply_rope(x, torch.arange(7) + 13, inv_freq, layout)
        torch.testing.assert_close(shifted @ shifted.transpose(-1, -2), out @ out.transpose(-1, -2))
    torch.testing.assert_close(
        rpt.apply_rope(x, torch.arange(7), inv_freq, scale=2.0)[..., :4],
        2 * rpt.apply_rope(x, torch.arange(7), inv_freq)[..., :4],
    )


def test_apply_rope_runs_where_its_inputs_live():
    x = torch.ones(2, 3, 8, device="meta")
    out = expect_device_agnostic(
        rpt.apply_rope, x, torch.arange(3), torch.ones(4), what="apply_rope"
    )
    assert out is not None and out.shape == (2, 3, 8)


@pytest.mark.parametrize(
    "rope, head_dim, factor",
    [
        ({"rope_type": "default", "rope_theta": 1e6}, 128, 1.0),
        ({"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}, 128, 0.5),
        ({"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
          "beta_slow": 1.0, "original_max_position_embeddings": 4096, "truncate": False}, 64, 1.0),
        ({"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
          "original_max_position_embeddings": 32768}, 128, 1.0),
        ({"rope_type": "yarn", "rope_theta": 1e4, "factor": 8.0, "attention_factor": 1.5,
          "original_max_position_embeddings": 2048}, 32, 1.0),
        ({"rope_type": "yarn", "rope_theta": 1e4, "factor": 40.0, "mscale": 1.0,
          "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096, "beta_fast": 32,
          "beta_slow": 1}, 64, 1.0),
    ],
)  # fmt: skip
def test_rope_frequencies_are_transformers(rope, head_dim, factor):
    _transformers()
    from transformers import PretrainedConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = PretrainedConfig(
        hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
        max_position_embeddings=131072, rope_parameters=dict(rope),
    )  # fmt: skip
    rotary_dim = int(head_dim * factor)
    got, scale = rpt.rope_frequencies(rope, rotary_dim)
    if rope["rope_type"] == "default":
        want, want_scale = (
            1.0 / rope["rope_theta"] ** (torch.arange(0, rotary_dim, 2) / rotary_dim),
            1.0,
        )
    else:
        want, want_scale = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-6, atol=1e-9)
    assert math.isclose(scale, want_scale, rel_tol=1e-12)


def test_yarn_keeps_the_high_frequencies_and_interpolates_the_low():
    rope = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 16.0,
            "original_max_position_embeddings": 2048}  # fmt: skip
    base, _ = rpt.rope_frequencies({"rope_type": "default", "rope_theta": 1e4}, 64)
    yarn, scale = rpt.rope_frequencies(rope, 64)
    ratio = yarn / base
    assert ratio[0] == 1 and math.isclose(ratio[-1].item(), 1 / 16)
    assert bool((ratio[1:] <= ratio[:-1]).all())  # the ramp falls from 1 to 1/factor
    assert math.isclose(scale, 0.1 * math.log(16) + 1)


BAD_ROPES = [
    ({"rope_type": "dynamic", "rope_theta": 1e4}, 8, "not supported"),
    ({"rope_type": "default", "rope_theta": 1e4}, 7, "rotary_dim"),
]


@pytest.mark.parametrize("rope, width, match", BAD_ROPES)
def test_bad_ropes_are_refused(rope, width, match):
    with pytest.raises(ValueError, match=match):
        rpt.rope_frequencies(rope, width)


def _definition(q, k, v, sinks, mask):
    """The sink as one more column of logits, dropped after the softmax (gpt-oss's eager code)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf)
    sink = torch.broadcast_to(sinks, scores.shape[:-1])[..., None]
    weights = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    return weights @ v, torch.logsumexp(torch.cat((scores, sink), dim=-1), dim=-1)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("block_size", [1, 3, 64])
def test_sink_attention_is_the_definition(device, dtype, block_size):
    if device.type == "mps" and dtype == torch.float64:
        pytest.skip("MPS has no float64")
    q = _randn((2, 4, 6, 8), dtype, device, seed=12)
    k, v = (
        _randn((2, 4, 9, 8), dtype, device, seed=13),
        _randn((2, 4, 9, 5), dtype, device, seed=14),
    )
    sinks = _randn((4, 1), dtype, device, seed=15) * 2
    mask = torch.rand(6, 9, generator=torch.Generator().manual_seed(16)).to(device) > 0.3
    mask[2] = False  # a query with nothing to attend to
    out, lse = rpt.sink_attention(q, k, v, sinks, mask, block_size, return_lse=True)
    want, want_lse = _definition(*(t.double() for t in (q, k, v, sinks)), mask)
    torch.testing.assert_close(out, want.to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(lse, want_lse.to(dtype), **TOLERANCES[dtype])
    assert not out[:, :, 2].any(), "a query with no key gets zeros: all its weight on the sink"
    plain = rpt.sink_attention(q, k, v, None, mask, block_size)
    torch.testing.assert_close(
        plain, rpt.tiled_attention(q, k, v, mask, block_size), **TOLERANCES[dtype]
    )


def test_sink_attention_is_gpt_oss_eager_attention():
    _transformers()
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    q = _randn((2, 4, 7, 16), torch.float32, "cpu", seed=17)
    k, v = (_randn((2, 2, 7, 16), torch.float32, "cpu", seed=s) for s in (18, 19))
    module = torch.nn.Module()
    module.sinks, module.num_key_value_groups, module.training = (
        _randn((4,), torch.float32, "cpu", 20),
        2,
        False,
    )
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    additive = torch.zeros(7, 7).masked_fill(~causal, -torch.inf)[None, None]
    want, _ = eager_attention_forward(module, q, k, v, additive, scaling=16**-0.5)
    got = rpt.sink_attention(q.unflatten(1, (2, 2)), k[:, :, None], v[:, :, None],
                             module.sinks.view(2, 2, 1), causal, block_size=3)  # fmt: skip
    torch.testing.assert_close(got.flatten(1, 2).transpose(1, 2), want, rtol=1e-5, atol=1e-6)


def test_sink_attention_is_stable_for_large_logits():
    """Logits of 1e4 and a sink 100 above every score: exp would overflow without the running
    maximum counting the sink; the log-sum-exp stays finite."""
    q = torch.full((1, 3, 4), 100.0)
    k, v = torch.full((1, 5, 4), 100.0), torch.arange(10.0).view(1, 5, 2)
    for sinks in (torch.tensor([1e4]), torch.tensor([-1e4])):
        out, lse = rpt.sink_attention(q, k, v, sinks, block_size=2, return_lse=True)
        want, want_lse = _definition(q.double(), k.double(), v.double(), sinks.double(), None)
        torch.testing.assert_close(out, want.float())
        torch.testing.assert_close(lse, want_lse.float())
    small = torch.zeros(1, 1, 4)
    _, lse = rpt.sink_attention(small, small.expand(1, 3, 4), small.expand(1, 3, 4)[..., :2],
                                torch.tensor([100.0]), return_lse=True)  # fmt: skip
    assert torch.isfinite(lse).all() and math.isclose(lse.item(), 100.0, rel_tol=1e-6)


def test_sink_attention_runs_where_its_inputs_live():
    q = torch.ones(2, 3, 4, device="meta")
    out = expect_device_agnostic(rpt.sink_attention, q, q, q, torch.ones(1), what="sink_attention")
    assert out is not None and out.shape == (2, 3, 4)


BAD_SINKS = [
    ("sinks of another width", dict(sinks=torch.ones(3)), "sinks must broadcast"),
    ("a float mask", dict(mask=torch.ones(4, 6)), "boolean"),
    ("block size 0", dict(block_size=0), "block_size"),
]


@pytest.mark.parametrize("what, kwargs, match", BAD_SINKS, ids=[b[0] for b in BAD_SINKS])
def test_bad_sink_inputs_are_refused(what, kwargs, match):
    q, k = torch.ones(2, 4, 8), torch.ones(2, 6, 8)
    with pytest.raises((ValueError, TypeError), match=match):
        rpt.sink_attention(q, k, k, **{"sinks": torch.ones(2, 1)} | kwargs)

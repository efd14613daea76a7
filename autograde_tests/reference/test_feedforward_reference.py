"""The position-wise FFN (lesson 6) against nn.Linear -> ReLU -> nn.Linear and against the
paper's "two convolutions with kernel size 1" (nn.Conv1d), with copied weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import attention_ref.np as rnp
import attention_ref.pt as rpt

from .tolerances import TOLERANCES


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(5, 16), (2, 7, 16), (2, 3, 1, 16)], ids=str)
def test_matches_linear_relu_linear_and_conv1d(device, dtype, shape):
    torch.manual_seed(0)
    d_model, d_ff = 16, 64
    linear = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model)).to(
        device, dtype
    )
    conv1, conv2 = (
        nn.Conv1d(d_model, d_ff, 1).to(device, dtype),
        nn.Conv1d(d_ff, d_model, 1).to(device, dtype),
    )
    x = torch.randn(shape, dtype=dtype, device=device)
    params = rpt.ffn_params_from_torch(linear[0], linear[2])
    got = rpt.position_wise_ffn(x, params)
    assert got.dtype == dtype and got.device.type == device.type
    torch.testing.assert_close(got, linear(x), **TOLERANCES[dtype])
    np.testing.assert_allclose(
        rnp.position_wise_ffn(x.cpu().numpy(), {k: v.cpu().numpy() for k, v in params.items()}),
        linear(x).detach().cpu().numpy(),
        **TOLERANCES[dtype],
    )
    # Conv1d wants (batch, channels, length): positions along the last axis
    seq = x.reshape(-1, shape[-2], d_model)
    # CUDA's default TF32 convolutions round to ~1e-3
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        conv_out = conv2(torch.relu(conv1(seq.transpose(1, 2)))).transpose(1, 2)
    torch.testing.assert_close(
        rpt.position_wise_ffn(seq, rpt.ffn_params_from_torch(conv1, conv2)),
        conv_out,
        **TOLERANCES[dtype],
    )


def test_each_position_separately_and_identically(device):
    params = rpt.init_ffn_params(8, 32, torch.Generator().manual_seed(1), device=device)
    x = torch.randn(3, 10, 8, device=device)
    whole = rpt.position_wise_ffn(x, params)
    for pos in (0, 4, 9):  # one position alone gives what it gave inside the sequence
        torch.testing.assert_close(
            rpt.position_wise_ffn(x[:, pos : pos + 1], params), whole[:, pos : pos + 1]
        )
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(2)).to(device)
    torch.testing.assert_close(rpt.position_wise_ffn(x[:, perm], params), whole[:, perm])


@pytest.mark.parametrize("d_model,d_ff", [(512, 2048), (768, 3072), (1024, 4096), (6, 10)])
def test_parameter_count_matches_pytorch(d_model, d_ff):
    ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
    assert rnp.ffn_parameter_count(d_model, d_ff) == sum(p.numel() for p in ffn.parameters())
    assert rpt.ffn_parameter_count(d_model, d_ff) == rnp.ffn_parameter_count(d_model, d_ff)
    assert {
        k: v.shape for k, v in rnp.init_ffn_params(6, 10, np.random.default_rng(0)).items()
    } == {"w_1": (6, 10), "b_1": (10,), "w_2": (10, 6), "b_2": (6,)}


def test_bad_inputs_say_what_is_wrong():
    params = rnp.init_ffn_params(8, 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"d_model differs.*\(2, 5, 6\)"):
        rnp.position_wise_ffn(np.zeros((2, 5, 6)), params)
    with pytest.raises(ValueError, match="lacks b_2"):
        rnp.position_wise_ffn(np.zeros((5, 8)), {k: v for k, v in params.items() if k != "b_2"})
    with pytest.raises(TypeError, match="floating"):
        rnp.position_wise_ffn(np.zeros((5, 8), dtype=int), params)
    with pytest.raises(ValueError, match="kernel_size=1"):
        rpt.ffn_params_from_torch(nn.Conv1d(8, 16, 3), nn.Conv1d(16, 8, 1))
    with pytest.raises(TypeError, match="nn.Linear"):
        rpt.ffn_params_from_torch(nn.ReLU(), nn.Linear(16, 8))


@pytest.mark.parametrize(
    "d_model,num_heads,d_ff", [(512, 8, 2048), (768, 12, 3072), (1024, 16, 4096), (12, 3, 20)]
)
def test_layer_parameter_counts_match_pytorch_layers(d_model, num_heads, d_ff):
    encoder = nn.TransformerEncoderLayer(d_model, num_heads, d_ff)
    decoder = nn.TransformerDecoderLayer(d_model, num_heads, d_ff)
    for layer, is_decoder in [(encoder, False), (decoder, True)]:
        parts = rnp.layer_parameter_counts(d_model, num_heads, d_ff, decoder=is_decoder)
        assert parts == rpt.layer_parameter_counts(d_model, num_heads, d_ff, decoder=is_decoder)
        assert set(parts) == {"attention", "ffn", "norms"}
        assert sum(parts.values()) == sum(p.numel() for p in layer.parameters())
        assert parts["ffn"] == sum(
            p.numel() for m in (layer.linear1, layer.linear2) for p in m.parameters()
        )
        norms = [m for m in layer.modules() if isinstance(m, nn.LayerNorm)]
        assert parts["norms"] == sum(p.numel() for m in norms for p in m.parameters())
    # the paper's base encoder layer: the FFN holds two thirds of it, a decoder layer's half
    enc = rnp.layer_parameter_counts(512, 8, 2048)
    assert enc == {"attention": 1_050_624, "ffn": 2_099_712, "norms": 2048}
    assert abs(enc["ffn"] / sum(enc.values()) - 2 / 3) < 0.001
    dec = rnp.layer_parameter_counts(512, 8, 2048, decoder=True)
    assert abs(dec["ffn"] / sum(dec.values()) - 1 / 2) < 0.001


def test_layer_parameter_counts_reject_bad_sizes():
    with pytest.raises(ValueError, match="num_heads = 5"):
        rnp.layer_parameter_counts(512, 5, 2048)
    with pytest.raises(ValueError, match="d_ff must be positive"):
        rnp.layer_parameter_counts(512, 8, 0)

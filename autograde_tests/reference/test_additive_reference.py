"""Additive attention (lesson 2) against an independent PyTorch formulation with nn.Linear."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_ref.np as rnp
import attention_ref.pt as rpt

from .tolerances import TOLERANCES


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize(
    "batch,n_q,n_k,d_q,d_k,d_h,d_v",
    [((), 1, 1, 3, 3, 4, 2), ((), 5, 7, 8, 6, 16, 3), ((2, 3), 4, 6, 8, 8, 10, 5)],
)
def test_additive_attention_matches_linear_layers(
    device, dtype, batch, n_q, n_k, d_q, d_k, d_h, d_v
):
    gen = torch.Generator().manual_seed(3)
    q, k, v = (
        torch.randn(batch + shape, generator=gen, dtype=dtype).to(device)
        for shape in ((n_q, d_q), (n_k, d_k), (n_k, d_v))
    )
    to_hidden_q = torch.nn.Linear(d_q, d_h, bias=False).to(device, dtype)
    to_hidden_k = torch.nn.Linear(d_k, d_h, bias=False).to(device, dtype)
    to_score = torch.nn.Linear(d_h, 1, bias=False).to(device, dtype)
    with torch.no_grad():
        hidden = torch.tanh(to_hidden_q(q).unsqueeze(-2) + to_hidden_k(k).unsqueeze(-3))
        scores = to_score(hidden).squeeze(-1)
        want = torch.softmax(scores, dim=-1) @ v
        # nn.Linear computes x W^T: the row-convention weights are the transposes
        W_q, W_k, w_v = to_hidden_q.weight.T, to_hidden_k.weight.T, to_score.weight[0]
        torch.testing.assert_close(
            rpt.additive_scores(q, k, W_q, W_k, w_v), scores, **TOLERANCES[dtype]
        )
        torch.testing.assert_close(
            rpt.additive_attention(q, k, v, W_q, W_k, w_v), want, **TOLERANCES[dtype]
        )
        got_np = rnp.additive_attention(*(t.cpu().numpy() for t in (q, k, v, W_q, W_k, w_v)))
    np.testing.assert_allclose(got_np, want.cpu().numpy(), **TOLERANCES[dtype])


def test_additive_attention_rejects_mismatched_weights():
    q, k, v = np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 2))
    with pytest.raises(ValueError, match=r"d_k.*\(4, 5\).*\(6, 8\)"):
        rnp.additive_attention(q, k, v, np.ones((3, 8)), np.ones((6, 8)), np.ones(8))
    with pytest.raises(ValueError, match="d_h"):
        rpt.additive_attention(
            *(torch.ones(s) for s in ((2, 3), (4, 5), (4, 2), (3, 8), (5, 8), (7,)))
        )

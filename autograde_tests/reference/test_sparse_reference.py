"""DeepSeek Sparse Attention (lesson 13; DeepSeek-AI, 2025, DeepSeek-V3.2, section 2.1) against
PyTorch and Hugging Face: the indexer's scores and top-k selection against ``transformers``'
``DeepseekV32Indexer`` with the same weights; the selection against ``torch.topk`` written out,
the causal mask respected (a query with fewer earlier keys than k selects them all, never a later
one); attention over the gathered keys against ``F.scaled_dot_product_attention`` with the
selection as its mask; NumPy against PyTorch, dtypes x devices, on PyTorch's meta device; bad
input refused with the shapes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic

from .test_sdpa_reference import _randn
from .tolerances import FLOAT_DTYPES, TOLERANCES


def _causal(n_q, n_k, device="cpu"):
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def test_indexer_scores_and_selection_equal_deepseek_v32s_indexer():
    """The same weights: Hugging Face's indexer projects, then selects its top-k under the causal
    mask; the course's functions score and select from the projected queries and keys. The
    rotary part is switched off (cos 1, sin 0) and its scales folded into the head weights."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Indexer

    logging.getLogger("transformers").setLevel(logging.ERROR)
    config = transformers.DeepseekV32Config(
        hidden_size=16,
        index_n_heads=4,
        index_head_dim=8,
        qk_rope_head_dim=4,
        q_lora_rank=12,
        index_topk=5,
        num_attention_heads=2,
        kv_lora_rank=8,
        qk_nope_head_dim=4,
        v_head_dim=4,
    )
    torch.manual_seed(0)
    indexer = DeepseekV32Indexer(config, 0).eval()
    x, q_resid = torch.randn(2, 11, 16), torch.randn(2, 11, 12)
    identity_rope = (torch.ones(2, 11, 4), torch.zeros(2, 11, 4))
    causal = _causal(11, 11)
    theirs = indexer(x, q_resid, identity_rope, causal.expand(2, 11, 11), None)
    with torch.no_grad():
        queries = indexer.wq_b(q_resid).view(2, 11, 4, 8).transpose(1, 2)  # (batch, h_I, n, d_I)
        keys = indexer.k_norm(indexer.wk(x))
        weights = indexer.weights_proj(x).transpose(1, 2) * 4**-0.5 * 8**-0.5  # their two scales
    scores = rpt.indexer_scores(queries, keys, weights)
    selected = rpt.top_k_mask(scores, 5, causal)
    their_selection = (
        torch.zeros(2, 11, 11, dtype=torch.bool).scatter(-1, theirs.long(), True) & causal
    )
    assert torch.equal(selected, their_selection)
    np.testing.assert_array_equal(
        rnp.top_k_mask(
            *(t.numpy() for t in (rpt.indexer_scores(queries, keys, weights),)), 5, causal.numpy()
        ),
        their_selection.numpy(),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_indexer_scores_are_their_formula(device, dtype):
    q = _randn((2, 3, 5, 4), dtype, device, seed=1)
    k = _randn((2, 7, 4), dtype, device, seed=2)
    w = _randn((2, 3, 5), dtype, device, seed=3)
    want = torch.zeros(2, 5, 7, dtype=dtype, device=device)
    for j in range(3):  # I_ts = sum_j w_tj ReLU(q_tj . k_s)
        want += w[:, j, :, None] * torch.relu(q[:, j] @ k.transpose(-1, -2))
    torch.testing.assert_close(rpt.indexer_scores(q, k, w), want, **TOLERANCES[dtype])
    np.testing.assert_allclose(
        rnp.indexer_scores(*(t.cpu().numpy() for t in (q, k, w))),
        want.cpu().numpy(),
        **TOLERANCES[dtype],
    )


@pytest.mark.parametrize("top_k", [1, 3, 8, 20])
def test_top_k_respects_the_causal_mask(device, top_k):
    scores = _randn((2, 9, 9), torch.float64, device, seed=4)
    scores[..., -1] = 100.0  # the last key scores best: only the last query may select it
    causal = _causal(9, 9, device)
    indices, valid = rpt.top_k_indices(scores, top_k, causal)
    assert indices.shape == (2, 9, min(top_k, 9))
    selected = rpt.top_k_mask(scores, top_k, causal)
    assert not (selected & ~causal).any(), "a key after its query was selected"
    torch.testing.assert_close(
        selected.sum(-1), torch.clamp(torch.arange(1, 10, device=device), max=top_k).expand(2, 9)
    )
    written_out = torch.zeros_like(selected)
    for b in range(2):
        for i in range(9):
            best = scores[b, i, : i + 1].topk(min(top_k, i + 1)).indices
            written_out[b, i, best] = True
    assert torch.equal(selected, written_out)
    np_sel = rnp.top_k_mask(scores.cpu().numpy(), top_k, causal.cpu().numpy())
    np.testing.assert_array_equal(np_sel, written_out.cpu().numpy())
    np_idx, np_valid = rnp.top_k_indices(scores.cpu().numpy(), top_k, causal.cpu().numpy())
    np.testing.assert_array_equal(np_valid, valid.cpu().numpy())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("top_k", [1, 4, 16])
def test_sparse_attention_is_dense_attention_restricted_to_the_selection(device, dtype, top_k):
    """Queries (batch, h, n, d) and keys shared by the heads (MLA's MQA mode in DeepSeek-V3.2):
    one selection per query for every head, broadcast over the heads."""
    q = _randn((2, 3, 12, 8), dtype, device, seed=5)
    k, v = (
        _randn((2, 1, 12, 8), dtype, device, seed=6),
        _randn((2, 1, 12, 5), dtype, device, seed=7),
    )
    scores = _randn((2, 1, 12, 12), torch.float32, device, seed=8)
    causal = _causal(12, 12, device)
    indices, valid = rpt.top_k_indices(scores, top_k, causal)
    got = rpt.sparse_attention(q, k, v, indices, valid)
    assert got.dtype == dtype and got.device == q.device and got.shape == (2, 3, 12, 5)
    selection = rpt.top_k_mask(scores, top_k, causal)
    want = F.scaled_dot_product_attention(
        q, k.expand(2, 3, 12, 8), v.expand(2, 3, 12, 5), attn_mask=selection
    )
    torch.testing.assert_close(got, want, **TOLERANCES[dtype])
    if top_k >= 12:  # every earlier key selected: causal attention itself
        torch.testing.assert_close(
            got,
            F.scaled_dot_product_attention(
                q, k.expand_as(q), v.expand(2, 3, 12, 5), is_causal=True
            ),
            **TOLERANCES[dtype],
        )
    if dtype in (torch.float32, torch.float64):
        np_got = rnp.sparse_attention(*(t.cpu().numpy() for t in (q, k, v, indices, valid)))
        np.testing.assert_allclose(np_got, want.cpu().numpy(), **TOLERANCES[dtype])


def test_a_query_with_no_valid_key_gets_zeros():
    q, k, v = torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 2)
    indices = torch.zeros(3, 2, dtype=torch.long)
    valid = torch.tensor([[True, False], [False, False], [True, True]])
    out = rpt.sparse_attention(q, k, v, indices, valid)
    torch.testing.assert_close(out[1], torch.zeros(2))
    np.testing.assert_allclose(
        rnp.sparse_attention(q.numpy(), k.numpy(), v.numpy(), indices.numpy(), valid.numpy())[1],
        0.0,
    )


def test_sparse_attention_is_device_agnostic(device):
    q, k, v = (
        torch.randn(2, 6, 4, device=device),
        torch.randn(2, 9, 4, device=device),
        torch.randn(2, 9, 3, device=device),
    )
    scores = torch.randn(2, 6, 9, device=device)
    mask = _causal(6, 9, device)
    indices, valid = rpt.top_k_indices(scores, 3, mask)
    out = expect_device_agnostic(
        rpt.sparse_attention, q, k, v, indices, valid, what="sparse_attention"
    )
    assert out is not None and out.shape == (2, 6, 3)
    for name, fn in (("top_k_indices", rpt.top_k_indices), ("top_k_mask", rpt.top_k_mask)):
        assert expect_device_agnostic(fn, scores, 3, mask, what=name) is not None
    w = torch.randn(2, 3, 6, device=device)
    assert expect_device_agnostic(
        rpt.indexer_scores, torch.randn(2, 3, 6, 4, device=device), k, w, what="indexer_scores"
    ).shape == (2, 6, 9)


def _t(*shape):
    return torch.ones(shape)


BAD_INPUTS = [
    ("indexer widths", lambda: rpt.indexer_scores(_t(2, 3, 4), _t(5, 3), _t(2, 3)), "d_I"),
    (
        "head weights per key",
        lambda: rnp.indexer_scores(np.ones((2, 3, 4)), np.ones((5, 4)), np.ones((2, 5))),
        "head_weights",
    ),
    ("top_k 0", lambda: rpt.top_k_indices(_t(3, 4), 0), "top_k"),
    (
        "indices for other queries",
        lambda: rpt.sparse_attention(
            _t(3, 4), _t(5, 4), _t(5, 2), torch.zeros(2, 2, dtype=torch.long)
        ),
        "n_q",
    ),
    (
        "valid of another shape",
        lambda: rnp.sparse_attention(
            np.ones((3, 4)),
            np.ones((5, 4)),
            np.ones((5, 2)),
            np.zeros((3, 2), int),
            np.ones((3, 1), bool),
        ),
        "valid",
    ),
]


@pytest.mark.parametrize("what, bad, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_sparse_inputs_are_refused_with_the_shapes(what, bad, match):
    with pytest.raises(ValueError, match=match):
        bad()

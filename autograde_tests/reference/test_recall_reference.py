"""Multi-query associative recall and the tiny hybrid stacks of lesson 13 (attention_ref.pt.recall):
the task's sequences ask for keys that were listed, with the value that followed each as target;
the stacks run on every device with the library's or another gated delta rule inside, their
linear layers causal (a later token changes no earlier logit); a few steps of training lower the
loss; the first position's share of attention is read from the full-attention layers."""

from __future__ import annotations

import pytest
import torch

import attention_ref.pt as rpt
from attention_ref.pt.recall import (
    BOS,
    RecallModel,
    first_position_share,
    mqar_batch,
    recall_accuracy,
    train_recall,
)


def test_mqar_asks_for_listed_keys_with_their_values():
    tokens, targets = mqar_batch(16, 5, 12, 7, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (16, 16)
    assert (tokens[:, 0] == BOS).all() and (targets[:, :11] == -100).all()
    for row, target in zip(tokens, targets):
        keys, values = row[1:11:2], row[2:11:2]
        assert ((keys >= 1) & (keys <= 12)).all() and ((values >= 13) & (values <= 19)).all()
        assert len(set(keys.tolist())) == 5, "the keys of one sequence are distinct"
        assert sorted(row[11:].tolist()) == sorted(keys.tolist()), (
            "every listed key is asked for once"
        )
        for query, answer in zip(row[11:], target[11:]):
            assert answer == values[(keys == query).nonzero()[0, 0]], "the target follows its key"
    with pytest.raises(ValueError, match="distinct keys"):
        mqar_batch(1, 9, 8, 8, torch.Generator())


@pytest.mark.parametrize("layers", ["LLLF", "FF", "L"])
def test_stacks_are_causal_on_every_device(device, layers):
    model = RecallModel(
        20, 16, 2, layers, chunk_size=4, generator=torch.Generator().manual_seed(1)
    ).to(device)
    tokens = torch.randint(20, (2, 11), generator=torch.Generator().manual_seed(2)).to(device)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 20
    with torch.no_grad():
        logits, later = model(tokens), model(changed)
    assert logits.shape == (2, 11, 20) and logits.device == tokens.device
    torch.testing.assert_close(logits[:, :-1], later[:, :-1])


def test_the_linear_layers_run_the_delta_rule_they_are_given():
    calls = []

    def recurrent(q, k, v, beta, log_decay, chunk_size):
        calls.append(chunk_size)
        return rpt.gated_delta_rule_recurrent(q, k, v, beta, log_decay)

    tokens = torch.randint(20, (2, 9), generator=torch.Generator().manual_seed(3))
    chunked = RecallModel(20, 16, 2, "LL", chunk_size=4, generator=torch.Generator().manual_seed(4))
    stepwise = RecallModel(
        20,
        16,
        2,
        "LL",
        delta_rule=recurrent,
        chunk_size=4,
        generator=torch.Generator().manual_seed(4),
    )
    with torch.no_grad():
        torch.testing.assert_close(chunked(tokens), stepwise(tokens), rtol=1e-5, atol=1e-5)
    assert calls == [4, 4]


def test_training_lowers_the_loss_and_the_shares_are_read():
    task = dict(num_pairs=3, num_keys=6, num_values=6)
    model = RecallModel(13, 16, 2, "LF", gated=True, generator=torch.Generator().manual_seed(5))
    losses = train_recall(
        model, 12, **task, batch_size=8, lr=2e-2, generator=torch.Generator().manual_seed(6)
    )
    assert len(losses) == 12 and sum(losses[-3:]) < sum(losses[:3])
    assert 0.0 <= recall_accuracy(model, **task, batch_size=32) <= 1.0
    tokens, _ = mqar_batch(4, 3, 6, 6, torch.Generator().manual_seed(7))
    shares = first_position_share(model, tokens, skip=2)
    assert (
        len(shares) == 1 and shares[0].shape == (2,) and ((shares[0] > 0) & (shares[0] < 1)).all()
    )
    with pytest.raises(ValueError, match="layers"):
        RecallModel(13, 16, 2, "LXF")

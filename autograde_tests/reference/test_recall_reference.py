"""Multi-query associative recall and the tiny one-layer models of lesson 13
(attention_ref.pt.recall): the task's sequences ask for keys that were listed, with the value that
followed each as target; the models, several seeds at once, run on every device with the
library's or another gated delta rule inside, each mixer causal (a later token changes no earlier
logit), each model independent of the others trained beside it; a few steps of training lower
the loss; the first position's share of attention is read from the attention mixer."""

from __future__ import annotations

import pytest
import torch

import attention_ref.pt as rpt
from attention_ref.pt.recall import (
    BOS,
    MIXERS,
    RecallModels,
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


@pytest.mark.parametrize("mixer", MIXERS)
@pytest.mark.parametrize("conv", [True, False])
def test_every_mixer_is_causal_on_every_device(device, mixer, conv):
    models = RecallModels([1, 2], mixer, vocab_size=20, d_model=8, conv=conv, chunk_size=4)
    models = models.to(device)
    tokens = torch.randint(20, (2, 3, 11), generator=torch.Generator().manual_seed(2)).to(device)
    changed = tokens.clone()
    changed[..., -1] = (changed[..., -1] + 1) % 20
    with torch.no_grad():
        logits, later = models(tokens), models(changed)
    assert logits.shape == (2, 3, 11, 20) and logits.device == tokens.device
    torch.testing.assert_close(logits[..., :-1, :], later[..., :-1, :])


def test_the_models_beside_each_other_are_independent():
    together = RecallModels([3, 4, 5], "gated_delta", vocab_size=20, d_model=8, chunk_size=4)
    alone = RecallModels([4], "gated_delta", vocab_size=20, d_model=8, chunk_size=4)
    tokens = torch.randint(20, (1, 2, 9), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        torch.testing.assert_close(
            together(tokens.expand(3, 2, 9))[1], alone(tokens)[0], rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize(
    "variants",
    [
        [dict(mixer="delta"), dict(mixer="gated_delta"), dict(mixer="gated_delta", conv=False)],
        [dict(mixer="attention"), dict(mixer="attention", gated=True)],
    ],
)
def test_variants_trained_side_by_side_are_each_the_model_trained_alone(variants):
    task = dict(pairs=3, num_keys=6, num_values=6, batch_size=4, lr=2e-2)
    options = {key: [v.get(key, default) for v in variants for _ in (1, 2)]
               for key, default in (("mixer", None), ("conv", True), ("gated", False))}  # fmt: skip
    together = RecallModels(
        [1, 2] * len(variants), vocab_size=13, d_model=8, chunk_size=4, **options
    )
    losses = train_recall(together, 12, **task)
    tokens, _ = mqar_batch(3, 3, 6, 6, torch.Generator().manual_seed(9))
    for i, variant in enumerate(variants):
        alone = RecallModels([1, 2], vocab_size=13, d_model=8, chunk_size=4, **variant)
        torch.testing.assert_close(train_recall(alone, 12, **task), losses[:, 2 * i : 2 * i + 2])
        with torch.no_grad():
            torch.testing.assert_close(
                alone(tokens.expand(2, 3, 10)),
                together(tokens.expand(2 * len(variants), 3, 10))[2 * i : 2 * i + 2],
            )


def test_variants_of_two_kinds_of_mixer_are_refused():
    with pytest.raises(ValueError, match="one kind of mixer"):
        RecallModels([1, 2], ["linear", "delta"], vocab_size=13)
    with pytest.raises(ValueError, match="one for every model"):
        RecallModels([1, 2], "attention", gated=[True], vocab_size=13)


def test_the_delta_mixers_run_the_rule_they_are_given():
    calls = []

    def recurrent(q, k, v, beta, log_decay, chunk_size):
        calls.append((chunk_size, bool((log_decay == 0).all())))
        return rpt.gated_delta_rule_recurrent(q, k, v, beta, log_decay)

    tokens = torch.randint(20, (2, 2, 9), generator=torch.Generator().manual_seed(3))
    for mixer, no_decay in (("delta", True), ("gated_delta", False)):
        chunked = RecallModels([7, 8], mixer, vocab_size=20, d_model=8, chunk_size=4)
        stepwise = RecallModels(
            [7, 8], mixer, vocab_size=20, d_model=8, delta_rule=recurrent, chunk_size=4
        )
        with torch.no_grad():
            torch.testing.assert_close(chunked(tokens), stepwise(tokens), rtol=1e-5, atol=1e-5)
        assert calls[-1] == (4, no_decay)


def test_training_lowers_the_loss_and_the_shares_are_read():
    task = dict(num_keys=6, num_values=6)
    models = RecallModels([5, 6], "attention", vocab_size=13, d_model=8, gated=True)
    losses = train_recall(models, 15, pairs=(2, 3), **task, batch_size=8, lr=2e-2)
    assert losses.shape == (15, 2) and (losses[-3:].sum(0) < losses[:3].sum(0)).all()
    accuracy = recall_accuracy(models, 3, **task, batch_size=32)
    assert accuracy.shape == (2,) and ((accuracy >= 0) & (accuracy <= 1)).all()
    tokens, _ = mqar_batch(4, 3, 6, 6, torch.Generator().manual_seed(7))
    shares = first_position_share(models, tokens, skip=2)
    assert shares.shape == (2, 2) and ((shares > 0) & (shares < 1)).all()
    assert models.gates.shape == (2, 4, 2, 10, 4)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="mixer"):
        RecallModels([1], "mamba", vocab_size=13)
    with pytest.raises(ValueError, match="gate"):
        RecallModels([1], "linear", vocab_size=13, gated=True)
    with pytest.raises(ValueError, match="attention mixer"):
        first_position_share(RecallModels([1], "delta", vocab_size=13), torch.zeros(1, 4).long())

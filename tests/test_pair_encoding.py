"""``pair_encoding``: the bi-encoder's logits by hand, cross unchanged, and short bi runs alone and in a group."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from _factories import fine_tune_alone, fine_tune_together, group_member

from freezestats.encoder.backbone import load_classifier, load_tokenizer
from freezestats.encoder.pair_encoding import BiEncoderClassifier, pair_model
from freezestats.exceptions import SpecError
from freezestats.spec import GroupSpec, TrainingSpec
from freezestats.tasks import get_task
from freezestats.training import _encoding, encode_split

SPEC = TrainingSpec(epochs=2, batch_size=16, eval_every_epochs=0.5, device="cpu", precision="fp32")
PAIRS = (["A man is playing a guitar.", "Two dogs run."], ["A man plays the guitar loudly.", "A cat sleeps."])


def _by_hand_pool(model: BiEncoderClassifier, tokenizer, sentence: str) -> torch.Tensor:
    """One sentence alone, unpadded, through the base model: the mean of all its token states."""
    inputs = tokenizer(sentence, return_tensors="pt")
    return model.base_model(**inputs).last_hidden_state[0].mean(dim=0)


@pytest.mark.parametrize("task_name", ["mrpc", "stsb"])
def test_bi_logits_are_the_head_on_separately_pooled_sentences(tiny_model: Path, task_name: str) -> None:
    task = get_task(task_name)
    tokenizer = load_tokenizer(str(tiny_model))
    torch.manual_seed(0)
    model = pair_model(load_classifier(str(tiny_model), task.num_labels, task.is_regression), task, "bi")
    assert isinstance(model, BiEncoderClassifier)
    model.eval()
    split = encode_split(PAIRS, np.zeros(2), tokenizer, 64, pair_encoding="bi")
    batch = _encoding.collate(tokenizer, list(split.features), torch.device("cpu"))
    with torch.no_grad():
        logits = model(**batch).logits
        for i in range(2):
            u = _by_hand_pool(model, tokenizer, PAIRS[0][i])
            v = _by_hand_pool(model, tokenizer, PAIRS[1][i])
            if task.is_regression:  # w * cos + b, starting at STS-B's range: w = 5, b = 0
                expected = 5.0 * torch.dot(u, v) / (u.norm() * v.norm())
                assert logits.shape == (2, 1)
                torch.testing.assert_close(logits[i, 0], expected, rtol=1e-5, atol=1e-5)
            else:
                features = torch.cat([u, v, (u - v).abs(), u * v])
                expected = model.head.linear.weight @ features + model.head.linear.bias
                torch.testing.assert_close(logits[i], expected, rtol=1e-5, atol=1e-5)


def test_cross_is_the_classifier_on_one_joint_input(tiny_model: Path) -> None:
    task = get_task("mrpc")
    tokenizer = load_tokenizer(str(tiny_model))
    classifier = load_classifier(str(tiny_model), task.num_labels, task.is_regression)
    assert pair_model(classifier, task, "cross") is classifier  # today's model, untouched
    assert pair_model(classifier, get_task("sst2"), "bi") is classifier  # one sentence: nothing to split
    split = encode_split(PAIRS, np.zeros(2), tokenizer, 64)  # the default is cross
    joint = tokenizer(*PAIRS, truncation=True, max_length=64)
    assert [f["input_ids"] for f in split.features] == joint["input_ids"]
    assert [f["token_type_ids"] for f in split.features] == joint["token_type_ids"]
    assert set(split.features[0]) == {"input_ids", "attention_mask", "token_type_ids"}


def test_unknown_or_misplaced_pair_encodings_fail_in_one_line(tiny_model: Path) -> None:
    tokenizer = load_tokenizer(str(tiny_model))
    with pytest.raises(SpecError, match=r"^`pair_encoding` must be one of \['cross', 'bi'\], but got 'late'\.$"):
        encode_split(PAIRS, np.zeros(2), tokenizer, 64, pair_encoding="late")
    classifier = load_classifier(str(tiny_model), 2, False)
    with pytest.raises(SpecError, match="needs a sentence-pair task"):
        BiEncoderClassifier(classifier, get_task("sst2"))


def test_cross_by_name_is_the_default_run(tiny_model: Path, glue_dir: Path) -> None:
    member = group_member("mrpc", tiny_model, glue_dir, "cross")
    default = fine_tune_alone(tiny_model, member, 1, SPEC, pair_encoding="cross")
    again = fine_tune_alone(tiny_model, member, 1, SPEC)  # no pair_encoding argument at all
    assert again.curve == default.curve and np.array_equal(again.final_logits, default.final_logits)
    assert default.extra["eval_prefix_cached"]  # cross keeps the frozen-prefix cache


@pytest.mark.parametrize("task_name", ["mrpc", "stsb"])
def test_a_short_bi_run_trains_above_the_frozen_layers(
    tiny_model: Path, glue_dir: Path, task_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    member = group_member(task_name, tiny_model, glue_dir, "bi")
    models: list[torch.nn.Module] = []
    real = BiEncoderClassifier.__init__

    def keep(self: BiEncoderClassifier, *args: object) -> None:
        real(self, *args)
        models.append(self)

    monkeypatch.setattr(BiEncoderClassifier, "__init__", keep)
    torch.manual_seed(0)
    start = {k: v.clone() for k, v in load_classifier(str(tiny_model), 1, True).base_model.state_dict().items()}
    outcome = fine_tune_alone(tiny_model, member, 1, SPEC, pair_encoding="bi")
    (model,) = models
    assert outcome.n_steps == 6 and np.isfinite(outcome.final_train_loss)
    assert not outcome.extra["eval_prefix_cached"]  # off for bi: every layer runs
    assert model.base_model.pooler is None  # unused by the pair head: not carried, not counted
    after = model.base_model.state_dict()
    assert all(torch.equal(after[k], start[k]) for k in after if k.startswith(("embeddings.", "encoder.layer.0.")))
    assert not torch.equal(after["encoder.layer.1.output.dense.weight"], start["encoder.layer.1.output.dense.weight"])
    assert outcome.final_logits.shape == (64, 1 if task_name == "stsb" else 2)


def test_cross_encoded_examples_for_a_bi_run_are_refused(tiny_model: Path, glue_dir: Path) -> None:
    member = group_member("mrpc", tiny_model, glue_dir, "cross")
    with pytest.raises(SpecError, match="needs examples bi-encoded"):
        fine_tune_alone(tiny_model, member, 0, SPEC, pair_encoding="bi")


def test_a_group_trains_its_pair_task_as_a_bi_encoder(tiny_model: Path, glue_dir: Path) -> None:
    members = [group_member("sst2", tiny_model, glue_dir, "cross"), group_member("mrpc", tiny_model, glue_dir, "bi")]
    outcomes = fine_tune_together(
        tiny_model, GroupSpec("sst2+mrpc", ("sst2", "mrpc")), members, 1, SPEC, pair_encoding="bi"
    )
    assert outcomes["sst2"].extra["eval_prefix_cached"]  # the single-sentence task keeps its cache
    assert not outcomes["mrpc"].extra["eval_prefix_cached"]
    assert outcomes["mrpc"].extra["task_steps"] + outcomes["sst2"].extra["task_steps"] == 12


def test_a_group_of_one_bi_task_is_the_single_task_bi_run(tiny_model: Path, glue_dir: Path) -> None:
    member = group_member("stsb", tiny_model, glue_dir, "bi")
    alone = fine_tune_alone(tiny_model, member, 0, SPEC, pair_encoding="bi")
    together = fine_tune_together(tiny_model, GroupSpec("just-stsb", ("stsb",)), [member], 0, SPEC, pair_encoding="bi")
    together = together["stsb"]
    assert together.curve == alone.curve
    assert np.array_equal(together.final_logits, alone.final_logits)

"""Fused training (``training/fused``) changes no result: a run trained with others equals the run trained alone.

With dropout on: each fused run draws its masks from a generator of its own that starts where the lone run's
global generator starts (right after its seeded set-up) and draws masks of the same shapes in the same order,
so on CPU the masks are the lone run's. Checked in fp32 with deterministic kernels: every step's loss within
1e-5 relative, every checkpoint's predictions the same (regression: logits within 1e-5), the same curve.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from freezestats.encoder.backbone import load_tokenizer
from freezestats.exceptions import TrialFailed
from freezestats.spec import TrainingSpec
from freezestats.tasks import get_task
from freezestats.tasks.data import load_task_data
from freezestats.tasks.subsets import nested_subsets, validation_halves
from freezestats.training import encode_split, fine_tune
from freezestats.training.fused import fine_tune_many, fusion_blocker


@pytest.fixture(autouse=True)
def _deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


def _runs(model: Path, glue_dir: Path, task_name: str, seeds: list[int], frozen: int, **training: Any) -> list[dict]:
    """``fine_tune``'s inputs for one cell and ``seeds`` (48 examples, 3 steps an epoch, a loss point every step)."""
    task = get_task(task_name)
    data = load_task_data(task, glue_dir)
    tokenizer = load_tokenizer(str(model))
    rows = nested_subsets(data.train_labels, [48], draw_seed=0, regression=task.is_regression)[48]
    train, val = data.train.iloc[rows], data.validation.iloc[:100]
    cols = task.text_columns
    enc_train = encode_split([train[c].tolist() for c in cols], train["label"].to_numpy(), tokenizer, 64)
    enc_val = encode_split([val[c].tolist() for c in cols], val["label"].to_numpy(), tokenizer, 64)
    enc_train, enc_val = replace(enc_train, name=f"{task_name}/train"), replace(enc_val, name=f"{task_name}/validation")
    select, score = validation_halves(enc_val.labels, regression=task.is_regression)
    spec = TrainingSpec(
        **{"epochs": 2, "batch_size": 16, "eval_every_epochs": 0.34, "device": "cpu", "precision": "fp32", **training}
    )
    shared = {
        "model_name": str(model),
        "task": task,
        "metric": task.metrics[0],
        "validation": enc_val,
        "select_idx": select,
        "score_idx": score,
        "frozen_layers": frozen,
        "learning_rate": 1e-3,
        "training": spec,
        "tokenizer": tokenizer,
    }
    return [{**shared, "train": enc_train, "seed": seed} for seed in seeds]


def _assert_same_run(fused: Any, alone: Any, rel: float = 1e-5) -> None:
    """Every step's loss within ``rel``, every evaluation's logits within float tolerance, its predictions and
    metrics the same.

    A regression run's predictions are its logits, and its metrics are correlations of the tiny untrained model's
    near-constant outputs (spread ~1e-4), which move by up to 1e-3 when the logits move by 1e-7: there the metrics
    are held to 1e-3 (and the best step, picked among near-equal values, is not compared).
    """
    regression = alone.final_predictions.dtype.kind == "f"
    metric_tol = 1e-3 if regression else 1e-9
    assert [p["step"] for p in fused.curve] == [p["step"] for p in alone.curve]
    np.testing.assert_allclose(
        [p["train_loss"] for p in fused.curve], [p["train_loss"] for p in alone.curve], rtol=rel, atol=0
    )
    for got, want in zip(fused.curve, alone.curve, strict=True):
        assert got["metrics"] == pytest.approx(want["metrics"], rel=0, abs=metric_tol)
    for name, checkpoint in alone.checkpoints.items():
        np.testing.assert_allclose(fused.checkpoints[name].logits, checkpoint.logits, rtol=1e-4, atol=1e-5)
        if regression:
            np.testing.assert_allclose(fused.checkpoints[name].predictions, checkpoint.predictions, atol=1e-5)
        else:
            np.testing.assert_array_equal(fused.checkpoints[name].predictions, checkpoint.predictions)
            assert fused.checkpoints[name].step == checkpoint.step
    assert fused.n_steps == alone.n_steps
    assert fused.summary.best_dev == pytest.approx(alone.summary.best_dev, rel=0, abs=metric_tol)


@pytest.mark.parametrize(
    ("task_name", "frozen", "frozen_dropout"),
    [("sst2", 0, "on"), ("sst2", 1, "on"), ("stsb", 1, "off")],
    ids=["embeddings-train", "prefix-cached-for-evaluation", "regression-frozen-dropout-off-prefix-cached"],
)
def test_a_fused_run_equals_the_run_alone(
    tiny_model: Path, glue_dir: Path, task_name: str, frozen: int, frozen_dropout: str
) -> None:
    runs = _runs(tiny_model, glue_dir, task_name, [1, 2, 3], frozen, frozen_dropout=frozen_dropout)
    fused = fine_tune_many(runs)
    assert [outcome.extra["fusion"] for outcome in fused] == ["fused"] * 3
    assert fused[0].n_steps == 6 and len(fused[0].curve) == 6  # a loss point at every step
    for run, outcome in zip(runs, fused, strict=True):
        _assert_same_run(outcome, fine_tune(**run))
    assert fused[0].final_train_loss != fused[1].final_train_loss  # the seeds made different runs


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from _factories import build_tiny_roberta

    return build_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta"))


@pytest.mark.parametrize("frozen", [0, 1], ids=["embeddings-train", "prefix-cached-for-evaluation"])
def test_a_fused_roberta_run_equals_the_run_alone(tiny_roberta: Path, glue_dir: Path, frozen: int) -> None:
    # RoBERTa differs from BERT in its position ids (counted from the padding id over the unpadded tokens, so a
    # run padded to its batch mates' length must keep them) and in its head (two dropouts, no pooler)
    runs = _runs(tiny_roberta, glue_dir, "sst2", [1, 2, 3], frozen)
    fused = fine_tune_many(runs)
    assert [outcome.extra["fusion"] for outcome in fused] == ["fused"] * 3
    for run, outcome in zip(runs, fused, strict=True):
        _assert_same_run(outcome, fine_tune(**run))


def test_a_failed_run_leaves_the_batch_and_the_others_are_unchanged(tiny_model: Path, glue_dir: Path) -> None:
    runs = _runs(tiny_model, glue_dir, "stsb", [1, 2, 3], 1)
    poisoned = runs[1]["train"]
    labels = poisoned.labels.astype(float)
    labels[np.arange(len(labels)) % 7 == 3] = np.nan  # in some batch of the second epoch at the latest
    runs[1] = {**runs[1], "train": replace(poisoned, labels=labels)}
    with_failure = fine_tune_many(runs)
    without = fine_tune_many([runs[0], runs[2]])
    assert isinstance(with_failure[1], TrialFailed)
    with pytest.raises(TrialFailed) as alone:
        fine_tune(**runs[1])
    assert str(with_failure[1]) == str(alone.value)  # the same step as alone
    _assert_same_run(with_failure[0], without[0])
    _assert_same_run(with_failure[2], without[1])


def test_a_run_does_not_depend_on_its_batch_mates(tiny_model: Path, glue_dir: Path) -> None:
    """What holds wherever the masks are the run's own (on CUDA too, where they are not the lone run's)."""
    runs = _runs(tiny_model, glue_dir, "sst2", [1, 2, 3], 1, epochs=1)
    three, two = fine_tune_many(runs), fine_tune_many([runs[0], runs[2]])
    _assert_same_run(three[0], two[0])
    _assert_same_run(three[2], two[1])


def test_what_cannot_fuse_runs_alone_and_says_why(tiny_model: Path, glue_dir: Path) -> None:
    runs = _runs(tiny_model, glue_dir, "sst2", [1, 2], 2, epochs=1)
    assert fusion_blocker(runs) is None
    assert fusion_blocker(runs[:1]) == "a single run"
    other_rate = [runs[0], {**runs[1], "learning_rate": 2e-3}]
    assert fusion_blocker(other_rate) == "the runs differ in learning_rate"
    outcomes = fine_tune_many(other_rate)
    assert [o.extra["fusion"] for o in outcomes] == ["alone: the runs differ in learning_rate"] * 2


def test_the_reinit_arm_fuses_and_an_adapter_arm_runs_alone(tiny_model: Path, glue_dir: Path) -> None:
    """Re-initialised layers are drawn per run by the arm, from the run's seed: stacked, they train as alone.
    LoRA adds adapter modules the stacked model does not know: its runs train alone and say so."""
    from freezestats.arms import LoraArm, ReinitArm

    reinit = ReinitArm()
    runs = [{**run, "arm": reinit} for run in _runs(tiny_model, glue_dir, "sst2", [1, 2], 1, epochs=1)]
    fused = fine_tune_many(runs)
    assert [o.extra["fusion"] for o in fused] == ["fused", "fused"]
    for run, outcome in zip(runs, fused, strict=True):
        _assert_same_run(outcome, fine_tune(**run))
    lora = LoraArm()
    runs = [{**run, "arm": lora} for run in _runs(tiny_model, glue_dir, "sst2", [1, 2], 2, epochs=1)]
    reasons = [o.extra["fusion"] for o in fine_tune_many(runs)]
    assert all(r.startswith("alone: parameters the fused trainer does not know (an adapter?)") for r in reasons)
    assert "lora_A" in reasons[0]


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_the_stacked_pass_and_each_run_alone_give_the_lone_models_logits(
    family: str, request: pytest.FixtureRequest
) -> None:
    # On a GPU the fused evaluator runs the K runs through a batch together; on a CPU each run alone through the
    # stacked model (StackedBert.alone). CI has no GPU, so the batched path is checked here: both give what the
    # lone models compute, padding included (4-D SDPA with the runs folded into the batch).
    from freezestats.encoder.backbone import load_classifier
    from freezestats.training.fused._stacked import StackedBert

    folder = request.getfixturevalue("tiny_model" if family == "bert" else "tiny_roberta")
    models = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        model = load_classifier(str(folder), 2, False).eval()
        for param in getattr(model, family).embeddings.parameters():
            param.requires_grad_(False)
        models.append(model)
    stacked = StackedBert(models).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 90, (4, 9), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[3, 3:] = 0
    ids = ids.masked_fill(mask == 0, 0)  # the tokenizer's padding id (RoBERTa's position ids skip it)
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    shared = {name: value.unsqueeze(0) for name, value in inputs.items()}  # one batch for every run
    with torch.no_grad():
        together = stacked.logits(shared)
        for k, model in enumerate(models):
            with stacked.alone(k):
                alone = stacked.logits(shared)
            expected = model(**inputs).logits
            torch.testing.assert_close(alone[0], expected, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(together[k], expected, rtol=1e-5, atol=1e-6)
    out = "classifier.weight" if family == "bert" else "classifier.out_proj.weight"
    assert stacked.weights[out].dim() == 3  # alone() gave the stacked weights back

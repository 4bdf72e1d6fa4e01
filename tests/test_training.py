"""The fine-tuning loop on a tiny local model: protocol, determinism, metrics, failures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from freezestats.encoder.backbone import load_tokenizer
from freezestats.exceptions import SpecError, TrialFailed
from freezestats.spec import TrainingSpec
from freezestats.tasks import get_task
from freezestats.tasks.data import load_task_data
from freezestats.tasks.subsets import nested_subsets, validation_halves
from freezestats.training import cpu_has_native_bf16, data_orders, encode_split, fine_tune, resolve_precision


def _inputs(task_name: str, model: Path, glue_dir: Path, n_train: int = 48, n_val: int = 120):
    task = get_task(task_name)
    data = load_task_data(task, glue_dir)
    tokenizer = load_tokenizer(str(model))
    rows = nested_subsets(data.train_labels, [n_train], draw_seed=0, regression=task.is_regression)[n_train]
    train = data.train.iloc[rows]
    val = data.validation.iloc[:n_val]
    cols = task.text_columns
    enc_train = encode_split([train[c].tolist() for c in cols], train["label"].to_numpy(), tokenizer, 64)
    enc_val = encode_split([val[c].tolist() for c in cols], val["label"].to_numpy(), tokenizer, 64)
    select, score = validation_halves(enc_val.labels, regression=task.is_regression)
    return task, tokenizer, enc_train, enc_val, select, score


def _fine_tune(
    model: Path,
    glue_dir: Path,
    spec: TrainingSpec,
    task_name: str = "sst2",
    seed: int = 1,
    frozen: int = 0,
    learning_rate: float | None = None,
    rows: tuple[int, int] | None = None,
    **kwargs,
):
    """``fine_tune`` on the small real splits of ``_inputs`` (``rows``: train and validation rows, default
    ``_inputs``'s), named as the runner names them."""
    task, tokenizer, train, val, select, score = _inputs(task_name, model, glue_dir, *(rows or ()))
    train, val = replace(train, name=f"{task_name}/train"), replace(val, name=f"{task_name}/validation")
    return fine_tune(
        model_name=str(model),
        task=task,
        metric=task.metrics[0],
        train=train,
        validation=val,
        select_idx=select,
        score_idx=score,
        freezing="freeze",
        frozen_layers=frozen,
        seed=seed,
        learning_rate=spec.learning_rate if learning_rate is None else learning_rate,
        training=spec,
        tokenizer=tokenizer,
        **kwargs,
    )


def _run(
    model: Path,
    glue_dir: Path,
    task_name: str = "sst2",
    seed: int = 1,
    frozen: int = 0,
    order_seed: int | None = None,
    **training,
):
    spec = TrainingSpec(**{"epochs": 2, "batch_size": 16, "eval_every_epochs": 0.5, "device": "cpu", **training})
    extra = {} if order_seed is None else {"order_seed": order_seed}  # absent: the call every trial made before
    return _fine_tune(model, glue_dir, spec, task_name=task_name, seed=seed, frozen=frozen, **extra)


def test_protocol_steps_and_evaluations(tiny_model: Path, glue_dir: Path) -> None:
    outcome = _run(tiny_model, glue_dir)
    # 48 examples / batch 16 = 3 steps per epoch, 2 epochs; half an epoch rounds to every 2 steps, plus the last.
    assert outcome.n_steps == 6
    assert [p["step"] for p in outcome.curve] == [2, 4, 6]
    assert outcome.summary.final_dev == outcome.curve[-1]["full"]
    assert outcome.summary.best_dev == max(p["full"] for p in outcome.curve)
    assert outcome.final_predictions.shape == (120,) and outcome.final_logits.shape == (120, 2)
    assert outcome.curve[-1]["metrics"]["accuracy"] == pytest.approx(
        float(np.mean(outcome.final_predictions == _inputs("sst2", tiny_model, glue_dir)[3].labels))
    )
    assert outcome.device == "cpu" and outcome.wall_seconds > 0
    # The kept checkpoints are the ones the summary's metrics came from.
    steps = [p["step"] for p in outcome.curve]
    assert outcome.checkpoints["best"].step == steps[outcome.summary.best_step]
    assert outcome.checkpoints["heldout"].step == steps[outcome.summary.heldout_step]
    assert outcome.checkpoints["final"].step == steps[-1]
    labels = _inputs("sst2", tiny_model, glue_dir)[3].labels
    score = _inputs("sst2", tiny_model, glue_dir)[5]
    assert np.mean(outcome.checkpoints["best"].predictions == labels) == pytest.approx(outcome.summary.best_dev)
    heldout = outcome.checkpoints["heldout"].predictions
    assert np.mean(heldout[score] == labels[score]) == pytest.approx(outcome.summary.heldout)
    assert outcome.precision == ("bf16" if cpu_has_native_bf16() else "fp32")  # what "auto" ran, recorded


def test_same_seed_gives_identical_metrics_on_cpu(tiny_model: Path, glue_dir: Path) -> None:
    a, b = _run(tiny_model, glue_dir, seed=3), _run(tiny_model, glue_dir, seed=3)
    assert [p["full"] for p in a.curve] == [p["full"] for p in b.curve]
    np.testing.assert_array_equal(a.final_logits, b.final_logits)
    c = _run(tiny_model, glue_dir, seed=4)
    assert not np.array_equal(a.final_logits, c.final_logits)  # the seed matters (head init, order, dropout)


def test_freezing_reduces_trainable_parameters(tiny_model: Path, glue_dir: Path) -> None:
    full = _run(tiny_model, glue_dir, frozen=0, epochs=0.5)
    all_frozen = _run(tiny_model, glue_dir, frozen=2, epochs=0.5)
    assert full.trainable_params == full.total_params
    head = 32 * 32 + 32 + 32 * 2 + 2  # pooler dense + classifier of the tiny BERT
    assert all_frozen.trainable_params == head


def test_fine_tunes_strategy_keyword_from_before_warns_and_means_freezing() -> None:
    from freezestats.training import _renamed_freezing

    with pytest.warns(DeprecationWarning, match=r"use freezing=\.\.\."):
        assert _renamed_freezing(None, "noop") == "noop"
    assert _renamed_freezing("freeze", None) == "freeze" and _renamed_freezing(None, None) is None
    with pytest.raises(TypeError, match="not both"):
        _renamed_freezing("freeze", "freeze")


def test_regression_task_has_one_output(tiny_model: Path, glue_dir: Path) -> None:
    outcome = _run(tiny_model, glue_dir, task_name="stsb", epochs=0.5)
    assert outcome.final_logits.shape == (120, 1)
    assert outcome.final_predictions.dtype == np.float64
    assert set(outcome.final_metrics) == {"pearson", "spearman"}


def test_pair_task_is_encoded_as_one_sequence_pair(tiny_model: Path, glue_dir: Path) -> None:
    _, tokenizer, train, *_ = _inputs("mrpc", tiny_model, glue_dir)
    first = train.features[0]
    assert first["input_ids"].count(tokenizer.sep_token_id) == 2  # [CLS] a [SEP] b [SEP]
    assert set(first["token_type_ids"]) == {0, 1}


def test_diverging_loss_fails_the_trial(tiny_model: Path, glue_dir: Path) -> None:
    with pytest.raises(TrialFailed, match="training loss became"):
        _run(tiny_model, glue_dir, task_name="stsb", learning_rate=1e12, max_grad_norm=0.0, epochs=2)


def test_fp16_on_cpu_is_refused() -> None:
    import torch

    with pytest.raises(SpecError, match="needs a CUDA device"):
        resolve_precision("fp16", torch.device("cpu"))


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [({"avx512_bf16": True}, "bf16"), ({"amx_bf16": True}, "bf16"), ({"avx512_f": True, "avx2": True}, "fp32")],
)
def test_auto_precision_on_cpu_is_bf16_only_with_native_bf16(monkeypatch, capabilities, expected) -> None:
    import torch

    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    assert resolve_precision("auto", torch.device("cpu")) == expected
    assert resolve_precision("fp32", torch.device("cpu")) == "fp32"  # an explicit choice always wins


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_precision_that_ran_is_recorded(tiny_model: Path, glue_dir: Path, precision: str) -> None:
    outcome = _run(tiny_model, glue_dir, precision=precision)
    assert outcome.precision == precision and outcome.final_logits.dtype == np.float32


def test_data_orders_are_the_permutations_the_seed_always_drew() -> None:
    import torch

    generator = torch.Generator().manual_seed(7)  # what fine_tune drew from before order seeds existed
    before = [torch.randperm(10, generator=generator).tolist() for _ in range(3)]
    orders = data_orders(10, 7)
    assert [next(orders) for _ in range(3)] == before  # one new permutation per epoch, the same ones
    assert next(data_orders(10, 8)) != before[0]


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Record, for each ``fine_tune`` call, the model's state before training and the epochs' data orders."""
    import freezestats.training as training_module

    runs: list[dict] = []
    real_load, real_orders = training_module.load_classifier, training_module.data_orders

    def load_classifier(*args, **kwargs):
        model = real_load(*args, **kwargs)
        runs.append({"init": {k: v.detach().clone() for k, v in model.state_dict().items()}, "orders": []})
        return model

    def data_orders(n_examples: int, order_seed: int):
        for order in real_orders(n_examples, order_seed):
            runs[-1]["orders"].append(order)
            yield order

    monkeypatch.setattr(training_module, "load_classifier", load_classifier)
    monkeypatch.setattr(training_module, "data_orders", data_orders)
    return runs


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


def test_order_seed_equal_to_the_seed_is_the_run_without_one(tiny_model: Path, glue_dir: Path, watched) -> None:
    plain = _run(tiny_model, glue_dir, seed=3)
    same = _run(tiny_model, glue_dir, seed=3, order_seed=3)
    np.testing.assert_array_equal(plain.final_logits, same.final_logits)  # bit-identical, not merely close
    assert [p["full"] for p in plain.curve] == [p["full"] for p in same.curve]
    assert plain.final_train_loss == same.final_train_loss
    assert watched[0]["orders"] == watched[1]["orders"] and _same_state(watched[0]["init"], watched[1]["init"])


def test_order_seed_changes_the_data_order_and_not_the_initialisation(
    tiny_model: Path, glue_dir: Path, watched
) -> None:
    base = _run(tiny_model, glue_dir, seed=3, order_seed=3)
    other_order = _run(tiny_model, glue_dir, seed=3, order_seed=11)
    other_init = _run(tiny_model, glue_dir, seed=5, order_seed=3)
    base_run, order_run, init_run = watched
    assert len(base_run["orders"]) == 2  # 2 epochs, one permutation each
    # Only the order seed changed: the same head (and whole model) at the start, another order of the examples.
    assert _same_state(base_run["init"], order_run["init"])
    assert base_run["orders"] != order_run["orders"]
    assert sorted(order_run["orders"][0]) == sorted(base_run["orders"][0])  # the same examples, reordered
    # Only the seed changed: another head initialisation, the very same data order.
    assert base_run["orders"] == init_run["orders"]
    assert not _same_state(base_run["init"], init_run["init"])
    changed = {k for k in base_run["init"] if not bool((base_run["init"][k] == init_run["init"][k]).all())}
    assert "classifier.weight" in changed and not any(k.startswith("bert.encoder.") for k in changed)
    assert not np.array_equal(base.final_logits, other_order.final_logits)  # the order matters to the result
    assert not np.array_equal(base.final_logits, other_init.final_logits)

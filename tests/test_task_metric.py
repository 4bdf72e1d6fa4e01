"""Each task judged on its own metric: re-scoring stored predictions, the checkpoint rule, failures on the metric."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from freezestats.analysis.pipeline import analyze
from freezestats.analysis.task_metrics import parse_task_metrics
from freezestats.exceptions import ModelFitError
from freezestats.results.rescore import rescore_runs
from freezestats.tasks.metrics import mcc

N_ITEMS = 400


def _cola_like(seeds: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs on an imbalanced set (70% class 1) whose accuracy-chosen checkpoints predict the majority class for
    every item (accuracy 0.70, MCC 0), while their last checkpoints have learned (MCC about 0.4)."""
    rng = np.random.default_rng(3)
    labels = (rng.random(N_ITEMS) < 0.7).astype(int)
    half = np.where(np.arange(N_ITEMS) % 2 == 0, "score", "select")
    runs, items, trial = [], [], 0
    for size in (200, 1000):
        for depth in (0, 2):
            for seed in range(1, seeds + 1):
                learned = np.where(rng.random(N_ITEMS) < 0.8, labels, 1 - labels)
                majority = np.ones(N_ITEMS, dtype=int)
                majority[rng.choice(N_ITEMS, 3, replace=False)] = 0  # >= 95% one class: at the majority class
                acc = float(np.mean(majority == labels))
                runs.append({"trial": trial, "state": "complete", "role": "grid", "task": "cola", "model": "m",
                             "metric": "accuracy", "frozen_layers": depth, "train_size": size, "subset_draw": 0,
                             "seed": seed, "order_seed": seed, "best_dev": acc,
                             "heldout": float(np.mean(majority[half == "score"] == labels[half == "score"])),
                             "final_dev": float(np.mean(learned == labels)), "failed": True,
                             "majority_baseline": float(np.mean(labels == 1)), "n_layers": 6,
                             "top_class_share_best": 1.0, "top_class_share_heldout": 1.0,
                             "top_class_share_final": 1.0})  # fmt: skip
                items.append(pd.DataFrame({"trial": trial, "task": "cola", "frozen_layers": depth, "train_size": size,
                                           "subset_draw": 0, "seed": seed, "order_seed": seed,
                                           "idx": np.arange(N_ITEMS), "label": labels, "half": half,
                                           "prediction_best": majority, "prediction_heldout": majority,
                                           "prediction_final": learned}))  # fmt: skip
                trial += 1
    return pd.DataFrame(runs), pd.concat(items, ignore_index=True)


@pytest.fixture(scope="module")
def cola_like() -> tuple[pd.DataFrame, pd.DataFrame]:
    return _cola_like()


def test_rescoring_scores_each_checkpoint_on_the_metric(cola_like: tuple) -> None:
    runs, items = cola_like
    scored = rescore_runs(runs, items, "mcc")
    first = items[items["trial"] == 0]
    assert scored["final_dev"].iloc[0] == pytest.approx(mcc(first["prediction_final"], first["label"]))
    score = first[first["half"] == "score"]
    assert scored["heldout"].iloc[0] == pytest.approx(mcc(score["prediction_heldout"], score["label"]))
    assert (scored["best_dev"].abs() < 0.15).all() and (scored["final_dev"] > 0.3).all()
    assert (scored["majority_baseline"] == 0.0).all() and (scored["metric"] == "mcc").all()
    assert (scored["selected_on"] == "accuracy").all()
    assert (scored["top_class_share_final"] < 0.95).all() and (scored["top_class_share_best"] > 0.99).all()


def test_runs_good_on_mcc_are_not_failed_when_judged_on_mcc(cola_like: tuple) -> None:
    runs, items = cola_like
    on_accuracy = analyze(runs, items=items, n_boot=50)
    rates = on_accuracy.tables["failure_rates"]
    assert (rates["n_failed"] == rates["n"]).all()  # at the accuracy-chosen checkpoint every run is at majority
    on_mcc = analyze(runs, items=items, n_boot=50, task_metrics={"cola": "mcc"})
    assert on_mcc.settings["response_of"] == {"cola": "final_dev"}  # chosen on accuracy: scored at the last
    assert on_mcc.settings["failure_rule"]["cola"] == {"rule": "dominant_class", "checkpoint": "final"}
    assert (on_mcc.tables["failure_rates"]["n_failed"] == 0).all()
    assert on_mcc.tables["baseline_check"]["beats_baseline"].all()
    assert any("scored on mcc" in w for w in on_mcc.warnings)


def test_an_explicit_response_is_kept(cola_like: tuple) -> None:
    runs, items = cola_like
    result = analyze(runs, items=items, n_boot=50, task_metrics={"cola": "mcc"}, response="heldout")
    assert result.settings["response_of"] == {} and result.settings["metric_of"] == {"cola": "mcc"}


def test_task_metric_input_errors_are_one_line(cola_like: tuple) -> None:
    runs, items = cola_like
    with pytest.raises(ModelFitError, match="needs their per-item predictions"):
        analyze(runs, task_metrics={"cola": "mcc"})
    with pytest.raises(ModelFitError, match="no task 'sst2'"):
        analyze(runs, items=items, task_metrics={"sst2": "mcc"})
    with pytest.raises(ModelFitError, match="the metrics are"):
        analyze(runs, items=items, task_metrics={"cola": "bleu"})
    with pytest.raises(ModelFitError, match="TASK=METRIC"):
        parse_task_metrics(["cola"])
    assert parse_task_metrics(["cola=mcc", " mrpc = f1 "]) == {"cola": "mcc", "mrpc": "f1"}

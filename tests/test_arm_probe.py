"""The ``probe`` arm: cached frozen features, C chosen on the training subset only, the metrics every arm reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _factories import simple_spec

from freezestats.arms import ProbeArm, get_arm
from freezestats.arms._probe import clear_feature_cache, features
from freezestats.arms._probe_fit import _fit, _predict
from freezestats.exceptions import SpecError
from freezestats.spec import parse_spec
from freezestats.tasks import get_task

SENTENCES = ["a fine film", "dull and long", "I loved it", "terrible acting", "great", "not good at all"] * 2


def _probe_spec(arm: dict, **sections) -> dict:
    raw = simple_spec(**sections)
    del raw["grid"]["frozen_layers"]
    raw["arms"] = [{"kind": "probe", **arm}]
    return raw


def _separable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    return rng.normal(size=(n, 5)) + 1.5 * y[:, None], y


def test_pooling_is_an_axis_and_levels_may_say_last() -> None:
    spec = parse_spec(_probe_spec({"pooling": ["mean", "cls"], "layers": ["last", 0]}))
    variants = spec.arm_variants()
    assert [(v.name, v.options, v.learning_rate) for v in variants] == [
        ("probe-mean", {"pooling": "mean"}, None),
        ("probe-cls", {"pooling": "cls"}, None),
    ]
    assert ProbeArm.resolve_level("last", 6) == 6 and ProbeArm.resolve_level(2, 6) == 2
    for bad, message in (
        ({"layers": ["first"]}, r"`arms\[0\]\.layers\[0\]` must be 'last' or a layer index >= 0"),
        ({"layers": [1], "pooling": ["max"]}, r"`arms\[0\]\.pooling` must be one of \['mean', 'cls'\]"),
        ({"layers": [1], "learning_rate": 1e-3}, r"Unknown key 'arms\[0\]\.learning_rate' for arm kind 'probe'"),
    ):
        with pytest.raises(SpecError, match=message):
            parse_spec(_probe_spec(bad))


def test_the_fit_cross_validates_c_on_the_training_subset_and_is_deterministic() -> None:
    task = get_task("sst2")
    x, y = _separable(60, 0)
    one, again = _fit(x, y, task, "accuracy"), _fit(x, y, task, "accuracy")
    assert one.folds == 5 and one.c is not None and one.c == again.c
    x_dev, _ = _separable(40, 1)
    predictions, logits = _predict(one.model, x_dev, task)
    assert np.array_equal(predictions, _predict(again.model, x_dev, task)[0])
    assert logits.shape == (40, 2) and np.allclose(np.exp(logits).sum(axis=1), 1, atol=1e-5)
    assert one.n_params == 5 + 1
    few = _fit(x[:6], np.array([0, 0, 0, 0, 1, 1]), task, "accuracy")  # smallest class 2: 2 folds
    assert few.folds == 2
    single = _fit(x[:4], np.zeros(4, dtype=int), task, "accuracy")  # one class: a constant predictor
    assert single.c is None and (_predict(single.model, x_dev, task)[0] == 0).all()


def test_features_are_computed_once_and_shared_by_subsets(tiny_model: Path) -> None:
    import torch

    from freezestats.encoder.backbone import load_tokenizer
    from freezestats.training import encode_split

    clear_feature_cache()
    tokenizer = load_tokenizer(str(tiny_model))
    split = encode_split([SENTENCES], np.arange(len(SENTENCES)) % 2, tokenizer, 32, "unit/train")
    cpu = torch.device("cpu")
    subset, cached = features(str(tiny_model), split.subset([1, 3, 5]), tokenizer, "mean", 4, cpu)
    assert not cached and subset.shape == (3, 3, 32)  # 2 layers + the embeddings, hidden 32
    whole, cached = features(str(tiny_model), split, tokenizer, "mean", 4, cpu)
    assert not cached and np.array_equal(whole[[1, 3, 5]], subset)  # the subset's rows were reused
    again, cached = features(str(tiny_model), split, tokenizer, "mean", 4, cpu)
    assert cached and np.array_equal(again, whole)
    cls, _ = features(str(tiny_model), split, tokenizer, "cls", 4, cpu)
    assert not np.allclose(cls, whole)
    other = encode_split([SENTENCES[::-1]], np.zeros(len(SENTENCES), int), tokenizer, 32, "unit/train")
    reordered, cached = features(str(tiny_model), other, tokenizer, "mean", 4, cpu)  # same name, other order
    assert cached and np.array_equal(reordered, whole[::-1])  # recognised by their tokens, not positions


def test_a_probe_study_reports_comparable_metrics_with_no_seed_variance(
    tmp_path: Path, tiny_model: Path, glue_dir: Path
) -> None:
    from freezestats.results.export import results_table
    from freezestats.runner import run_study
    from freezestats.study.trials import load_study, open_storage

    clear_feature_cache()
    spec = parse_spec(
        _probe_spec(
            {"pooling": ["mean", "cls"], "layers": [0, "last"]},
            model=str(tiny_model),
            grid={"train_sizes": [32, 64], "seeds": [1, 2]},
        )
    )
    storage = f"sqlite:///{tmp_path / 'probe.db'}"
    run_study(spec, storage, data_dir=glue_dir, show_progress=False)
    study = load_study(open_storage(storage), spec.name)
    table = results_table(study)
    assert len(table) == 2 * 2 * 2 * 2 and set(table["arm"]) == {"probe-mean", "probe-cls"}
    assert set(table["arm_level"]) == {0, 2} and table["learning_rate"].isna().all()
    assert table["n_steps"].eq(0).all() and table["best_dev"].eq(table["final_dev"]).all()
    assert table["heldout"].between(0, 1).all() and table["n_correct"].notna().all()
    by_seed = table.pivot_table(index=["arm", "arm_level", "train_size"], columns="seed", values="heldout")
    assert np.array_equal(by_seed[1].to_numpy(), by_seed[2].to_numpy())  # deterministic: no seed variance
    cached = [t.user_attrs["eval_prefix_cached"] for t in study.trials]
    assert cached.count(False) == 2  # the validation features: once per pooling, then reused
    assert table["trainable_params"].eq(32 + 1).all()  # a binary probe on 32 features
    assert all(t.user_attrs["curve"][0]["C"] > 0 for t in study.trials)  # the C cross-validation chose
    assert table["predictions_artifact"].notna().all()
    from freezestats.results.item_predictions import study_item_predictions

    items = study_item_predictions(storage)  # the per-item table the item-level statistics read
    assert len(items) == len(table) * 872 and {"arm", "arm_level"} <= set(items.columns)
    one = items[items["trial"] == table["trial"].iloc[0]]
    assert (one["prediction_best"] == one["prediction_final"]).all()  # one model: one set of predictions
    correct = int((one["prediction_final"] == one["label"]).sum())
    assert correct == table.set_index("trial").loc[table["trial"].iloc[0], "n_correct"]
    assert get_arm("probe") is ProbeArm

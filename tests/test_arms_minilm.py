"""One real run of every arm: the packaged MiniLM-L6 on real SST-2 at n = 50, one epoch (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _factories import SMALL_VALIDATION_ROWS, simple_spec

from freezestats.spec import parse_spec


@pytest.mark.slow
def test_every_arm_runs_on_minilm_and_real_sst2(tmp_path: Path, small_glue_dir: Path) -> None:
    from freezestats.arms._probe import clear_feature_cache
    from freezestats.results.export import results_table
    from freezestats.runner import run_study
    from freezestats.study.trials import load_study, open_storage

    clear_feature_cache()
    raw = simple_spec(
        grid={"train_sizes": [50], "seeds": [1]},
        training={"epochs": 1, "eval_every_epochs": 1, "eval_batch_size": 128, "device": "cpu"},
    )
    del raw["grid"]["frozen_layers"]
    raw["arms"] = [
        {"kind": "freeze", "frozen_layers": [0, 4]},
        {"kind": "reinit", "top_layers": [2]},
        {"kind": "lora", "rank": [8]},
        {"kind": "probe", "pooling": ["mean", "cls"], "layers": ["last"]},
    ]
    spec = parse_spec(raw)
    storage = f"sqlite:///{tmp_path / 'minilm.db'}"
    run_study(spec, storage, data_dir=small_glue_dir, show_progress=False)
    table = results_table(load_study(open_storage(storage), spec.name)).set_index(["arm", "arm_level"])
    print(table[["best_dev", "final_dev", "heldout", "trainable_params", "n_steps", "wall_seconds"]].to_string())
    assert sorted(table.index) == [
        ("freeze", 0),
        ("freeze", 4),
        ("lora", 8),
        ("probe-cls", 6),
        ("probe-mean", 6),
        ("reinit", 2),
    ]
    assert table["heldout"].between(0, 1).all() and table["n_eval"].eq(SMALL_VALIDATION_ROWS).all()
    assert table.loc[("freeze", 0), "n_steps"] == 4 and table.loc[("probe-mean", 6), "n_steps"] == 0
    total = table.loc[("freeze", 0), "trainable_params"]
    assert table.loc[("reinit", 2), "trainable_params"] == total
    assert table.loc[("freeze", 4), "trainable_params"] < total
    assert table.loc[("lora", 8), "trainable_params"] < table.loc[("freeze", 4), "trainable_params"]
    assert table.loc[("probe-mean", 6), "trainable_params"] == 384 + 1
    # the probe's numbers are its one model's: best_dev = final_dev, and no seed or step enters them (at n = 50
    # the 5-fold CV on 10-example folds may find no C better than the majority class and pick the smallest)
    for probe in ("probe-mean", "probe-cls"):
        assert table.loc[(probe, 6), "best_dev"] == table.loc[(probe, 6), "final_dev"]

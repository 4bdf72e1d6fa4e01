"""``[evaluation] pool``: items reserved from train before any subset, scored once per run; subsets per seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _factories import simple_spec, write_spec
from optuna.trial import TrialState
from sklearn.metrics import matthews_corrcoef

from freezestats.cli.main import main
from freezestats.runner import prepare_study
from freezestats.spec.study import parse_spec
from freezestats.study.trials import load_study, open_storage
from freezestats.tasks import get_task
from freezestats.tasks.data import load_task_data
from freezestats.tasks.pool import reserve_pool, sentence_rows

SMALL_GLUE = True  # runs score 256 dev rows per task: these tests check the pool's plumbing, not scores


def test_sentences_are_the_rows_no_other_row_holds_as_whole_tokens() -> None:
    rows = pd.Series(["a good film", "good", "a good film .", "film", "bad", "a goo", "bad"])
    assert sentence_rows(rows).tolist() == [2, 4, 5]  # "a goo" is not a run of whole tokens of row 2


def test_sst2_pool_sentences_never_train_on_the_real_data(full_glue_dir: Path) -> None:
    """The two leakage rules, checked by plain substring search over space-padded texts."""
    data = load_task_data(get_task("sst2"), full_glue_dir)
    sentences = sentence_rows(data.train["sentence"])
    assert len(sentences) == 6885
    kept, pool = reserve_pool(data, 5000)
    assert len(pool) == 5000 and pool.population == "SST-2 sentences outside training"
    sentence_labels = data.train_labels[sentences]
    assert abs(pool.labels.mean() - sentence_labels.mean()) < 0.005  # stratified like the sentences

    def padded(texts: pd.Series) -> list[str]:
        return [" " + " ".join(t.split()) + " " for t in texts]

    trainable, pooled = padded(kept.train["sentence"]), padded(pool.items["sentence"])
    assert 15_000 < len(trainable) < 30_000
    shortest = min(len(p) for p in pooled)
    long_rows = [row for row in trainable if len(row) >= shortest]  # only these could hold a pool sentence
    assert not [row for row in long_rows if any(p in row for p in pooled if len(p) <= len(row))]
    others = set(padded(data.train["sentence"].iloc[sentences])) - set(pooled)
    assert len(others) == 6885 - 5000
    haystack = "\n".join(others)
    assert [row for row in trainable if row not in haystack] == []


def test_a_pool_is_reserved_before_the_subsets_and_scored_once_per_run(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, _spec_dict(tiny_model))
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]
    assert main(args) == 0
    assert main(["export", "--storage", storage, "-o", str(tmp_path / "results.csv")]) == 0
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == 8 and (table["n_pool"] == 120).all() and table["pool_score"].between(-1, 1).all()
    assert sorted(table["subset_draw"].unique()) == [1, 2]  # each seed trains on its own draw
    assert (table["subset_draw"] == table["seed"]).all()

    study = load_study(open_storage(storage), None)
    stored = study.user_attrs["evaluation_pool:cola"]
    assert stored["n"] == 120
    # the subsets: nested within a seed, different between seeds, and never a pool text
    one, two = study.user_attrs["subsets:cola:draw=1"], study.user_attrs["subsets:cola:draw=2"]
    assert set(one["32"]) < set(one["64"]) and set(two["32"]) < set(two["64"]) and one["64"] != two["64"]
    prepared = prepare_study(parse_spec(_spec_dict(tiny_model)), glue_dir)
    task = prepared.tasks["cola"]
    pool_texts = set(task.pool.items["sentence"])
    trained = task.data.train["sentence"].iloc[np.unique(one["64"] + two["64"])]
    assert not pool_texts & set(trained)
    assert task.pool.identity(["sentence"]) == stored["identity"]

    trial = study.get_trials(states=(TrialState.COMPLETE,))[0]
    from optuna.artifacts import FileSystemArtifactStore, download_artifact

    path = tmp_path / "pool.parquet"
    store = FileSystemArtifactStore(study.user_attrs["artifact_dir"])
    download_artifact(artifact_store=store, artifact_id=trial.user_attrs["pool_artifact"], file_path=str(path))
    items = pd.read_parquet(path)
    assert len(items) == 120 and (items["label"].to_numpy() == task.pool.labels).all()
    assert trial.user_attrs["metric"] == "mcc"  # CoLA is judged on its own metric, on the pool too
    mcc = matthews_corrcoef(items["label"], items["prediction"])
    assert mcc == pytest.approx(trial.user_attrs["pool_score"])

    # a resume keeps the same pool (and says nothing is left)
    assert main(args) == 0
    assert load_study(open_storage(storage), None).user_attrs["evaluation_pool:cola"] == stored

    # the plan reads the pool's items; two seeds are too few pairs for an interval, and it says so
    capsys.readouterr()
    assert main(["plan", "--storage", storage]) == 0
    out = capsys.readouterr().out
    assert "cola: scored on 120 items (cola items drawn like its train set, outside training)" in out
    assert out.count("too few pairs in which both runs trained") == 2  # depth 2 at n = 32 and 64

    assert (
        main(
            [
                "export",
                "--storage",
                storage,
                "-o",
                str(tmp_path / "r.csv"),
                "--predictions",
                str(tmp_path / "p.parquet"),
            ]
        )
        == 0
    )
    pool_items = pd.read_parquet(tmp_path / "p-pool.parquet")
    assert len(pool_items) == 8 * 120 and set(pool_items["trial"]) == set(table["trial"])


def _spec_dict(tiny_model: Path) -> dict:
    return simple_spec(
        model=str(tiny_model),
        tasks=["cola"],
        grid={"frozen_layers": [0, 2], "train_sizes": [32, 64], "seeds": [1, 2], "subsets": "per_seed"},
        evaluation={"pool": 120},
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"evaluation": {"pool": 9_000_000}}, "asks for more items than the"),
        ({"evaluation": {"pool": 3}}, "evaluation.pool"),
        ({"evaluation": {"pool": 100, "share": 0.1}}, "evaluation.share"),
        ({"grid": {"subsets": "per_run"}}, "grid.subsets"),
        ({"grid": {"subsets": "per_seed", "subset_draws": 2}}, "leave `grid.subset_draws` at 1"),
    ],
)
def test_bad_pool_or_subset_settings_are_one_line_and_exit_2(
    tmp_path: Path,
    tiny_model: Path,
    glue_dir: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict,
    message: str,
) -> None:
    base = simple_spec(model=str(tiny_model), tasks=["cola"])
    for key, value in change.items():
        base[key] = {**base.get(key, {}), **value}
    spec = write_spec(tmp_path, base)
    db = tmp_path / "study.db"
    args = ["run", "--study", str(spec), "--storage", f"sqlite:///{db}", "--data-dir", str(glue_dir), "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not db.exists() or load_study(open_storage(f"sqlite:///{db}"), None).get_trials() == []


def test_a_collapsed_run_is_read_off_its_select_half_only() -> None:
    from freezestats.stats.decision.collapse import collapsed

    rows = []
    for trial, select, score in ((1, [1] * 19 + [0], [0] * 20), (2, [1] * 18 + [0, 0], [1] * 20)):
        rows += [{"trial": trial, "half": "select", "prediction_heldout": p} for p in select]
        rows += [{"trial": trial, "half": "score", "prediction_heldout": p} for p in score]
    flags = collapsed(pd.DataFrame(rows), regression=False)
    assert flags.to_dict() == {1: True, 2: False}  # 95% one class on the select half; the score half is never read

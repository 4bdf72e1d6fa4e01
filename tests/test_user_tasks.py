"""A user's own task in the spec (``[[tasks]]``, task files): file formats, kinds, label maps, metric defaults.

Every file format is read into the same frame; every kind gets its label map, default metrics, majority baseline
and "learned nothing" rule; specs name packaged tasks as before and keep their hash. The checks that refuse bad
data are in ``test_user_task_checks.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _factories import simple_spec
from _user_data import LEVELS, rows, task_table, user_spec, write
from sklearn.metrics import f1_score

from freezestats.cli.main import main
from freezestats.exceptions import SpecError
from freezestats.spec import StudySpec, load_spec, parse_spec
from freezestats.stats.items.pseudo_values import pseudo_values
from freezestats.tasks.data import load_task_data
from freezestats.tasks.metrics import compute_metrics, is_failed_run, macro_f1, majority_baseline


def _load(folder: Path, **task: object):
    spec = parse_spec(simple_spec(tasks=[task_table(**task)]), source=str(folder / "spec.toml"))
    return spec, load_task_data(spec.task("tickets"))


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_file_format_reads_into_the_same_task(tmp_path: Path, suffix: str) -> None:
    write(rows(60), tmp_path / f"train{suffix}")
    write(rows(15, prefix="dev"), tmp_path / f"dev{suffix}")
    spec, data = _load(tmp_path, train=f"train{suffix}", validation=f"dev{suffix}", id_column="id")
    assert data.task.label_names == ("high", "low", "mid")  # built from train, sorted
    assert data.task.num_labels == 3 and data.task.kind_name == "multiclass"
    assert list(data.train.columns) == ["text", "label"] and len(data.train) == 60 and len(data.validation) == 15
    assert data.train["label"].tolist()[:3] == [1, 2, 0]  # low, mid, high
    assert data.origin.validation_ids[:2].tolist() == ["dev-0", "dev-1"]  # the user's row ids
    assert data.origin.carved is None
    assert set(data.origin.files) == {"train", "validation"}
    assert len(data.origin.files["train"]["sha256"]) == 64
    assert spec.metric_for("tickets") == "accuracy" and spec.task("tickets").metrics == ("accuracy", "macro_f1")


def test_explicit_format_and_row_numbers_as_ids(tmp_path: Path) -> None:
    write(rows(30), tmp_path / "train.csv").rename(tmp_path / "train.txt")
    _, data = _load(tmp_path, train="train.txt", format="csv")
    assert len(data.train) + len(data.validation) == 30
    assert sorted([*data.origin.train_ids, *data.origin.validation_ids]) == list(range(1, 31))  # rows from 1


@pytest.mark.parametrize(
    ("kind", "labels", "names", "metrics"),
    [
        ("binary", ("neg", "pos"), ("neg", "pos"), ("accuracy", "mcc")),
        ("binary", (0, 1), ("0", "1"), ("accuracy", "mcc")),
        ("multiclass", (5, 1, 3, 10), ("1", "3", "5", "10"), ("accuracy", "macro_f1")),  # ints sort as numbers
        ("multiclass", LEVELS, ("high", "low", "mid"), ("accuracy", "macro_f1")),
    ],
)
def test_classification_kinds_label_maps_and_default_metrics(
    tmp_path: Path, kind: str, labels: tuple, names: tuple, metrics: tuple
) -> None:
    write(rows(40, labels), tmp_path / "train.csv")
    write(rows(12, labels, "dev"), tmp_path / "dev.jsonl")
    spec, data = _load(tmp_path, kind=kind, validation="dev.jsonl")
    assert data.task.label_names == names and data.task.num_labels == len(names)
    assert spec.task("tickets").metrics == metrics
    mapped = [names[code] for code in data.validation["label"]]
    assert mapped == [str(labels[i % len(labels)]) for i in range(12)]


def test_regression_kind(tmp_path: Path) -> None:
    frame = rows(40).assign(label=np.linspace(0.0, 5.0, 40))
    write(frame, tmp_path / "train.parquet")
    spec, data = _load(tmp_path, kind="regression", train="train.parquet", validation_fraction=0.25)
    assert data.task.is_regression and data.task.label_names is None and data.task.kind_name == "regression"
    assert spec.task("tickets").metrics == ("pearson", "spearman")
    assert data.train["label"].dtype == np.float32 and len(data.validation) == 10


def test_labels_fix_the_order_and_metrics_can_be_overridden(tmp_path: Path) -> None:
    write(rows(30), tmp_path / "train.csv")
    spec, data = _load(tmp_path, labels=list(LEVELS), metrics=["macro_f1", "accuracy"])
    assert data.task.label_names == LEVELS
    assert spec.metric_for("tickets") == "macro_f1"
    raw = simple_spec(tasks=[task_table()], metrics={"primary": {"tickets": "macro_f1"}})
    assert parse_spec(raw, source=str(tmp_path / "spec.toml")).metric_for("tickets") == "macro_f1"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"metrics": ["f1"]}, "must be one of ['accuracy', 'mcc', 'macro_f1']"),  # binary F1 only
        ({"kind": "regression", "metrics": ["accuracy"]}, "must be one of ['pearson', 'spearman']"),
        ({"kind": "ordinal"}, "must be one of ['binary', 'multiclass', 'regression']"),
        ({"name": "sst2"}, "'sst2' is a packaged task's name"),
        ({"hub": "x/y"}, "exactly one of `train` (files), `disk`"),
        ({"labels": ["a", "b"]}, "must name 3 or more classes"),
        ({"text_columns": ["a", "b", "c"]}, "1 column or a pair"),
        ({"validation_fraction": 1.5}, "must lie in (0, 1)"),
        ({"colour": "red"}, "Unknown key 'tasks[0].colour'"),
    ],
)
def test_task_table_errors_name_the_key(override: dict, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(simple_spec(tasks=[task_table(**override)]))
    assert message in str(err.value)


def test_tasks_from_files_and_packaged_names(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tickets.yaml").write_text(
        "name: tickets\nkind: binary\ntext_columns: [subject, body]\nlabel_column: urgent\ntrain: ../data/t.csv\n"
    )
    (tmp_path / "tasks" / "reviews.toml").write_text(
        'name = "reviews"\nkind = "regression"\ntext_columns = ["review"]\nlabel_column = "stars"\ntrain = "r.jsonl"\n'
    )
    raw = simple_spec(tasks=["sst2", "tasks/tickets.yaml", {"file": "tasks/reviews.toml"}, {"name": "cola"}])
    spec = parse_spec(raw, source=str(tmp_path / "spec.toml"))
    assert spec.tasks == ("sst2", "tickets", "reviews", "cola")
    tickets = spec.task("tickets")
    assert tickets.is_pair and tickets.source.resolve("../data/t.csv") == tmp_path / "tasks" / "../data/t.csv"
    assert spec.task("reviews").source.root == str(tmp_path / "tasks")
    assert spec.task("sst2").source is None  # packaged


def test_spec_hash_keeps_paths_as_written_and_survives_the_stored_copy(tmp_path: Path) -> None:
    write(rows(30), tmp_path / "a" / "train.csv")
    spec = load_spec(user_spec(tmp_path / "a", "minilm-l6"))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    moved = load_spec(tmp_path / "b" / "spec.toml")
    assert moved.spec_hash == spec.spec_hash  # the folder is where, not what
    assert moved.to_dict()["task_definitions"][0]["root"] == str(tmp_path / "b")
    stored = StudySpec.from_stored(spec.to_dict())
    assert stored.spec_hash == spec.spec_hash and stored.task("tickets") == spec.task("tickets")
    assert stored.task("tickets").source.root == str(tmp_path / "a")  # a worker reads the data from there
    assert "task_definitions" not in parse_spec(simple_spec()).to_dict()  # packaged-only specs: as before


def test_macro_f1_matches_sklearn_and_is_a_multiclass_metric() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        ref = rng.integers(0, 4, size=int(rng.integers(2, 200)))
        pred = np.where(rng.random(len(ref)) < 0.5, ref, rng.integers(0, 4, size=len(ref)))
        assert macro_f1(pred, ref) == pytest.approx(f1_score(ref, pred, average="macro", zero_division=0), abs=1e-12)
    assert compute_metrics(["macro_f1"], [0, 1, 2], [0, 1, 1]) == {
        "macro_f1": pytest.approx(macro_f1([0, 1, 2], [0, 1, 1]))
    }


@pytest.mark.parametrize(
    ("kind", "metric"),
    [("binary", "accuracy"), ("binary", "mcc"), ("multiclass", "accuracy"), ("multiclass", "macro_f1"),
     ("regression", "pearson")],
)  # fmt: skip
def test_majority_baseline_and_learned_nothing_rule_for_each_kind(kind: str, metric: str) -> None:
    rng = np.random.default_rng(0)
    k = {"binary": 2, "multiclass": 4}.get(kind)
    train = rng.integers(0, k, 300) if k else rng.normal(size=300)
    evals = rng.integers(0, k, 120) if k else rng.normal(size=120)
    regression = k is None
    baseline = majority_baseline(metric, train, evals, regression)
    if not regression:
        values, counts = np.unique(train, return_counts=True)
        constant = np.full(len(evals), values[np.argmax(counts)])
        assert baseline == pytest.approx(compute_metrics([metric], constant, evals)[metric])
    constant = np.zeros(len(evals)) if regression else np.full(len(evals), int(evals[0]))
    assert is_failed_run(constant, regression, compute_metrics([metric], constant, evals)[metric], baseline)
    assert not is_failed_run(evals, regression, compute_metrics([metric], evals, evals)[metric], baseline)


def test_macro_f1_pseudo_values_average_to_the_jackknife_estimate() -> None:
    rng = np.random.default_rng(1)
    ref = rng.integers(0, 3, 60)
    pred = np.where(rng.random(60) < 0.6, ref, rng.integers(0, 3, 60))
    values = pseudo_values("macro_f1", pred, ref)
    loo = np.array([macro_f1(np.delete(pred, i), np.delete(ref, i)) for i in range(60)])
    assert values.mean() == pytest.approx(60 * macro_f1(pred, ref) - 59 * loo.mean())


def test_validate_prints_the_label_map_and_the_carve(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(rows(90), tmp_path / "train.csv")
    write(rows(12, prefix="test"), tmp_path / "test.csv")
    spec = user_spec(tmp_path, tiny_model, task_table(test="test.csv"))
    assert main(["validate", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "task tickets (multiclass, labels high=0, low=1, mid=2): 72 train / 18 validation carved from train" in out
    assert "(20% of 90 rows, stratified, seed 0)" in out and "test 12 rows kept aside" in out
    assert "metric accuracy of accuracy, macro_f1" in out


def test_duplicate_texts_across_splits_are_a_warning(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = rows(60)
    write(train, tmp_path / "train.csv")
    write(pd.concat([rows(10, prefix="dev"), train.iloc[:3]]), tmp_path / "dev.csv")
    spec = user_spec(tmp_path, tiny_model, task_table(validation="dev.csv"))
    assert main(["validate", str(spec)]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        "freezestats validate: warning: task 'tickets': 3 validation item(s) of 13 have the exact text of a train "
        "row; the model has seen them, so they inflate its scores (drop them from one split to measure it cleanly)"
    )

"""``freezestats init``: from the user's own file to a ready spec, then ``run`` and ``report`` on it.

The end-to-end case is the README's first steps on a three-class CSV with string labels (the tiny model, the
spec's epochs and seeds lowered as a first quick look would): init -> validate -> run -> export -> report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _user_data import rows, write

from freezestats.cli.main import main
from freezestats.spec import load_spec
from freezestats.spec.init import frozen_levels


def _init(tmp_path: Path, model: Path, *extra: str, train: str = "tickets.csv") -> int:
    return main(["init", "--train", str(tmp_path / train), "--text", "text", "--label", "label", "--model", str(model),
                 "-o", str(tmp_path / "spec.toml"), *extra])  # fmt: skip


def test_init_validate_run_report_on_a_three_class_csv(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(rows(150), tmp_path / "tickets.csv")
    assert _init(tmp_path, tiny_model, "--id-column", "id") == 0
    out = capsys.readouterr().out
    spec_path = tmp_path / "spec.toml"
    assert f"Wrote {spec_path}: study 'tickets', 40 runs." in out
    assert "150 train rows, multiclass with 3 classes (high 50, low 50, mid 50)" in out
    assert "no validation file: 30 rows (20%) carved out of train as validation, leaving 120 to train on" in out
    assert f"freezestats validate {spec_path} --list-cells" in out
    assert f"freezestats run --study {spec_path} --storage sqlite:///tickets.db" in out
    spec = load_spec(spec_path)
    task = spec.task("tickets")
    assert task.kind_name == "multiclass" and task.source.files == {"train": "tickets.csv"}
    assert spec.grid.frozen_layers == (-1, 0, 1, 2) and spec.grid.train_sizes == (50, 100)
    assert spec.grid.seeds == (1, 2, 3, 4, 5) and spec.training.precision == "auto"
    assert spec.metric_for("tickets") == "accuracy"
    text = spec_path.read_text()
    assert "# classes, in code order: high=0, low=1, mid=2" in text

    # a first quick look, as the spec's comments suggest; a rate the tiny random model learns the texts' label at
    quick = text.replace("seeds = [1, 2, 3, 4, 5]", "seeds = [1, 2, 3]").replace("epochs = 10", "epochs = 5")
    quick = quick.replace("train_sizes = [50, 100]", "train_sizes = [100]").replace("= 5e-5", "= 2e-3")
    spec_path.write_text(quick.replace("frozen_layers = [-1, 0, 1, 2]", "frozen_layers = [0, 2]"))
    assert main(["validate", str(spec_path)]) == 0
    storage = f"sqlite:///{tmp_path / 'tickets.db'}"
    assert main(["run", "--study", str(spec_path), "--storage", storage, "--no-progress"]) == 0
    assert "6/6 cells complete" in capsys.readouterr().out
    results, items = tmp_path / "results.csv", tmp_path / "items.parquet"
    assert main(["export", "--storage", storage, "-o", str(results), "--predictions", str(items)]) == 0
    table = pd.read_csv(results)
    assert set(table["task"]) == {"tickets"} and set(table["metric"]) == {"accuracy"}
    assert {"final_accuracy", "final_macro_f1"} <= set(table.columns)
    predictions = pd.read_parquet(items)
    assert set(predictions["label_name"]) == {"low", "mid", "high"}
    assert predictions["row_id"].str.startswith("train-").all()  # the user's ids
    assert main(["report", "--storage", storage, "-o", str(tmp_path / "report"), "--format", "html"]) == 0
    html = (tmp_path / "report" / "report.html").read_text()
    assert "tickets (metric: accuracy; the user" in html and "classes high, low, mid; 120 train / 30 validation" in html


def test_init_reads_the_kind_and_picks_a_metric_for_unbalanced_labels(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(rows(200, (0, 0, 0, 0, 1)), tmp_path / "urgent.csv")  # 80% not urgent
    assert _init(tmp_path, tiny_model, train="urgent.csv") == 0
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.task("urgent").kind_name == "binary" and spec.metric_for("urgent") == "mcc"
    assert "the majority class holds 80% of train" in (tmp_path / "spec.toml").read_text()
    (tmp_path / "spec.toml").unlink()
    write(rows(200).assign(label=np.linspace(0, 5, 200)), tmp_path / "scores.jsonl")
    assert _init(tmp_path, tiny_model, train="scores.jsonl") == 0
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.task("scores").kind_name == "regression" and spec.metric_for("scores") == "pearson"
    (tmp_path / "spec.toml").unlink()
    rare = pd.concat([rows(190, ("a", "b")), rows(10, ("c",), "rare")])
    write(rare, tmp_path / "rare.parquet")  # 5% of the rows: a subset needs 80 rows to hold it 4 times
    assert _init(tmp_path, tiny_model, "--validation", str(tmp_path / "rare.parquet"), train="rare.parquet") == 0
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.grid.train_sizes == (100, 200) and spec.metric_for("rare") == "macro_f1"
    assert spec.task("rare").source.files["validation"] == "rare.parquet"
    capsys.readouterr()


def test_frozen_levels_spread_over_the_depth() -> None:
    assert frozen_levels(6) == [-1, 0, 2, 4, 6]
    assert frozen_levels(12) == [-1, 0, 4, 8, 12]


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (lambda p: None, [], "The train file"),
        (lambda p: write(rows(60), p / "tickets.csv"), ["--label", "queue"], "has no column 'queue'"),
        (lambda p: write(rows(60), p / "tickets.csv"), ["--text", "body"], "has no column(s) ['body']"),
        (lambda p: (p / "spec.toml").write_text("keep me"), [], "spec.toml already exists"),
        (lambda p: write(rows(60), p / "tickets.csv"), ["--name", "sst2"], "'sst2' is a packaged task's name"),
    ],
)
def test_init_refuses_in_one_line_and_writes_nothing(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str], setup, args: list[str], message: str
) -> None:
    setup(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _init(tmp_path, tiny_model, *args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_init_reserves_an_evaluation_pool_and_a_subset_per_seed(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from freezestats.runner import prepare_study

    write(rows(900), tmp_path / "tickets.csv")  # 720 train rows after the validation carve: 144 reserved
    assert _init(tmp_path, tiny_model) == 0
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.evaluation is not None and spec.evaluation.pool == 144 and spec.grid.subsets == "per_seed"
    prepared = prepare_study(spec)
    task = prepared.tasks["tickets"]
    assert len(task.pool) == 144 and prepared.pool_sizes["tickets"] <= 720 - 144
    assert max(spec.grid.train_sizes) <= prepared.pool_sizes["tickets"]
    pooled = set(task.pool.items["text"])
    assert not pooled & set(task.data.train["text"])  # no pool text can train
    assert sorted(task.subsets) == list(spec.grid.seeds)  # a nested draw per seed


def test_init_leaves_small_data_without_a_pool(tmp_path: Path, tiny_model: Path) -> None:
    write(rows(150), tmp_path / "tickets.csv")
    assert _init(tmp_path, tiny_model) == 0
    assert load_spec(tmp_path / "spec.toml").evaluation is None

"""Every check on a user task's data before any training: one line, exit 2, nothing written.

Each case writes a small data set into its own folder, then runs ``freezestats run`` on a spec of it with a
storage that does not exist yet: the command must refuse with one line naming the problem and leave no database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _user_data import rows, task_table, user_spec, write

from freezestats.cli.main import main


def _files(train: pd.DataFrame, dev: pd.DataFrame | None = None, suffix: str = ".csv") -> Callable[[Path], dict]:
    """Write ``train`` (and ``dev``) and name them in the task."""

    def make(folder: Path) -> dict:
        write(train, folder / f"train{suffix}")
        task = {"train": f"train{suffix}"}
        if dev is not None:
            write(dev, folder / f"dev{suffix}")
            task["validation"] = f"dev{suffix}"
        return task

    return make


def _with_pool(pool: pd.DataFrame) -> Callable[[Path], dict]:
    """``rows(60)`` as train and ``pool`` as the task's pool file."""

    def make(folder: Path) -> dict:
        write(rows(60), folder / "train.csv")
        write(pool, folder / "pool.csv")
        return {"train": "train.csv", "pool": "pool.csv"}

    return make


def _raw(name: str, text: bytes) -> Callable[[Path], dict]:
    def make(folder: Path) -> dict:
        (folder / name).write_bytes(text)
        return {"train": name}

    return make


def _with_blank_texts() -> pd.DataFrame:
    frame = rows(60)
    frame.loc[[2, 6, 9], "text"] = ["", "   ", None]
    return frame


CASES: dict[str, tuple[Callable[[Path], dict], dict, str]] = {
    "missing file": (lambda folder: {"train": "nowhere.csv"}, {}, "The train file 'nowhere.csv' does not exist"),
    "missing column": (_files(rows(60)), {"text_columns": ["body"]}, "has no column(s) ['body']"),
    "missing id column": (_files(rows(60)), {"id_column": "ticket"}, "has no column(s) ['ticket']"),
    "unreadable csv": (
        _raw("train.csv", b"text,label\na,low\nb,mid,extra\nc,high\n"),
        {},
        "Cannot read train.csv as CSV: Error tokenizing data. C error: Expected 2 fields in line 3, saw 3",
    ),
    "unreadable jsonl": (
        _raw("train.jsonl", b'{"text": "a", "label": "low"}\n{"text": "b", "label": \n'),
        {},
        "Cannot read train.jsonl as JSONL: line 2 is not valid JSON",
    ),
    "not utf-8": (_raw("train.csv", b"text,label\na,low\n\xff\xfe,mid\n"), {}, "line 3 is not UTF-8 text"),
    "empty texts": (
        _files(_with_blank_texts()),
        {},
        "3 empty or missing text(s) in column 'text': rows 3, 7, 10; fill or drop those rows.",
    ),
    "missing labels": (
        _files(rows(60).assign(label=lambda d: d.label.where(d.index != 4, ""))),
        {},
        "1 row(s) without a label in column 'label': row 5.",
    ),
    "one class": (_files(rows(60, ("low",))), {}, "has one class ('low'): nothing can be learned from it."),
    "validation labels absent from train": (
        _files(rows(60), rows(12, ("low", "mid", "high", "extreme"), "dev")),
        {},
        "has labels ['extreme'] that train does not (3 rows: rows 4, 8, 12)",
    ),
    "binary with three classes": (_files(rows(60)), {"kind": "binary"}, "use kind = 'multiclass'"),
    "multiclass with two classes": (_files(rows(60, ("a", "b"))), {}, "has 2 classes ['a', 'b']: use kind = 'binary'"),
    "fractional class labels": (
        _files(rows(60).assign(label=np.linspace(0, 1, 60)), suffix=".parquet"),
        {},
        "has fractional labels in 'label'",
    ),
    "regression target not numeric": (
        _files(rows(60).assign(label=[*["1.5"] * 4, "n/a", *["2.0"] * 55])),
        {"kind": "regression"},
        "is not a number in 1 row(s): row 5 (e.g. ['n/a'])",
    ),
    "train size above the carved pool": (
        _files(rows(30)),
        {},
        "train pool of 'tickets' (24 examples: 30 rows in train less 6 carved out as validation), but got "
        "train_size=25",
    ),
    "train size below the number of classes": (
        _files(rows(60)),
        {"grid": [2]},
        "must be >= the 3 classes of 'tickets', so that a stratified subset holds every class, but got train_size=2",
    ),
    "a class too rare to carve": (
        _files(pd.concat([rows(59, ("low", "mid")), rows(1, ("high",), "rare")])),
        {},
        "cannot be carved from train stratified by class: class(es) ['high'] have 1 row",
    ),
    "a task named like a packaged one": (_files(rows(60)), {"name": "cola"}, "'cola' is a packaged task's name"),
    "a pool file sharing texts with train": (
        _with_pool(pd.concat([rows(20, prefix="pool"), rows(60).iloc[[3, 8]]])),
        {"evaluation": 12},
        "shares 2 text(s) with the train file (pool rows 21, 22): a pool must hold items no run can train on",
    ),
    "a pool file with labels train lacks": (
        _with_pool(rows(12, ("low", "mid", "high", "extreme"), "pool")),
        {"evaluation": 10},
        "pool (pool.csv) has labels ['extreme'] that train does not (3 rows: rows 4, 8, 12)",
    ),
    "a pool larger than the pool file": (
        _with_pool(rows(12, prefix="pool")),
        {"evaluation": 20},
        "`evaluation.pool = 20` asks for more items than the 12 rows of task 'tickets''s pool file there are.",
    ),
    "repeated ids": (
        _files(rows(60).assign(id="same")),
        {"id_column": "id"},
        "repeats ids in 'id': rows 1, 2, 3, 4, 5, …; ids must be unique.",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_data_is_refused_in_one_line_and_nothing_is_written(
    case: str, tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, override, message = CASES[case]
    sizes, pool = override.pop("grid", [25]), override.pop("evaluation", None)
    task = task_table(**{**make(tmp_path), **override})
    evaluation = {} if pool is None else {"evaluation": {"pool": pool}}
    spec = user_spec(tmp_path, tiny_model, task, grid={"train_sizes": sizes}, **evaluation)
    db = tmp_path / "study.db"
    code = main(["run", "--study", str(spec), "--storage", f"sqlite:///{db}", "--no-progress"])
    err = capsys.readouterr().err.strip()
    override["grid"] = sizes  # parametrised cases are shared between runs
    if pool is not None:
        override["evaluation"] = pool
    assert code == 2, err
    assert message in err, err
    assert len(err.splitlines()) == 1, err
    assert not db.exists() and not (tmp_path / "study.db.artifacts").exists()


def test_a_pool_file_is_the_pool_and_train_stays_whole(tmp_path: Path, tiny_model: Path) -> None:
    from freezestats.runner import prepare_study
    from freezestats.spec.study import load_spec

    task = task_table(**_with_pool(rows(30, prefix="pool"))(tmp_path))
    spec = load_spec(user_spec(tmp_path, tiny_model, task, evaluation={"pool": 15}))
    prepared = prepare_study(spec)
    pool = prepared.tasks["tickets"].pool
    assert len(pool) == 15 and pool.population == "tickets pool file"
    assert set(pool.items["text"]) <= set(rows(30, prefix="pool")["text"])
    assert sorted(pool.items["label"].value_counts()) == [5, 5, 5]  # stratified over the three classes
    assert prepared.pool_sizes["tickets"] == 60 - 12  # train less the carved validation rows, none for the pool

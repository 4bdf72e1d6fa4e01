"""Bad input, end to end through the CLI: a one-line error, a non-zero exit, and the existing study DB unchanged.

Every case runs against a storage that already holds a completed study, and compares the database file's
sha256 before and after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from _factories import simple_spec, to_toml, write_spec

from freezestats.cli.main import main


@pytest.fixture(scope="module")
def existing(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, glue_dir: Path) -> dict:
    """A study DB with completed trials, plus a results file exported from it."""
    folder = tmp_path_factory.mktemp("existing")
    raw = simple_spec(
        model=str(tiny_model),
        grid={"frozen_layers": [0, 2], "train_sizes": [32], "seeds": [1]},
        training={"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
    )
    spec = write_spec(folder, raw)
    storage = f"sqlite:///{folder / 'study.db'}"
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]) == 0
    assert main(["export", "--storage", storage, "-o", str(folder / "results.csv")]) == 0
    return {"folder": folder, "raw": raw, "storage": storage, "db": folder / "study.db", "model": tiny_model}


def _bad_data(folder: Path, change: Callable[[pd.DataFrame], pd.DataFrame], split: str = "train") -> Path:
    root = folder / "data"
    (root / "sst2").mkdir(parents=True, exist_ok=True)
    good = pd.DataFrame({"sentence": [f"s{i}" for i in range(200)], "label": [i % 2 for i in range(200)]})
    for name in ("train", "validation"):
        (change(good) if name == split else good).to_parquet(root / "sst2" / f"{name}.parquet")
    return root


def _spec_with(ex: dict, tmp: Path, text: str | None = None, **override) -> Path:
    path = tmp / "bad.toml"
    raw = {**ex["raw"], **{k: {**ex["raw"].get(k, {}), **v} if isinstance(v, dict) else v for k, v in override.items()}}
    path.write_text(text if text is not None else to_toml(raw))
    return path


def _run(ex: dict, tmp: Path, *extra: str, spec: Path | None = None, data: Path | None = None) -> list[str]:
    args = ["run", "--study", str(spec or _spec_with(ex, tmp)), "--storage", ex["storage"], "--no-progress"]
    return [*args, "--data-dir", str(data)] if data else [*args, *extra]


CASES: dict[str, tuple[Callable[[dict, Path], list[str]], str]] = {
    "malformed TOML": (lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, text="name = 'x'\n[grid\n")), "not valid TOML"),
    "wrong type": (lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, grid={"seeds": "3"})), "must be a non-empty list"),
    "unknown task": (lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, tasks=["sst3"])), "Unknown task 'sst3'"),
    "unknown key": (lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, grid={"seedz": [1]})), "Unknown key 'grid.seedz'"),
    "negative learning rate": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, training={"learning_rate": -1.0})),
        "must be > 0",
    ),
    "missing spec file": (lambda ex, t: _run(ex, t, spec=t / "nope.toml"), "No study spec at"),
    "unknown model offline": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, model={"name": "nobody/nothing"})),
        "Cannot load the config",
    ),
    "unknown freezing rule": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, model={"name": str(ex["model"]), "freezing": "lora"})),
        "Unknown freezing rule 'lora'",
    ),
    "frozen layers above L": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, grid={"frozen_layers": [0, 3]})),
        "must lie in -1..2",
    ),
    "cuda on a CPU machine": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, training={"device": "cuda"})),
        "sees no CUDA device",
    ),
    "train size larger than the pool": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, grid={"train_sizes": [500]}), data=_bad_data(t, lambda d: d)),
        "train pool of 'sst2' (200 examples)",
    ),
    "data: missing column": (
        lambda ex, t: _run(ex, t, data=_bad_data(t, lambda d: d.rename(columns={"sentence": "text"}))),
        "lacks column(s) ['sentence']",
    ),
    "data: non-integer labels": (
        lambda ex, t: _run(ex, t, data=_bad_data(t, lambda d: d.assign(label=d.label + 0.5))),
        "non-integer labels",
    ),
    "data: one class only": (
        lambda ex, t: _run(ex, t, data=_bad_data(t, lambda d: d.assign(label=1))),
        "has a single class",
    ),
    "data: empty split": (
        lambda ex, t: _run(ex, t, data=_bad_data(t, lambda d: d.iloc[:0], split="validation")),
        "is empty",
    ),
    "data dir does not exist": (lambda ex, t: _run(ex, t, data=t / "nowhere"), "is not a directory"),
    "changed spec for the existing study": (
        lambda ex, t: _run(ex, t, spec=_spec_with(ex, t, training={"epochs": 2})),
        "training.epochs: 1.0 -> 2.0",
    ),
    "max-trials 0": (lambda ex, t: _run(ex, t, "--max-trials", "0"), "`--max-trials` must be >= 1"),
    "workers 0": (lambda ex, t: _run(ex, t, "--workers", "0"), "`--workers` must be >= 1"),
    "workers not a number": (lambda ex, t: _run(ex, t, "--workers", "many"), "a number >= 1 or 'auto'"),
    "storage not a URL": (lambda ex, t: ["status", "--storage", str(ex["db"])], "must be an Optuna storage URL"),
    "unreachable database": (
        lambda ex, t: ["status", "--storage", "postgresql+psycopg2://x@127.0.0.1:9/db"],
        "Cannot open the study storage",
    ),
    "status of an unknown study": (
        lambda ex, t: ["status", "--storage", ex["storage"], "--study-name", "nope"],
        "No study named 'nope'",
    ),
    "export to an unwritable path": (
        lambda ex, t: ["export", "--storage", ex["storage"], "-o", str(ex["db"]) + "/r.csv"],
        "does not exist",
    ),
    "export with an unknown format": (
        lambda ex, t: ["export", "--storage", ex["storage"], "-o", str(t / "r.xlsx")],
        "must end in .parquet or .csv",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_and_the_study_is_untouched(
    case: str, existing: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_args, message = CASES[case]
    before = hashlib.sha256(existing["db"].read_bytes()).hexdigest()
    args = make_args(existing, tmp_path)
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert message in err, err
    assert len(err.splitlines()) == 1, err  # one line, no traceback
    assert hashlib.sha256(existing["db"].read_bytes()).hexdigest() == before


def test_interrupted_export_keeps_the_previous_file(existing: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    target = existing["folder"] / "results.csv"
    before = target.read_bytes()

    def interrupted(self: pd.DataFrame, path: str, **kwargs) -> None:
        Path(path).write_text("half a row,")
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", interrupted)
    assert main(["export", "--storage", existing["storage"], "-o", str(target)]) == 130
    assert target.read_bytes() == before
    assert not list(existing["folder"].glob("*.partial"))

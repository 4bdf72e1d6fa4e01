"""Re-create the prediction artifacts that a committed example database references but that were lost.

A study database records, per trial, the id of its per-example predictions (``predictions_artifact``); the file
itself lives in ``study.db.artifacts/``. When a file was never committed, the trial's row is still there but its
predictions are gone. This script re-runs exactly those cells with freezestats' own runner, in a scratch study
that holds nothing else, and then, per trial:

- if the rerun's counts (correct items at the final, best and held-out checkpoints, and the held-out metric)
  equal the stored row, its predictions file is copied in under the stored id: the committed database is
  untouched, and the artifact is the one the lost run wrote, item for item;
- if they differ, it says so and copies nothing, unless ``--replace``: then the stored row is replaced by the
  rerun's (its record, objective value and times; the predictions file under the stored id), and the row keeps the
  values it replaced in ``replaced_row`` so that nothing is lost. The example's README must say which rows were
  replaced. Optuna's storage API refuses to change a finished trial, so this writes the SQLite tables directly.

A control cell whose artifact exists is re-run too (``--control``), and its predictions must equal the
committed file: that is the check that a rerun on this machine reproduces a stored run at all.

    python examples/regenerate_artifacts.py EXAMPLE_DIR RUN_DIR [--data-dir DIR] [--workers N] [--control K]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
from pathlib import Path

import optuna
import pandas as pd
from optuna.trial import TrialState

from freezestats.runner import work_study
from freezestats.spec import StudySpec
from freezestats.study.queue import cell_from_trial
from freezestats.study.trials import SPEC_ATTR, create_or_load_study, load_study, open_storage

COUNTS = ("n_correct", "n_correct_best", "n_correct_heldout", "heldout", "n_eval", "n_eval_heldout")


def lost_trials(db: Path) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial]]:
    """The example study and its COMPLETE trials whose predictions file is not in ``study.db.artifacts/``."""
    study = load_study(open_storage(f"sqlite:///{db}", must_exist=True), None)
    folder = db.parent / f"{db.name}.artifacts"
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return study, [
        t
        for t in done
        if "predictions_artifact" in t.user_attrs and not (folder / t.user_attrs["predictions_artifact"]).is_file()
    ]


def rerun(study: optuna.Study, trials: list, run_dir: Path, data_dir: str | None, workers: int) -> optuna.Study:
    """Run the cells of ``trials`` again in a scratch study of the same spec (``run_dir/rerun.db``)."""
    import subprocess
    import sys

    spec = StudySpec.from_stored(study.user_attrs[SPEC_ATTR], source=f"study '{study.study_name}'")
    run_dir.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{run_dir / 'rerun.db'}"
    scratch = create_or_load_study(open_storage(storage), spec)
    queued = {t.user_attrs["cell_key"] for t in scratch.get_trials(deepcopy=False)}
    for trial in trials:
        cell = cell_from_trial(trial)
        if cell.key not in queued:
            scratch.enqueue_trial(cell.params(), user_attrs=cell.attrs())
    if workers == 1:
        work_study(storage, spec.name, data_dir=data_dir, show_progress=False)
    else:  # one thread each, as the example's two workers ran
        command = [
            sys.executable,
            "-m",
            "freezestats",
            "worker",
            "--storage",
            storage,
            "--study-name",
            spec.name,
            "--no-progress",
            *(["--data-dir", data_dir] if data_dir else []),
        ]
        env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
        for process in [subprocess.Popen(command, env=env) for _ in range(workers)]:
            process.wait()
    return load_study(open_storage(storage), spec.name)


def compare(stored: optuna.trial.FrozenTrial, again: optuna.trial.FrozenTrial) -> dict[str, tuple]:
    """The counts that differ between the stored run and its rerun (empty when they agree)."""
    return {
        k: (stored.user_attrs.get(k), again.user_attrs.get(k))
        for k in COUNTS
        if json.dumps(stored.user_attrs.get(k)) != json.dumps(again.user_attrs.get(k))
    }


KEEP = ("cell_key", "role", "predictions_artifact")
"""Attributes that identify the stored trial and its artifact id: kept when its row is replaced."""


def replace_row(db: Path, stored: optuna.trial.FrozenTrial, again: optuna.trial.FrozenTrial) -> None:
    """Give the stored trial the rerun's record, value and times; keep what it replaced in ``replaced_row``."""
    old = {k: v for k, v in stored.user_attrs.items() if k not in KEEP}
    new = {k: v for k, v in again.user_attrs.items() if k not in KEEP}
    new["replaced_row"] = {"reason": "predictions artifact lost; the cell was re-run", "old": old}
    with sqlite3.connect(db) as con:
        (trial_id,) = con.execute("select trial_id from trials where number = ?", (stored.number,)).fetchone()
        for key, value in new.items():
            con.execute("delete from trial_user_attributes where trial_id = ? and key = ?", (trial_id, key))
            con.execute(
                "insert into trial_user_attributes (trial_id, key, value_json) values (?, ?, ?)",
                (trial_id, key, json.dumps(value)),
            )
        con.execute("update trial_values set value = ? where trial_id = ?", (again.value, trial_id))
        con.execute(
            "update trials set datetime_start = ?, datetime_complete = ? where trial_id = ?",
            (str(again.datetime_start), str(again.datetime_complete), trial_id),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example_dir", type=Path)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data-dir")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--replace", action="store_true", help="replace the rows whose rerun's counts differ")
    parser.add_argument("--control", type=int, default=None, help="trial number of a stored run to re-run as a check")
    args = parser.parse_args()
    db = args.example_dir / "study.db"
    study, lost = lost_trials(db)
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    controls = [t for t in done if t.number == args.control and t not in lost]
    if args.control is not None and not controls:
        raise SystemExit(f"--control {args.control} is not a COMPLETE trial with its predictions")
    print(f"{len(lost)} trial(s) without their predictions: {[t.number for t in lost]}")
    scratch = rerun(study, lost + controls, args.run_dir, args.data_dir, args.workers)
    again = {t.user_attrs["cell_key"]: t for t in scratch.get_trials(states=(TrialState.COMPLETE,))}
    made = args.run_dir / "rerun.db.artifacts"
    for trial in controls:
        new = again[trial.user_attrs["cell_key"]]
        old_frame = pd.read_parquet(db.parent / "study.db.artifacts" / trial.user_attrs["predictions_artifact"])
        new_frame = pd.read_parquet(made / new.user_attrs["predictions_artifact"])
        same = old_frame.equals(new_frame)
        print(
            f"control trial {trial.number}: predictions {'identical' if same else 'DIFFER'}; "
            f"counts {'agree' if not compare(trial, new) else compare(trial, new)}"
        )
    for trial in lost:
        new = again.get(trial.user_attrs["cell_key"])
        if new is None:
            print(f"trial {trial.number}: its rerun did not complete")
            continue
        diff = compare(trial, new)
        if diff and not args.replace:
            print(f"trial {trial.number} ({trial.user_attrs['cell_key']}): rerun differs {diff}; not copied")
            continue
        if diff:
            replace_row(db, trial, new)
            print(f"trial {trial.number} ({trial.user_attrs['cell_key']}): rerun differs {diff}; row replaced")
        shutil.copy2(
            made / new.user_attrs["predictions_artifact"],
            db.parent / "study.db.artifacts" / trial.user_attrs["predictions_artifact"],
        )
        if not diff:
            print(f"trial {trial.number}: counts agree; predictions restored")


if __name__ == "__main__":
    main()

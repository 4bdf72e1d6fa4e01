"""``freezestats run`` on a spec with ``[adaptive]``: the table, the round loop, its safety, ``status`` and the budget.

The training is replaced by a synthetic score per depth (``_fake_run_cell``), so that the loop's logic runs in
seconds: depth 1 is as good as the full model but noisy (it needs seeds to be shown non-inferior), depth 2 is far
worse (shown inferior at once). The statistics are a small stand-in (:func:`_fake_sequential`) written to the
contract of :mod:`freezestats.stats.sequential` (a normal interval whose half-width shrinks as 1/sqrt(seeds)), so
that which round decides what is known exactly; one test runs the real module when it is there.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import optuna
import pandas as pd
import pytest
from _factories import simple_spec, write_spec
from optuna.trial import TrialState

import freezestats.runner as runner_module
from freezestats.cli.adaptive import _STOPPED
from freezestats.cli.main import main
from freezestats.exceptions import SpecError
from freezestats.results.export import results_table
from freezestats.results.record import TrialRecord
from freezestats.runner._prepare import prepare_study
from freezestats.runner.adaptive import decision_step
from freezestats.spec import load_spec, parse_spec
from freezestats.stats.sequential import SequentialPlan
from freezestats.study.queue import is_enqueued_cell
from freezestats.study.trials import create_or_load_study, load_study, open_storage

SCORE = {0: 0.80, 1: 0.79, 2: 0.60}  # the synthetic heldout score of each depth (plus a small seed term)
HALF_WIDTH = 0.06  # the stand-in's interval half-width at one seed: depth 1 (-0.01) is shown at 3 seeds


SMALL_GLUE = True  # runs score 256 dev rows per task (conftest.glue_dir): these tests check the study, not scores


def _raw(tiny_model: Path, **adaptive) -> dict:
    table = {"margin": 0.05, "min_seeds": 2, "max_seeds": 4, **adaptive}
    return simple_spec(
        model=str(tiny_model),
        tasks=["agreement"],  # the packaged demo task: small, so each `run` prepares it in a moment
        grid={"frozen_layers": [0, 1, 2], "train_sizes": [32], "seeds": [1]},
        training={"epochs": 1, "max_length": 32},
        adaptive=table,
    )


# --- the stand-in statistics (the contract of freezestats.stats.sequential) -------------------------------------


def _decisions(runs: pd.DataFrame, items, plan: SequentialPlan, *, response: str = "heldout", metric: str = "accuracy"):
    rows = []
    for size, at_size in runs.groupby("train_size"):
        reference = at_size[at_size["frozen_layers"] == 0].set_index("seed")[response]
        for depth, cell in at_size[at_size["frozen_layers"] != 0].groupby("frozen_layers"):
            paired = cell.set_index("seed")[response].sub(reference).dropna()
            n = len(paired)
            estimate = float(paired.mean())
            half = HALF_WIDTH / math.sqrt(n)
            lower, upper = estimate - half, estimate + half
            decision = "noninferior" if lower > -plan.margin else "inferior" if upper < -plan.margin else "open"
            if decision == "open" and n >= plan.max_seeds:
                decision = "exhausted"
            rows.append(
                {
                    "train_size": size,
                    "frozen_layers": depth,
                    "reference": 0,
                    "seeds": n,
                    "look": n,
                    "estimate": estimate,
                    "lower": lower,
                    "upper": upper,
                    "alpha": plan.alpha,
                    "decision": decision,
                    "population": "evaluation_set",
                    "procedure": "stand-in",
                }
            )
    return pd.DataFrame(rows)


def _next_seeds(decisions: pd.DataFrame, plan: SequentialPlan) -> pd.DataFrame:
    rows = []
    for row in decisions[decisions["decision"] == "open"].itertuples():
        target = min(row.seeds + plan.seeds_per_round, plan.max_seeds)
        rows += [(row.train_size, row.frozen_layers, target), (row.train_size, 0, target)]
    table = pd.DataFrame(rows, columns=["train_size", "frozen_layers", "seeds_target"])
    return table.groupby(["train_size", "frozen_layers"], as_index=False)["seeds_target"].max()


def _replay(runs, items, plan, *, order="seed", response="heldout", metric="accuracy") -> pd.DataFrame:
    frames = []
    for look in range(plan.min_seeds, int(runs["seed"].max()) + 1):
        seen = runs[runs["seed"] <= look]
        frames.append(_decisions(seen, items, plan, response=response).assign(round=look - plan.min_seeds + 1))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def fake_sequential(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("freezestats.stats.sequential")
    module.SequentialPlan = SequentialPlan  # the real plan; only the decisions are stood in for
    module.sequential_decisions = _decisions
    module.next_seeds = _next_seeds
    module.replay = _replay
    monkeypatch.setitem(sys.modules, "freezestats.stats.sequential", module)
    return module


# --- the synthetic training ----------------------------------------------------------------------------------------


def _fake_run_cell(prepared, cell, trial, **_) -> TrialRecord:
    score = SCORE[cell.frozen_layers] + (0.01 if cell.seed % 2 else -0.01) * (cell.frozen_layers == 1)
    return TrialRecord(
        model="tiny", freezing="freeze", n_layers=2, lr_search="none", frozen_dropout="on", metric="accuracy",
        best_dev=score, final_dev=score, heldout=score, best_step=1, heldout_step=1, majority_baseline=0.5,
        failed=False, n_eval=100, n_correct=int(score * 100), trainable_params=1, total_params=2, n_steps=1,
        wall_seconds=0.0, peak_mem_bytes=0, device="cpu", precision="fp32", predictions_artifact="absent",
        n_correct_best=None, n_correct_heldout=None, n_eval_heldout=50, top_class_share_best=None,
        top_class_share_heldout=None, top_class_share_final=None, order_seed=cell.seed, trained_with=cell.task,
        pair_encoding="cross", select_best=score, final_metrics={"accuracy": score}, curve=[], lr_search_reuse=False,
        eval_prefix_cached=False, train_prefix_cached=False, final_train_loss=0.1, peak_mem_kind="none", versions={},
    )  # fmt: skip


@pytest.fixture
def fake_training(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []

    def run_cell(prepared, cell, trial, **kwargs):
        ran.append(cell.key)
        return _fake_run_cell(prepared, cell, trial, **kwargs)

    monkeypatch.setattr(runner_module, "run_cell", run_cell)
    return ran


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[str]:
    """A study database on a RAM disk where there is one: each trial writes ~40 attributes, one commit each, and
    on a disk every commit waits for an fsync (this keeps the file's tests to seconds, not a minute)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield f"sqlite:///{tmp_path / 'study.db'}"
        return
    folder = Path(tempfile.mkdtemp(dir=shm, prefix="freezestats-adaptive-"))
    try:
        yield f"sqlite:///{folder / 'study.db'}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(spec: Path, storage: str, glue_dir: Path, *extra: str) -> int:
    args = ["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]
    return main([*args, *extra])


def _complete(storage: str) -> Counter:
    study = load_study(open_storage(storage), None)
    return Counter(t.user_attrs["cell_key"] for t in study.get_trials(states=(TrialState.COMPLETE,)))


# --- the spec --------------------------------------------------------------------------------------------------------


def test_the_table_parses_round_trips_and_leaves_other_specs_hash_alone(tiny_model: Path) -> None:
    raw = _raw(tiny_model, budget=20, spending="pocock")
    spec = parse_spec(raw)
    assert spec.adaptive is not None and spec.adaptive.budget == 20 and spec.adaptive.spending == "pocock"
    assert spec.adaptive.seed_ladder(spec.grid.seeds) == (1, 2, 3, 4)
    assert spec.adaptive.seed_ladder((7, 3)) == (7, 3, 8, 9)  # the listed seeds, then the ones after the largest
    again = type(spec).from_stored(spec.to_dict())
    assert again.adaptive == spec.adaptive and again.spec_hash == spec.spec_hash
    plain = parse_spec({k: v for k, v in raw.items() if k != "adaptive"})
    assert "adaptive" not in plain.to_dict() and plain.spec_hash != spec.spec_hash
    assert parse_spec(_raw(tiny_model, margin=0.02)).spec_hash != spec.spec_hash
    # a futility threshold is part of the plan and of the hash; without it the stored table has no such key, so
    # a study stored before the option existed keeps its hash
    futile = parse_spec(_raw(tiny_model, budget=20, spending="pocock", futility=0.1))
    assert futile.adaptive.plan_kwargs()["futility"] == 0.1 and futile.spec_hash != spec.spec_hash
    assert "futility" not in spec.to_dict()["adaptive"] and "futility" in futile.to_dict()["adaptive"]
    assert type(futile).from_stored(futile.to_dict()).adaptive == futile.adaptive
    # so is `seek` when not the default: "either" (written out or not) stores and hashes as before it existed
    either = parse_spec(_raw(tiny_model, budget=20, spending="pocock", seek="either"))
    assert either.spec_hash == spec.spec_hash and "seek" not in either.to_dict()["adaptive"]
    sought = parse_spec(_raw(tiny_model, budget=20, spending="pocock", seek="noninferiority"))
    assert sought.adaptive.plan_kwargs()["seek"] == "noninferiority" and sought.spec_hash != spec.spec_hash
    assert type(sought).from_stored(sought.to_dict()).adaptive == sought.adaptive
    # a screening look: part of the plan and the hash, absent from the stored table when not set
    screened = parse_spec(_raw(tiny_model, budget=20, spending="pocock", min_seeds=3, futility_seeds=2))
    assert screened.adaptive.plan_kwargs()["futility_seeds"] == 2 and screened.adaptive.first_seeds == 2
    assert "futility_seeds" not in spec.to_dict()["adaptive"] and spec.adaptive.first_seeds == spec.adaptive.min_seeds
    assert type(screened).from_stored(screened.to_dict()).adaptive == screened.adaptive
    # so is `futility_power` when not the default: "conditional" (written out or not) stores and hashes as before
    conditional = parse_spec(_raw(tiny_model, budget=20, spending="pocock", futility=0.1, futility_power="conditional"))
    assert conditional.spec_hash == futile.spec_hash and "futility_power" not in conditional.to_dict()["adaptive"]
    predictive = parse_spec(_raw(tiny_model, budget=20, spending="pocock", futility=0.1, futility_power="predictive"))
    assert predictive.adaptive.plan_kwargs()["futility_power"] == "predictive"
    assert predictive.spec_hash != futile.spec_hash
    assert type(predictive).from_stored(predictive.to_dict()).adaptive == predictive.adaptive
    assert SequentialPlan(**predictive.adaptive.plan_kwargs()).futility_power == "predictive"
    # and `futility_failures` when not "shrink"
    shrink = parse_spec(_raw(tiny_model, budget=20, spending="pocock", futility=0.1, futility_failures="shrink"))
    assert shrink.spec_hash == futile.spec_hash and "futility_failures" not in shrink.to_dict()["adaptive"]
    hold = parse_spec(_raw(tiny_model, budget=20, spending="pocock", futility=0.1, futility_failures="hold"))
    assert hold.spec_hash != futile.spec_hash and type(hold).from_stored(hold.to_dict()).adaptive == hold.adaptive
    assert SequentialPlan(**hold.adaptive.plan_kwargs()).futility_failures == "hold"
    # a Hwang-Shih-DeCani spending keeps its γ in its name, through the store and into the plan
    hsd = parse_spec(_raw(tiny_model, budget=20, spending="hwang_shih_decani(-1.5)"))
    assert hsd.adaptive.plan_kwargs()["spending"] == "hwang_shih_decani(-1.5)" and hsd.spec_hash != spec.spec_hash
    assert SequentialPlan(**hsd.adaptive.plan_kwargs()).spending == "hwang_shih_decani(-1.5)"


@pytest.mark.parametrize(
    ("table", "grid", "message"),
    [
        ({"alpha": 0.05}, {}, "`adaptive.margin` is required"),
        ({"margin": -0.1}, {}, "`adaptive.margin` must be > 0"),
        ({"margin": 0.05, "alpha": 0.7}, {}, "`adaptive.alpha` must be < 0.5"),
        ({"margin": 0.05, "min_seeds": 1}, {}, "`adaptive.min_seeds` must be >= 2"),
        ({"margin": 0.05, "min_seeds": 5, "max_seeds": 3}, {}, "`adaptive.max_seeds` must be >= `adaptive.min_seeds`"),
        ({"margin": 0.05, "spending": "linear"}, {}, "`adaptive.spending` must be 'obrien_fleming', 'pocock' or"),
        ({"margin": 0.05, "spending": "hwang_shih_decani(x)"}, {}, "but got 'hwang_shih_decani(x)'"),
        ({"margin": 0.05, "spending": "hwang_shih_decani(-41)"}, {}, "with γ a number in [-40, 40]"),
        ({"margin": 0.05, "futility": 0.6}, {}, "`adaptive.futility` (a conditional power) must be in (0, 0.5)"),
        ({"margin": 0.05, "seek": "inferior"}, {}, "`adaptive.seek` must be one of"),
        ({"margin": 0.05, "futility": 0.1, "futility_power": "bayes"}, {}, "`adaptive.futility_power` must be one of"),
        ({"margin": 0.05, "futility_power": "predictive"}, {}, "`adaptive.futility_power` needs `adaptive.futility`"),
        ({"margin": 0.05, "futility_failures": "drop"}, {}, "`adaptive.futility_failures` must be one of"),
        ({"margin": 0.05, "min_seeds": 3, "futility_seeds": 3}, {}, "`adaptive.futility_seeds` must be < `adapt"),
        ({"margin": 0.05, "min_seeds": 3, "futility_seeds": 1}, {}, "`adaptive.futility_seeds` must be >= 2"),
        ({"margin": 0.05, "min_seeds": 3, "futility_seeds": 2, "budget": 5}, {}, "the first round (6 runs: 2 seeds"),
        ({"margin": 0.05, "min_seeds": 2, "budget": 5}, {}, "`adaptive.budget` must cover the first round (6 runs"),
        ({"margin": 0.05, "seeds": 3}, {}, "Unknown key 'adaptive.seeds'. Did you mean 'adaptive.min_seeds'?"),
        ({"margin": 0.05}, {"frozen_layers": [1, 2]}, "needs 0 in `grid.frozen_layers`"),
        ({"margin": 0.05}, {"subset_draws": 2}, "cannot be combined with `grid.subset_draws` > 1"),
        ({"margin": 0.05, "min_seeds": 2, "max_seeds": 2}, {"seeds": [1, 2, 3]}, "`grid.seeds` lists 3 seeds"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_key(table: dict, grid: dict, message: str) -> None:
    raw = simple_spec(grid={"frozen_layers": [0, 1, 2], "train_sizes": [32], "seeds": [1], **grid}, adaptive=table)
    with pytest.raises(SpecError) as err:
        parse_spec(raw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_adaptive_flag_without_the_table_exits_2_and_writes_nothing(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _raw(tiny_model)
    del raw["adaptive"]
    db = tmp_path / "study.db"
    assert _run(write_spec(tmp_path, raw), f"sqlite:///{db}", glue_dir, "--adaptive") == 2
    err = capsys.readouterr().err.strip()
    assert "`--adaptive` needs an [adaptive] table" in err and len(err.splitlines()) == 1
    assert not db.exists()


def test_fuse_with_an_adaptive_study_exits_2_and_writes_nothing(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "study.db"
    assert _run(write_spec(tmp_path, _raw(tiny_model)), f"sqlite:///{db}", glue_dir, "--fuse", "3") == 2
    err = capsys.readouterr().err.strip()
    assert "`--fuse` is not supported for an adaptive study" in err and len(err.splitlines()) == 1
    assert not db.exists()


# --- the round loop --------------------------------------------------------------------------------------------------


def test_run_decides_early_where_it_can_and_spends_seeds_where_it_cannot(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, fake_training, capsys
) -> None:
    assert _run(write_spec(tmp_path, _raw(tiny_model)), storage, glue_dir, "--adaptive") == 0
    out = capsys.readouterr().out
    assert (
        "or unable to close by then even one SE better (conditional power <= 2.3%)." in out
    )  # the plan's stop, as the run starts
    # Round 1: two seeds for all three cells; depth 2 (-0.20) is inferior at once, depth 1 (-0.01) still open.
    # Round 2: a third seed for depth 1 and the reference only; then depth 1 is non-inferior: stop.
    counts = _complete(storage)
    assert set(counts.values()) == {1}  # no cell-seed ran twice
    per_depth = Counter(key.split("|")[1] for key in counts)
    assert per_depth == {"frozen=0": 3, "frozen=1": 3, "frozen=2": 2}
    assert len(fake_training) == 8
    assert "Round 1: enqueued 6 runs" in out and "Round 2: enqueued 2 runs (8 in all) after 1 decided, 1 open" in out
    assert "Stopped: every comparison is decided (8 runs used)" in out
    study = load_study(open_storage(storage), None)
    log = study.user_attrs["adaptive"]
    assert log["stopped"] == "decided" and log["plan"]["margin"] == 0.05 and len(log["rounds"]) == 2

    assert main(["status", "--storage", storage]) == 0
    status = capsys.readouterr().out
    assert "decisions per cell" in status and "2 rounds enqueued; every comparison is decided" in status
    lines = {line.split("│")[3].strip(): line for line in status.splitlines() if line.count("│") >= 7}
    assert "noninferior" in lines["1"] and "│ 3 " in lines["1"]
    assert "inferior" in lines["2"] and "noninferior" not in lines["2"] and "│ 2 " in lines["2"]
    assert "reference" in lines["0"]

    _check_report_section(storage, tmp_path)
    assert main(["analyze", "--storage", storage, "-o", str(tmp_path / "analysis"), "--n-boot", "50"]) == 0
    assert "warning: this study ran adaptively ([adaptive], 2 rounds; every comparison is decided)" in (
        capsys.readouterr().out
    )

    # Run again: nothing is open, so nothing runs.
    fake_training.clear()
    assert _run(write_spec(tmp_path, _raw(tiny_model)), storage, glue_dir) == 0
    assert fake_training == [] and "0 trials run now" in capsys.readouterr().out


def _check_report_section(storage: str, tmp_path: Path) -> None:
    """The report's "How the seeds were spent": seeds per cell, its decision and the round that decided it."""
    from types import SimpleNamespace

    from freezestats.analysis.pipeline import load_study_record
    from freezestats.report.document import _seeds_spent
    from freezestats.report.inputs import ReportInputs
    from freezestats.report.writer import Writer

    runs = results_table(load_study(open_storage(storage), None))
    analysis = SimpleNamespace(settings={"tasks": ["agreement"], "response": "heldout"}, tables={}, warnings=[])
    inputs = ReportInputs(analysis=analysis, runs=runs, study=load_study_record(storage))
    w = Writer(tmp_path / "report", lambda _: None)
    section = _seeds_spent(inputs, w)
    assert section.startswith("## How the seeds were spent")
    assert "It used 8 runs in 2 rounds and stopped because every comparison was decided" in section
    assert "The decisions speak of this evaluation set" in section  # no item predictions: seeds only
    table = pd.read_parquet(tmp_path / "report" / "tables" / "agreement-seeds-spent.parquet")
    assert table[["frozen", "seeds", "decision", "decided in round"]].values.tolist() == [
        ["0", 3, "reference", "–"],
        ["1", 3, "noninferior", "2"],
        ["2", 2, "inferior", "1"],
    ]
    assert (tmp_path / "report" / "figures" / "agreement-seeds-spent.svg").is_file()
    plain = ReportInputs(analysis=analysis, runs=runs, study={"spec": {}})
    assert _seeds_spent(plain, w) == ""  # a study that ran every seed has no such section


@pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")
def test_a_decision_step_twice_or_from_two_processes_enqueues_nothing_twice(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, fake_training
) -> None:
    from freezestats.analysis.adaptive import decide_round

    spec = load_spec(write_spec(tmp_path, _raw(tiny_model)))
    prepared = prepare_study(spec, glue_dir)
    first = create_or_load_study(open_storage(storage), spec)
    second = optuna.load_study(study_name=spec.name, storage=open_storage(storage))  # another worker's handle
    assert len(decision_step(first, prepared, decide_round).enqueued) == 6
    assert decision_step(second, prepared, decide_round).enqueued == []
    assert decision_step(first, prepared, decide_round).enqueued == []
    # Every trial becomes COMPLETE (as the workers would leave them); then the next round, asked for twice.
    for trial in first.get_trials(states=(TrialState.WAITING,)):
        ask = first.ask()
        assert ask.number == trial.number
        record = _fake_run_cell(prepared, runner_module.suggest_cell(ask, spec), ask)
        runner_module.set_user_attrs(ask, record.attrs())
        first.tell(ask, record.best_dev)
    keys = [c.key for c in decision_step(second, prepared, decide_round).enqueued]
    assert sorted(keys) == [f"agreement|frozen={k}|n=32|draw=0|seed=3" for k in (0, 1)]
    assert decision_step(first, prepared, decide_round).enqueued == []
    stored = Counter(t.user_attrs["cell_key"] for t in first.get_trials())
    assert set(stored.values()) == {1} and len(stored) == 8


@pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")
def test_a_screening_look_makes_the_first_round_its_seeds(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential
) -> None:
    from freezestats.analysis.adaptive import decide_round

    for table, seeds in (({"min_seeds": 3}, 3), ({"min_seeds": 3, "futility_seeds": 2}, 2)):
        spec = load_spec(write_spec(tmp_path, _raw(tiny_model, max_seeds=5, **table)))
        study = create_or_load_study(open_storage(f"sqlite:///{tmp_path / f'first{seeds}.db'}"), spec)
        keys = [c.key for c in decision_step(study, prepare_study(spec, glue_dir), decide_round).enqueued]
        assert sorted(keys) == sorted(f"agreement|frozen={k}|n=32|draw=0|seed={s}" for k in (0, 1, 2)
                                      for s in range(1, seeds + 1))  # fmt: skip


def test_resume_mid_round_runs_what_waits_then_decides_on_what_is_stored(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, fake_training, capsys
) -> None:
    spec_path = write_spec(tmp_path, _raw(tiny_model))
    assert _run(spec_path, storage, glue_dir, "--max-trials", "4") == 0  # stops inside round 1
    assert sum(_complete(storage).values()) == 4
    study = load_study(open_storage(storage), None)
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 2
    assert "Stopped: --max-trials was reached" in capsys.readouterr().out
    assert _run(spec_path, storage, glue_dir) == 0
    counts = _complete(storage)
    assert set(counts.values()) == {1} and sum(counts.values()) == 8 and len(fake_training) == 8


def test_the_budget_stops_before_a_round_that_would_exceed_it(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, fake_training, capsys
) -> None:
    assert _run(write_spec(tmp_path, _raw(tiny_model, budget=7)), storage, glue_dir) == 0
    out = capsys.readouterr().out
    assert "Stopped: the next round would spend more runs than `adaptive.budget` (6 runs used)" in out
    assert sum(_complete(storage).values()) == 6
    assert load_study(open_storage(storage), None).user_attrs["adaptive"]["stopped"] == "budget"
    spec = write_spec(tmp_path, _raw(tiny_model, budget=7))
    assert main(["validate", str(spec), "--data-dir", str(glue_dir)]) == 0
    assert "adaptive: 3 cells x 2..4 seeds = 6..12 trials, in rounds (seeds in order: 1, 2, 3, 4)" in (
        capsys.readouterr().out
    )


def test_enqueue_only_takes_one_decision_step_and_workers_drain_it(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, fake_training, capsys
) -> None:
    from freezestats.runner import work_study

    spec_path = write_spec(tmp_path, _raw(tiny_model))
    for _ in range(2):  # the same step twice: the second adds nothing
        assert _run(spec_path, storage, glue_dir, "--enqueue-only") == 0
    study = load_study(open_storage(storage), None)
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 6
    assert "the next round is enqueued" in capsys.readouterr().out
    work_study(storage, data_dir=glue_dir, show_progress=False)  # a `freezestats worker`: drains, decides nothing
    assert sum(_complete(storage).values()) == 6
    assert _run(spec_path, storage, glue_dir, "--enqueue-only") == 0
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 2


def test_the_real_statistics_drive_the_loop(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The same loop on :mod:`freezestats.stats.sequential` itself, with a seed-to-seed spread (its intervals need
    one): depth 2 (20 points worse) is decided before depth 1 (a point worse, within the margin), each stops
    getting seeds once decided, no cell-seed runs twice, and status shows the decisions."""
    pytest.importorskip("freezestats.stats.sequential.decisions")
    ran: list[str] = []

    def noisy(prepared, cell, trial, **kwargs):
        ran.append(cell.key)
        record = _fake_run_cell(prepared, cell, trial)
        score = SCORE[cell.frozen_layers] + 0.004 * ((cell.seed * 7 + cell.frozen_layers * 3) % 5 - 2)
        return dataclasses.replace(record, heldout=score, best_dev=score, final_dev=score)

    monkeypatch.setattr(runner_module, "run_cell", noisy)
    assert _run(write_spec(tmp_path, _raw(tiny_model)), storage, glue_dir, "--adaptive") == 0
    out = capsys.readouterr().out
    assert (
        "or unable to close by then even one SE better (conditional power <= 2.3%)." in out
    )  # the plan's stop, as the run starts
    counts = _complete(storage)
    assert set(counts.values()) == {1} and len(ran) == sum(counts.values())
    per_depth = Counter(key.split("|")[1] for key in counts)
    assert 2 <= per_depth["frozen=2"] < per_depth["frozen=1"] == per_depth["frozen=0"] <= 4
    assert "Round 1: enqueued 6 runs" in out and "Stopped: every comparison is decided" in out
    assert main(["status", "--storage", storage]) == 0
    status = capsys.readouterr().out
    lines = {line.split("│")[3].strip(): line for line in status.splitlines() if line.count("│") >= 7}
    assert " inferior " in lines["2"] and "noninferior" in lines["1"]

    from types import SimpleNamespace

    from freezestats.analysis.pipeline import load_study_record
    from freezestats.report.document import _seeds_spent
    from freezestats.report.inputs import ReportInputs
    from freezestats.report.writer import Writer

    runs = results_table(load_study(open_storage(storage), None))
    analysis = SimpleNamespace(settings={"tasks": ["agreement"], "response": "heldout"}, tables={}, warnings=[])
    inputs = ReportInputs(analysis=analysis, runs=runs, study=load_study_record(storage))
    assert "## How the seeds were spent" in _seeds_spent(inputs, Writer(tmp_path / "report", lambda _: None))
    table = pd.read_parquet(tmp_path / "report" / "tables" / "agreement-seeds-spent.parquet").set_index("frozen")
    assert table.loc["2", "decision"] == "inferior" and table.loc["1", "decision"] == "noninferior"
    assert int(table.loc["2", "decided in round"]) < int(table.loc["1", "decided in round"])


def test_a_cell_enqueued_twice_at_once_runs_once(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, fake_training
) -> None:
    """Two decision steps writing at the same instant can both enqueue a cell (check, then write); the worker
    that claims the second copy stands down, so the cell runs once and the copy is a PRUNED trial."""
    from freezestats.runner import work_study
    from freezestats.runner.adaptive import adaptive_cells

    spec = load_spec(write_spec(tmp_path, _raw(tiny_model)))
    prepared = prepare_study(spec, glue_dir)
    study = create_or_load_study(open_storage(storage), spec)
    cells = adaptive_cells(prepared, {("agreement", 32, 0): 1, ("agreement", 32, 1): 1})
    for cell in [*cells, *cells]:  # what two racing steps leave behind: every cell twice
        study.enqueue_trial(cell.params(), user_attrs=cell.attrs())
    work_study(storage, data_dir=glue_dir, show_progress=False)
    assert sorted(fake_training) == sorted(c.key for c in cells)  # each trained once
    states = Counter((t.user_attrs["cell_key"], t.state) for t in study.get_trials())
    assert {state for (_, state) in states} == {TrialState.COMPLETE, TrialState.PRUNED}
    assert all(n == 1 for n in states.values())
    assert all(t.user_attrs.get("duplicate") for t in study.get_trials(states=(TrialState.PRUNED,)))


def test_two_worker_processes_drain_a_round_and_the_run_decides_after_it(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential, capsys
) -> None:
    """``--workers 2``: real worker processes (real, tiny fine-tuning) claim the round's seeds; this process takes
    the decision after it (the budget then stops the study, to keep this to one start of the workers). Whatever
    the scores, every enqueued seed completes exactly once."""
    spec = write_spec(tmp_path, _raw(tiny_model, max_seeds=3, budget=6))
    assert _run(spec, storage, glue_dir, "--workers", "2") == 0
    out = capsys.readouterr().out
    counts = _complete(storage)
    study = load_study(open_storage(storage), None)
    trials = study.get_trials()
    enqueued = {t.user_attrs["cell_key"] for t in trials if is_enqueued_cell(t)}
    # A worker that raced another for the last WAITING cell creates a stray trial (no cell), which it prunes.
    strays = [t for t in trials if not is_enqueued_cell(t)]
    assert all(t.state == TrialState.PRUNED and t.user_attrs.get("stray") for t in strays)
    assert set(counts) == enqueued and set(counts.values()) == {1} and len(counts) == 6
    assert "2 worker process(es)" in out and "6 trials run now" in out
    log = study.user_attrs["adaptive"]
    assert len(log["rounds"]) == 1 and log["stopped"] in ("budget", "decided", "exhausted")
    assert f"Stopped: {_STOPPED[log['stopped']]}" in out


def test_a_seed_whose_copies_both_stood_down_is_enqueued_again_without_counting_twice(
    tmp_path: Path, storage: str, tiny_model: Path, glue_dir: Path, fake_sequential
) -> None:
    from freezestats.analysis.adaptive import decide_round
    from freezestats.runner.adaptive import adaptive_cells
    from freezestats.study.trials import cell_distributions

    spec = load_spec(write_spec(tmp_path, _raw(tiny_model)))
    prepared = prepare_study(spec, glue_dir)
    study = create_or_load_study(open_storage(storage), spec)
    cell = adaptive_cells(prepared, {("agreement", 32, 0): 1})[0]
    for _ in range(2):  # two copies claimed at the same instant: both stood down (queue.duplicate_claim)
        study.add_trial(
            optuna.trial.create_trial(
                params=cell.params(),
                distributions=cell_distributions(spec),
                user_attrs={**cell.attrs(), "duplicate": True},
                state=TrialState.PRUNED,
            )
        )
    step = decision_step(study, prepared, decide_round)
    assert cell.key in {c.key for c in step.enqueued} and len(step.enqueued) == 6
    assert step.runs_used == 6  # the seed was counted once, when it was first enqueued

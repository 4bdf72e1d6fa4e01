"""Run an adaptive study (``freezestats run``, a spec with ``[adaptive]``): seeds in rounds until each depth is decided.

Each round runs the seeds it enqueued, then a *decision step* asks the statistics which (task, size, depth) cells
are still open and how many seeds each should have after the next round, and enqueues exactly those seeds. The
statistics sit above the runner (stage 9 over 8), so the decision is a callable the caller passes in
(:func:`freezestats.analysis.adaptive.decide_round` from the command line); this module owns only the loop, the
seeds and the budget.

Why a decision step can run twice, or in two processes, without running anything twice: it keeps no state of
its own. The decision is recomputed from the study's stored trials; what it asks for is a *total* per cell
("5 seeds"), which becomes the cell's first five seeds of its ladder (:meth:`AdaptiveSpec.seed_ladder`); a seed is
a cell of its own (:attr:`Cell.key` holds it); and :func:`~freezestats.study.queue.enqueue_cells` enqueues a cell
only when it has no COMPLETE, WAITING or RUNNING trial. Asking again for what is already there adds nothing, and a
resumed run (stopped mid-round) first drains what is still enqueued, then decides on what is stored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import optuna
from optuna.trial import TrialState

from freezestats.exceptions import SpecError
from freezestats.runner import RunReport, _fail_stale, _Runner, open_for_run
from freezestats.runner._pool import WorkerPool
from freezestats.runner._prepare import PreparedStudy
from freezestats.spec.adaptive import AdaptiveSpec
from freezestats.spec.study import StudySpec
from freezestats.study.cells import Cell, grid_cells
from freezestats.study.queue import enqueue_cells, is_enqueued_cell, trials_by_cell
from freezestats.study.trials import set_user_attrs

__all__ = ["ADAPTIVE_ATTR", "AdaptiveRun", "Decide", "RoundDecision", "adaptive_cells", "decision_step", "run_adaptive"]

ADAPTIVE_ATTR = "adaptive"
"""The study's user attribute that says it ran adaptively: its plan, the rounds taken and why it stopped."""

CellKey = tuple[str, int, int]
"""(task, train_size, frozen_layers): what a decision is about; its seeds are its cells."""


@dataclass(frozen=True)
class RoundDecision:
    """What the statistics decided from the stored trials: how many seeds each still-open cell should have.

    ``targets`` holds only the cells that need more (the reference, frozen 0, while any comparison with it is
    open); ``n_open`` counts the comparisons still open (an open one that cannot close within ``max_seeds`` is
    not counted: it is exhausted, and gets no target).
    """

    targets: Mapping[CellKey, int]
    n_open: int = 0
    n_decided: int = 0


Decide = Callable[[optuna.Study, StudySpec], RoundDecision]
"""A decision step's statistics: the study (its stored trials) and its spec -> the next round."""


@dataclass(frozen=True)
class StepResult:
    """What one decision step did: the cells it enqueued now, and why the loop stops (``""``: it goes on)."""

    enqueued: list[Cell]
    decision: RoundDecision | None
    runs_used: int
    stop: str = ""


@dataclass(frozen=True)
class AdaptiveRun:
    """What :func:`run_adaptive` did: the run's report, the rounds enqueued now and why it stopped."""

    report: RunReport
    rounds: int
    runs_used: int
    stopped: str
    """``decided`` (no comparison open), ``budget`` (the next round would spend more than ``adaptive.budget``),
    ``exhausted`` (open cells but no seed left to run), ``max_trials``, ``interrupted``, or ``enqueued``
    (``--enqueue-only``: one decision step, the workers run it)."""
    log: list[dict] = field(default_factory=list)


def base_cells(prepared: PreparedStudy) -> list[Cell]:
    """One cell per (task, size, depth), at the ladder's first seed: what every seed of that cell copies."""
    first = prepared.spec.grid.seeds[0]
    grid = grid_cells(prepared.spec, prepared.pool_sizes, n_layers=prepared.n_layers)
    return [cell for cell in grid if cell.seed == first]


def adaptive_cells(prepared: PreparedStudy, targets: Mapping[CellKey, int]) -> list[Cell]:
    """The cells (one per seed) that give each (task, size, depth) its first ``targets[...]`` seeds of the ladder."""
    adaptive = _plan(prepared.spec)
    ladder = adaptive.seed_ladder(prepared.spec.grid.seeds)
    cells = []
    for base in base_cells(prepared):
        wanted = min(targets.get((base.task, base.train_size, base.frozen_layers), 0), adaptive.max_seeds)
        cells.extend(replace(base, seed=seed) for seed in ladder[:wanted])
    return cells


def runs_used(study: optuna.Study) -> int:
    """Grid cells (task, size, depth, seed) that have a trial: the runs the budget counts (retries are not)."""
    return sum(1 for trials in trials_by_cell(study).values() if trials[0].user_attrs.get("role") != "search")


def decision_step(study: optuna.Study, prepared: PreparedStudy, decide: Decide) -> StepResult:
    """Decide on the stored trials and enqueue the next round's seeds (none twice; within the budget).

    Every cell has at least the first round's seeds (``min_seeds``, or ``futility_seeds`` where set); with
    finished runs stored, the statistics add the seeds of the cells still open. A round that would take the study
    past ``adaptive.budget`` is not enqueued.
    """
    adaptive = _plan(prepared.spec)
    targets = {(c.task, c.train_size, c.frozen_layers): adaptive.first_seeds for c in base_cells(prepared)}
    decision = None
    if _finished(study):
        decision = decide(study, prepared.spec)
        for key, wanted in decision.targets.items():
            targets[key] = max(targets.get(key, 0), wanted)
    existing = trials_by_cell(study)
    cells = adaptive_cells(prepared, targets)
    fresh = [cell for cell in cells if cell.key not in existing]  # a seed tried before is counted already
    used = runs_used(study)
    if adaptive.budget is not None and fresh and used + len(fresh) > adaptive.budget:
        return StepResult([], decision, used, stop="budget")
    # Every wanted seed goes to the queue's check: one with a live trial is skipped, one that failed (or whose
    # copies both stood down, queue.duplicate_claim) is enqueued again while it has retries left.
    added = enqueue_cells(study, cells, prepared.spec.execution.max_retries)
    waiting = any(_pending(t) for trials in trials_by_cell(study).values() for t in trials)
    if added or waiting:
        return StepResult(added, decision, used + len(fresh))
    open_left = decision is not None and decision.n_open > 0
    return StepResult([], decision, used, stop="exhausted" if open_left else "decided")


def run_adaptive(
    spec: StudySpec,
    storage: str,
    decide: Decide,
    *,
    data_dir: str | Path | None = None,
    artifact_dir: str | Path | None = None,
    max_trials: int | None = None,
    show_progress: bool = True,
    enqueue_only: bool = False,
    workers: int = 1,
    devices: Sequence[str] | None = None,
    auto_workers: bool = False,
) -> AdaptiveRun:
    """Run (or resume) an adaptive study: rounds of seeds until every comparison is decided or the budget is spent.

    With ``workers > 1`` the workers drain each round and this process takes the decision between rounds; a
    worker started on its own (``freezestats worker``) drains whatever is enqueued. ``enqueue_only``: one decision
    step (the next round, from what is stored), nothing run; run it again after the workers finish.
    """
    started = time.perf_counter()
    _plan(spec)
    prepared, study, artifacts = open_for_run(spec, storage, None, data_dir, artifact_dir)
    loop = _RoundLoop(prepared, study, decide)
    if enqueue_only:
        loop.step()
        return loop.result(_report(study, storage, started, 0), "enqueued" if not loop.stopped else loop.stopped)
    pool = (
        WorkerPool(storage, spec.name, workers, devices, data_dir, artifacts, auto=auto_workers)
        if workers > 1
        else None
    )
    runner = _Runner(prepared, study, artifacts, max_trials, show_progress, pool)
    interrupted = runner.until_done_or_interrupted(lambda: loop.run(runner))
    stopped = "interrupted" if interrupted else loop.stopped
    return loop.result(_report(study, storage, started, runner.n_run, interrupted), stopped)


class _RoundLoop:
    """Decide, enqueue, drain, until a step says stop; keeps the study's adaptive log (plan, rounds, stop)."""

    def __init__(self, prepared: PreparedStudy, study: optuna.Study, decide: Decide, poll_seconds: float = 2.0):
        self.prepared = prepared
        self.study = study
        self.decide = decide
        self.poll_seconds = poll_seconds
        self.rounds = 0
        self.stopped = ""
        self.used = runs_used(study)
        log = study.user_attrs.get(ADAPTIVE_ATTR) or {}
        self.log = {"plan": _plan(prepared.spec).stored_form(), "rounds": list(log.get("rounds", [])), "stopped": ""}
        set_user_attrs(study, {ADAPTIVE_ATTR: self.log})

    def step(self) -> StepResult:
        step = decision_step(self.study, self.prepared, self.decide)
        self.used = step.runs_used
        if step.enqueued:
            self.rounds += 1
            self._note({"round": len(self.log["rounds"]) + 1, "enqueued": len(step.enqueued), "runs": step.runs_used,
                        **_counts(step.decision)})  # fmt: skip
        if step.stop:
            self.stopped = step.stop
            self.log["stopped"] = step.stop
            set_user_attrs(self.study, {ADAPTIVE_ATTR: self.log})
        return step

    def _note(self, entry: dict) -> None:
        self.log["rounds"].append(entry)
        set_user_attrs(self.study, {ADAPTIVE_ATTR: self.log})

    def run(self, runner: _Runner) -> None:
        """Rounds until a step stops the loop or the run's ``--max-trials`` is spent."""
        while True:
            step = self.step()
            if step.stop:
                return
            runner.progress.set_total(self.used)
            runner._enqueue_and_drain(step.enqueued)  # nothing new to add: it runs what waits, and retries failures
            if not runner._budget_left():
                self.stopped = "max_trials"
                return
            self._settle(runner)

    def _settle(self, runner: _Runner) -> None:
        """Wait for trials other workers still run (a decision on half a round would waste a look)."""
        while any(t.state == TrialState.RUNNING for t in self.study.get_trials(deepcopy=False) if is_enqueued_cell(t)):
            runner.interrupts.check()
            time.sleep(self.poll_seconds)
            _fail_stale(self.study)  # a worker that died: its trial fails, and is retried next round

    def result(self, report: RunReport, stopped: str) -> AdaptiveRun:
        return AdaptiveRun(report, self.rounds, runs_used(self.study), stopped, list(self.log["rounds"]))


def _counts(decision: RoundDecision | None) -> dict[str, int]:
    return {} if decision is None else {"open": decision.n_open, "decided": decision.n_decided}


def _plan(spec: StudySpec) -> AdaptiveSpec:
    if spec.adaptive is None:
        raise SpecError(f"Study '{spec.name}' has no [adaptive] table: add one to run it adaptively ({spec.source}).")
    return spec.adaptive


def _finished(study: optuna.Study) -> bool:
    return any(is_enqueued_cell(t) for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _pending(trial: optuna.trial.FrozenTrial) -> bool:
    return trial.state in (TrialState.WAITING, TrialState.RUNNING) and trial.user_attrs.get("role") != "search"


def _report(study: optuna.Study, storage: str, started: float, n_run: int, interrupted: bool = False) -> RunReport:
    """The run's report; an adaptive study's cells are the seeds enqueued so far (its size is not known ahead)."""
    by_cell = trials_by_cell(study)
    states = [{t.state for t in trials} for trials in by_cell.values()]
    alive = (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)
    return RunReport(
        study_name=study.study_name,
        storage=storage,
        n_cells=len(by_cell),
        n_complete=sum(TrialState.COMPLETE in s for s in states),
        n_failed_cells=sum(not any(state in s for state in alive) for s in states),
        n_run_now=n_run,
        wall_seconds=time.perf_counter() - started,
        interrupted=interrupted,
    )

"""Do the task-level intervals cover the task's truth when runs behave like real runs? And what do they cost?

    python bench/coverage_task_level.py                        # 400 studies of 5 seeds (one process)
    python bench/coverage_task_level.py --studies 100 --seeds 8
    python bench/coverage_task_level.py --from-json bench/results/coverage_task_level.json   # reprint a run
    python bench/coverage_task_level.py --first 200 --studies 200 --output bench/results/chunk_200.json
    python bench/coverage_task_level.py --combine bench/results/chunk_0.json bench/results/chunk_200.json \
        --output bench/results/merged.json     # chunks of one longer run, merged study by study
    python bench/coverage_task_level.py --failure-rates slope --baseline bench/results/coverage_task_level.json \
        --output bench/results/coverage_task_level_slope.json    # another failure-rate model, beside the default's
    python bench/coverage_task_level.py --sd-grid 0.1,0.25,0.5,1,1.5,2,3 --processes 2 \
        --output bench/results/coverage_task_level_grid01.json   # an experiment: the joint draws' SD grid

Each study is one simulated SST-2 grid from ``freezestats.stats.simulation.realistic.blog_shaped``: the blog
example's cell means, depths -1/0/1/2/4/5/6 x 50..1000 examples, 872 evaluation items drawn anew from a
20,000-item population (436 scored by ``heldout``), depths that disagree item by item, run SDs that differ by
depth, a seed correlation with the reference from 0.99 to -0.3, runs that lean towards one class, and collapsed
runs (30% at 50 examples, 2% at 1000, more at deeper depths). None of that is the mixed model's assumption,
so this measures the intervals where the old model-based bench (bench/coverage.py) could not.

For every (train size, depth) it prints the two-sided 95% per-comparison coverage of

* ``task``: ``task_level_contrasts(population="task")`` (seeds and items) for the task's truth (new seeds and
  new items);
* ``delta``: the same contrast with a symmetric interval, estimate +- t(df) se (the delta-method SE alone, where
  ``task``'s two-part interval takes each side's longer of it and the Wilson-MOVER failure part); ``se/sd`` and
  ``width/sd``: the mean SE, and the mean width over 2 x 1.96, against the estimate's SD over the studies (1 where
  an interval is as wide as a normal estimate needs); ``miss<`` and ``miss>``: the share of studies whose ``task``
  interval missed the truth on its lower side (the side a non-inferiority test reads) and on its upper side, 2.5%
  each for a 95% interval sized and placed right;
* ``seed>task`` and ``seed>items``: the seed-only paired t interval (``population="evaluation_set"``) for the
  task's truth and for the truth on the study's drawn score items (what it speaks of);
* ``model>task`` and ``model>items``: the old answer, ``fit_mixed(results, "heldout")`` with
  ``contrasts_vs_reference(adjust="none")``, for the same two truths;

then the share of studies in which ``task_noninferiority(margin=0.01)`` names the depth non-inferior (power,
beside the true cost), and, from as many studies of ``null_at_margin(0.01)`` (every depth's true cost exactly
-0.01), the familywise error: the share of studies naming any depth at any size non-inferior (nominal <= 5%),
and per size. ``task|collapse`` and ``task|none`` split the task-level coverage by whether any of the contrast's
runs collapsed; ``--collapse 0`` runs the same cell means with no collapsed runs, and ``--seed-shared-collapse``
with collapses that follow the seed across depths, as real ones do (``seed_shared_collapse``; by default each run
collapses on its own draw). The Monte Carlo band of a 95%
coverage from N studies is +-1.96 sqrt(0.95 * 0.05 / N).

The runs' ``failed`` flags are the analysis's own (``flag_failures``, the binomial rule against the majority
rate on the scored half, as ``freezestats analyze`` judges an accuracy task), not the simulator's knowledge of
which runs collapsed: a deep depth that scores near the majority rate is flagged too, as in real tables. Where a
task has failed runs the contrasts are two-part (:mod:`freezestats.stats.items.task_two_part`); ``two-part``
is the share of contrasts estimated so. ``--failure-rates`` picks the model of the failure part's rates
(``pooled_joint``, the analysis's default, ``pooled`` or ``slope``:
:data:`~freezestats.stats.items.task_two_part.FAILURE_RATES`),
for the task-level and the seed-only contrasts alike; ``--baseline`` prints a saved run's task-level coverage,
power and familywise error beside this one's (``base``, ``base_pow``), which compares the two on the same studies
when both ran as many (study i draws rng=i). ``--sd-grid`` replaces the level x size SDs the joint draws
integrate over (:data:`~freezestats.stats.failures.sd_integration.SD_GRID`) in every process, to see whether
another grid keeps n = 100 in the band and brings the conservative shallow cells into it (a grid down to 0.05
did not: ``bench/results/coverage_task_level_grid005_paired.txt``); it is recorded, and a run on another grid is
not merged with the analysis's. ``--cell-prior-scale`` and ``--level-sd`` change the failure part's other
constants in every process (:class:`Experiment`, one row each of ``SWITCHES`` in ``coverage_task_level_record.py``;
each recorded, and runs that differ in one are not merged).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import multiprocessing
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats import contrasts_vs_reference, fit_mixed
from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.items.task_two_part import DEFAULT_FAILURE_RATES, FAILURE_RATES
from freezestats.stats.simulation.realistic import (
    RealisticTask,
    Scenario,
    blog_shaped,
    null_at_margin,
    realistic_task,
    seed_shared_collapse,
    simulate_realistic,
)

# the record of a run (summary, merging chunks, the printed table): coverage_task_level_record.py, loaded by path
# as it loads bench/coverage.py (`import coverage` would find pytest-cov's package first); its copy of coverage.py
# serves the command line here too, so that module is executed once
_spec = importlib.util.spec_from_file_location(
    "bench_coverage_task_level_record", Path(__file__).resolve().with_name("coverage_task_level_record.py")
)
saved = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(saved)  # type: ignore[union-attr]
coverage = saved.coverage
COVERAGES, combine, report, studies_path = saved.COVERAGES, saved.combine, saved.report, coverage.studies_path

MARGIN = 0.01
NULL_OFFSET = 1_000_000  # the null studies' generator seeds: study i draws rng=NULL_OFFSET + i
_TASKS: dict[str, RealisticTask] = {}  # the two scenarios made concrete, once per process
# the contrasts' options, set per process by configure
_OPTIONS: dict[str, str] = {"failure_rates": DEFAULT_FAILURE_RATES}


def _truths(table: pd.DataFrame, truth: dict[tuple[int, int], float]) -> pd.Series:
    """Each contrast's truth, on the table's index."""
    keys = zip(table["train_size"].astype(int), table["frozen_layers"].astype(int), strict=True)
    return pd.Series([truth[key] for key in keys], index=table.index, dtype=float)


def _covers(table: pd.DataFrame, truth: dict[tuple[int, int], float]) -> pd.Series:
    target = _truths(table, truth)
    return (table["ci_low"] <= target) & (target <= table["ci_high"])


def one_study(index: int) -> tuple[list[dict], list[dict], str | None]:
    """One study of each scenario: per contrast, which intervals cover which truth and whether the depth is shown
    non-inferior (``alternative``), and per contrast of the null study whether it is (``null``)."""
    study = simulate_realistic(_TASKS["alternative"], rng=index)
    runs, items = _flagged(study.results), study.items
    task = task_level_contrasts(runs, items, response="heldout", metric="accuracy", **_OPTIONS)
    seed = task_level_contrasts(
        runs, None, response="heldout", metric="accuracy", population="evaluation_set", **_OPTIONS
    )
    shown = task_noninferiority(task, margin=MARGIN).set_index(["train_size", "frozen_layers"])["noninferior"]
    error = None
    try:
        model = contrasts_vs_reference(fit_mixed(runs, "heldout"), 0, adjust="none")
    except ModelFitError as exc:
        model, error = None, type(exc).__name__
    collapsed = _collapsed(runs)
    covered = _covers(task, study.truth_task)
    truths = _truths(task, study.truth_task)
    half = stats.t.ppf(0.975, task["df"].clip(lower=1)) * task["se"]
    delta = np.abs(task["estimate"] - truths) <= half  # the same contrast's symmetric delta-method interval
    rows = []
    for i, row in task.iterrows():
        key = (int(row["train_size"]), int(row["frozen_layers"]))
        rows.append({"study": index, "train_size": key[0], "frozen_layers": key[1],
                     "truth_task": truths[i], "truth_items": study.truth_items[key],
                     "collapse": collapsed[key], "two_part": row["method"] != "all runs",
                     "task": bool(covered[i]), "task_delta": bool(delta[i]), "noninferior": bool(shown[key]),
                     "error": float(row["estimate"] - truths[i]), "se": float(row["se"]),
                     "width": float(row["ci_high"] - row["ci_low"])})  # fmt: skip
    frame = pd.DataFrame(rows).set_index(["train_size", "frozen_layers"])
    for name, table in (("seed", seed), ("model", model)):
        if table is None:
            continue
        table = table.set_index(["train_size", "frozen_layers"], drop=False)
        frame[f"{name}_task"] = _covers(table, study.truth_task).reindex(frame.index)
        frame[f"{name}_items"] = _covers(table, study.truth_items).reindex(frame.index)
    return frame.reset_index().to_dict("records"), null_study(index), error


def _flagged(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with the analysis's failure flags (the binomial rule on the scored half) in ``failed``; the
    simulator's collapse flag moves to ``collapsed``."""
    flags = flag_failures(runs, checkpoint="heldout", rule="binomial").to_numpy()
    return runs.assign(collapsed=runs["failed"].to_numpy(), failed=flags)


def _collapsed(runs: pd.DataFrame) -> dict[tuple[int, int], bool]:
    """Per contrast: whether any run of the depth or of the reference at that size collapsed."""
    flag = "collapsed" if "collapsed" in runs.columns else "failed"
    cell = runs.groupby(["train_size", "frozen_layers"])[flag].any()
    return {(int(n), int(k)): bool(v or cell[(n, 0)]) for (n, k), v in cell.items()}


def null_study(index: int, failure_rates: str | None = None) -> list[dict]:
    """Per contrast of null study ``index`` (generator seed ``NULL_OFFSET + index``) at the margin: whether the
    depth is shown non-inferior, whether any of its runs collapsed, and how many of the pair's runs at that size
    the analysis flagged as failed (``flagged``, of ``runs``). ``failure_rates`` overrides the model
    :func:`configure` set, so another bench can score the same study under several models."""
    null = simulate_realistic(_TASKS["null"], rng=NULL_OFFSET + index)
    runs = _flagged(null.results)
    options = {**_OPTIONS, **({"failure_rates": failure_rates} if failure_rates else {})}
    shown = task_noninferiority(
        task_level_contrasts(runs, null.items, response="heldout", metric="accuracy", **options), margin=MARGIN
    )
    collapsed = _collapsed(runs)
    flagged = runs.groupby(["train_size", "frozen_layers"])["failed"].agg(["sum", "size"])
    out = []
    for r in shown.itertuples():
        n, k = int(r.train_size), int(r.frozen_layers)
        out.append({"study": index, "train_size": n, "frozen_layers": k, "noninferior": bool(r.noninferior),
                    "collapse": collapsed[(n, k)], "flagged": int(flagged.loc[[(n, k), (n, 0)], "sum"].sum()),
                    "runs": int(flagged.loc[[(n, k), (n, 0)], "size"].sum())})  # fmt: skip
    return out


class Experiment(NamedTuple):  # not a dataclass: tests load this script without a sys.modules entry
    """Settings of the analysis an experiment changes in every process, by their names in ``saved.SWITCHES`` (the
    table says what each is and where the analysis reads it); a setting not named keeps the analysis's own. Build it
    with :meth:`of`."""

    changes: tuple[tuple[str, object], ...] = ()

    @classmethod
    def of(cls, **changes: object) -> Experiment:
        """The experiment that sets these switches (by their ``SWITCHES`` names); a None value changes nothing."""
        unknown = sorted(set(changes) - set(saved.SWITCHES))
        if unknown:
            raise ValueError(f"no such switch: {', '.join(unknown)} (known: {', '.join(saved.SWITCHES)})")
        return cls(tuple((name, value) for name, value in changes.items() if value is not None))

    def apply(self) -> None:
        """Set this process's analysis to these settings."""
        for name, value in self.changes:
            module, attribute = _home(name)
            setattr(module, attribute, value)

    def settings(self) -> dict:
        """What the record says the run used: the analysis's own where not set, except for a switch whose record
        default is None (the SD grid), which a record names only where the run changed it."""
        changed = dict(self.changes)
        own = {name: getattr(*_home(name)) for name, switch in saved.SWITCHES.items() if switch.default is not None}
        out = {name: changed.get(name, own.get(name)) for name in saved.SWITCHES}
        return {name: list(value) if isinstance(value, tuple) else value for name, value in out.items()}


def _home(name: str) -> tuple[object, str]:
    """The module and attribute a switch sets."""
    module, attribute = saved.SWITCHES[name].home.split(":")
    return importlib.import_module(module), attribute


#: no setting changed: the analysis as it ships
ANALYSIS = Experiment()


def configure(
    alternative: RealisticTask, null: RealisticTask, failure_rates: str = DEFAULT_FAILURE_RATES,
    experiment: Experiment = ANALYSIS,
) -> None:  # fmt: skip
    """Set this process's two scenarios, failure-rate model and experiment (a pool's initializer)."""
    _TASKS.update(alternative=alternative, null=null)
    _OPTIONS.update(failure_rates=failure_rates)
    experiment.apply()


def parse_sd_grid(text: str) -> tuple[float, ...]:
    """``--sd-grid``: comma-separated SDs, positive and increasing; a one-line error otherwise."""
    try:
        grid = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise SystemExit(f"error: --sd-grid must be comma-separated numbers, got {text!r}") from None
    if not grid or grid[0] <= 0 or (np.diff(grid) <= 0).any():
        raise SystemExit(f"error: --sd-grid must be positive and increasing, got {text!r}")
    return grid


def parse_scale(text: str) -> float:
    """A prior scale or SD (``--cell-prior-scale``, ``--level-sd``): a positive number;
    argparse names the flag in its one-line error otherwise."""
    try:
        scale = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not scale > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return scale


def parse_depth_collapse(text: str) -> dict[int, float]:
    """``--depth-collapse``: ``depth=factor`` pairs, comma-separated (``-1=2.2,1=2.2``), each factor positive;
    a one-line error otherwise."""
    try:
        pairs = dict(part.split("=") for part in text.split(","))
        factors = {int(depth): float(factor) for depth, factor in pairs.items()}
    except ValueError:
        raise SystemExit(f"error: --depth-collapse must be depth=factor pairs (-1=2.2,1=2.2), got {text!r}") from None
    if not all(factor > 0 for factor in factors.values()):
        raise SystemExit(f"error: --depth-collapse factors must be positive, got {text!r}")
    return factors


def scenario_of(base: Scenario, seeds: int, collapse_scale: float = 1.0,
                depth_collapse: dict[int, float] | None = None) -> Scenario:  # fmt: skip
    """``base`` with ``seeds`` a cell, its collapse rates times ``collapse_scale`` and the depths of
    ``depth_collapse`` collapsing at those factors of the reference's rate; a depth it lacks is a one-line error."""
    unknown = sorted(set(depth_collapse or {}) - set(base.depth_collapse))
    if unknown:
        raise SystemExit(f"error: --depth-collapse names depths the scenario does not have: {unknown}")
    collapse = {n: rate * collapse_scale for n, rate in base.collapse.items()}
    factors = {**base.depth_collapse, **(depth_collapse or {})}
    return replace(base, seeds=seeds, collapse=collapse, depth_collapse=factors)


def run(
    n_studies: int,
    seeds: int = 5,
    processes: int = 1,
    base: Scenario | None = None,
    collapse_scale: float = 1.0,
    failure_rates: str = DEFAULT_FAILURE_RATES,
    first: int = 0,
    experiment: Experiment = ANALYSIS,
    depth_collapse: dict[int, float] | None = None,
) -> tuple[dict, pd.DataFrame]:
    """Studies ``first`` .. ``first + n_studies - 1`` of ``base`` (default :func:`blog_shaped`) with ``seeds``
    seeds a cell and its collapse rates times ``collapse_scale`` (and the depths in ``depth_collapse`` at those
    factors of the reference's rate instead of the scenario's), and as many of its null at the margin;
    ``processes`` > 1 runs them in a pool of that many. ``failure_rates`` is the task-level contrasts'
    failure-rate model, ``experiment`` the analysis's settings changed (:class:`Experiment`, recorded in the
    settings).
    Returns the saved record and every study's rows (``kind`` "alternative" or "null"), which
    :func:`combine` merges with other chunks' into one record."""
    base = scenario_of(blog_shaped() if base is None else base, seeds, collapse_scale, depth_collapse)
    tasks = (realistic_task(base), realistic_task(null_at_margin(MARGIN, base)), failure_rates, experiment)
    started = time.perf_counter()
    indices = range(first, first + n_studies)
    if processes > 1:
        with multiprocessing.Pool(processes, initializer=configure, initargs=tasks) as pool:
            outcomes = pool.map(one_study, indices, chunksize=4)
    else:
        configure(*tasks)
        outcomes = [one_study(i) for i in indices]
    alt = pd.DataFrame([row for rows, _, _ in outcomes for row in rows]).assign(kind="alternative")
    null = pd.DataFrame([row for _, rows, _ in outcomes for row in rows]).assign(kind="null")
    errors: dict[str, int] = {}
    for _, _, error in outcomes:
        if error:
            errors[f"fit_mixed: {error}"] = errors.get(f"fit_mixed: {error}", 0) + 1
    settings = {"seeds": seeds, "margin": MARGIN, "processes": processes, "collapse_scale": collapse_scale,
                "seed_shared_collapse": base.collapse_rho is not None, "failure_rates": failure_rates,
                **experiment.settings()}  # fmt: skip
    if depth_collapse:  # named only where set, so that earlier records and chunks compare as before
        settings["depth_collapse"] = {str(depth): factor for depth, factor in sorted(depth_collapse.items())}
    record = saved.record(alt, null, started, errors, settings, studies=[first, first + n_studies])
    return record, pd.concat([alt, null], ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--first", type=int, default=0, help="the first study's index (a chunk of a longer run)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=1, help="studies run in a pool of this many (default 1)")
    parser.add_argument("--collapse", type=float, default=1.0, help="collapse rates times this (0: none)")
    rates = f"failure-part rate model (default {DEFAULT_FAILURE_RATES}, the analysis's)"
    parser.add_argument("--failure-rates", default=DEFAULT_FAILURE_RATES, choices=FAILURE_RATES, help=rates)
    shared = "collapses follow the seed across depths (seed_shared_collapse: the skill's correlation, sign dropped)"
    parser.add_argument("--seed-shared-collapse", action="store_true", help=shared)
    factors = "depth=factor pairs: these depths' collapse rates at that factor of the reference's (=-1=2.2,1=2.2)"
    parser.add_argument("--depth-collapse", type=parse_depth_collapse, help=factors)
    readers = {"grid": parse_sd_grid, "scale": parse_scale}
    for name, switch in saved.SWITCHES.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=readers[switch.parse], help=f"{switch.help}; default the analysis's")
    parser.add_argument("--baseline", help="a saved run whose task-level coverage to print beside this one's")
    parser.add_argument("--output", default="bench/results/coverage_task_level.json")
    parser.add_argument("--from-json", help="reprint a saved run")
    chunks = "saved runs (JSON, their _studies.parquet beside them) to merge into --output, instead of running"
    parser.add_argument("--combine", nargs="+", metavar="JSON", help=chunks)
    args = parser.parse_args()
    baseline = json.loads(Path(args.baseline).read_text()) if args.baseline else None
    base = seed_shared_collapse(blog_shaped()) if args.seed_shared_collapse else None

    def compute() -> dict:
        if args.combine:
            records = [json.loads(Path(path).read_text()) for path in args.combine]
            return combine(records, [pd.read_parquet(studies_path(path)) for path in args.combine])
        experiment = Experiment.of(**{name: getattr(args, name) for name in saved.SWITCHES})
        record, studies = run(args.studies, args.seeds, args.processes, base, collapse_scale=args.collapse,
                              failure_rates=args.failure_rates, first=args.first, experiment=experiment,
                              depth_collapse=args.depth_collapse)  # fmt: skip
        studies_path(args.output).parent.mkdir(parents=True, exist_ok=True)
        studies.to_parquet(studies_path(args.output), index=False)
        return record

    show = lambda result: report(result, baseline)  # noqa: E731
    coverage.reprint_or_run(args.from_json, args.output, compute, show)
    if not args.from_json:
        Path(args.output).with_suffix(".txt").write_text(show(json.loads(Path(args.output).read_text())))


if __name__ == "__main__":
    main()

"""Do freezestats' 95% intervals cover 95%? Coverage of every frozen-vs-0 contrast on simulated blog-shaped studies.

    python bench/coverage.py                      # 1000 studies per scenario (about 20 min on 2 cores)
    python bench/coverage.py --n-studies 200 --scenarios a
    python bench/coverage.py --from-json bench/results/coverage.json   # reprint a saved run

Scenarios (SST-2 grid of the blog: frozen -1/0/2/4/8/10/12 x 50..1000 examples x 5 seeds, true cell means =
the blog appendix's means, seed SD 0.01 and seed-by-size SD 0.005):

* ``a``: the run-level SD differs by train size, the appendix's median SST-2 cell SD per size
  (0.071 at 50 to 0.0044 at 1000);
* ``b``: the run-level SD differs by cell, the appendix's SD of each cell (up to 9x apart within a size, 0 for
  the collapsed frozen-12 cells at 500 and 1000), plus 5% of runs collapsed to the majority class (0.509).

Methods: the default mixed model (``variance="per_size"``), ``per_cell``, the pooled model (one residual
variance, the model before this bench existed), the paired per-seed contrasts, and ``two_part`` / ``two_part_cell``
(``stats.two_part_contrasts``: P(fail) from the pooled failure GLMM × the healthy runs' mixed model with per-size /
per-cell variance, failure judged by the binomial rule on the best checkpoint, as ``analyze`` judges it), and
``two_part_cell_firth`` (P(fail) from the per-level Firth model it replaced). Every interval is the
per-comparison 95% t interval (no multiplicity adjustment), so its nominal coverage is 95%. The truth of a
contrast in ``b`` is ``(1 - 0.05) * (mu_k - mu_0)``: collapse is independent of the cell.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from rich.progress import Progress
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats import contrasts_vs_reference, fit_mixed, paired_contrasts, simulate_results, true_cell_means
from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.failures.two_part import failures_within_cells, two_part_contrasts
from freezestats.stats.simulation.results import blog_run_sds

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/flops.py, also when imported from elsewhere

import flops  # the CPU's name, as every bench gives it

METHODS = ("per_size", "per_cell", "pooled", "paired", "two_part", "two_part_cell", "two_part_cell_firth", "auto")
DEFAULT_METHODS = ("per_size", "pooled", "paired")  # per_cell: ~1 s a fit with 35 variances; opt in
FAIL_RATE = {"a": 0.0, "b": 0.05}
SEED_SD, SEED_SIZE_SD = 0.01, 0.005
AUTO_CHOICES: dict[str, int] = {}  # what method "auto" chose, over all studies of the run


def simulate(scenario: str, rng: int) -> pd.DataFrame:
    """One blog-shaped SST-2 study of the scenario (see the module docstring)."""
    sds = blog_run_sds("sst2", per="size" if scenario == "a" else "cell")
    return simulate_results(
        seed_sd=SEED_SD, seed_size_sd=SEED_SIZE_SD, resid_sd=sds, fail_rate=FAIL_RATE[scenario], rng=rng
    )


def truth(scenario: str) -> pd.DataFrame:
    """The true frozen-minus-0 difference of every (frozen_layers, train_size), as the simulation generates it."""
    means = true_cell_means(tasks=("sst2",)).set_index(["frozen_layers", "train_size"])["true_mean"]
    reference = means.xs(0, level="frozen_layers")
    diff = (means - reference.reindex(means.index, level="train_size")) * (1 - FAIL_RATE[scenario])
    return diff.drop(index=0, level="frozen_layers").rename("truth").reset_index()


def intervals(table: pd.DataFrame, method: str) -> pd.DataFrame:
    """Per-comparison 95% intervals of each frozen-vs-0 contrast by one method."""
    failed = flag_failures(table, checkpoint="best", rule="binomial").fillna(False).astype(bool)
    if method == "auto":  # as `analyze` answers: two-part (per cell) where failed runs form a second mode in a cell
        method = "two_part_cell" if failures_within_cells(table, failed, "best_dev") else "per_size"
        AUTO_CHOICES[method] = AUTO_CHOICES.get(method, 0) + 1
    if method.startswith("two_part"):  # as `analyze` runs it: failure judged by the binomial rule on best_dev's
        variance = "per_cell" if method.startswith("two_part_cell") else "per_size"
        model = "firth" if method.endswith("_firth") else "pooled"
        out = two_part_contrasts(
            table.assign(failed=failed.to_numpy()), "best_dev", variance=variance, failure_model=model
        )
    elif method == "paired":
        out = paired_contrasts(table, "best_dev", reference=0, adjust="none")
    else:
        out = contrasts_vs_reference(fit_mixed(table, "best_dev", variance=method), 0, adjust="none")
    return out[["frozen_layers", "train_size", "ci_low", "ci_high"]]


def run(scenarios: list[str], n_studies: int, methods: tuple[str, ...] = METHODS) -> dict:
    hits: dict[tuple[str, str], list[pd.DataFrame]] = {}
    errors: dict[str, int] = {}
    choices: dict[str, dict[str, int]] = {}  # per scenario: how often "auto" chose each method
    started = time.perf_counter()
    with Progress() as progress:
        for scenario in scenarios:
            target = truth(scenario)
            AUTO_CHOICES.clear()
            task = progress.add_task(f"scenario {scenario}", total=n_studies)
            for i in range(n_studies):
                table = simulate(scenario, rng=10_000 * ord(scenario) + i)
                for method in methods:
                    try:
                        ci = intervals(table, method).merge(target, on=["frozen_layers", "train_size"])
                    except ModelFitError:
                        errors[f"{scenario}/{method}"] = errors.get(f"{scenario}/{method}", 0) + 1
                        continue
                    ci["covered"] = (ci["ci_low"] <= ci["truth"]) & (ci["truth"] <= ci["ci_high"])
                    hits.setdefault((scenario, method), []).append(ci)
                progress.advance(task)
            choices[scenario] = dict(AUTO_CHOICES)
    rows = []
    for (scenario, method), frames in hits.items():
        cells = pd.concat(frames).groupby(["frozen_layers", "train_size"])["covered"].agg(["mean", "count"])
        for (frozen, size), row in cells.iterrows():
            rows.append(
                {
                    "scenario": scenario,
                    "method": method,
                    "frozen_layers": int(frozen),
                    "train_size": int(size),
                    "coverage": float(row["mean"]),
                    "n": int(row["count"]),
                }
            )
    return result_record(n_studies, started, errors, rows, auto_choices=choices)


def result_record(n_studies: int, started: float, errors: dict, rows: list[dict], **extra: object) -> dict:
    """A coverage run's saved record: the machine, its size and time, the fits that raised, one row per contrast.

    Shared with bench/coverage_shared_encoder.py, so both benches' JSON files read the same way.
    """
    machine = f"{platform.node()}: {flops.cpu_name()}, python {sys.version.split()[0]}"
    seconds = time.perf_counter() - started
    return {"machine": machine, "n_studies": n_studies, "seconds": seconds, "errors": errors, **extra, "rows": rows}


def report(result: dict) -> str:
    rows = pd.DataFrame(result["rows"])
    lines = [f"bench/coverage.py: {result['n_studies']} studies per scenario, {result['seconds']:.0f} s"]
    lines.append(f"  {result['machine']}; fits that raised: {result['errors'] or 'none'}")
    for scenario, part in rows.groupby("scenario"):
        mc = 1.96 * np.sqrt(0.95 * 0.05 / result["n_studies"])
        lines.append(f"\nscenario {scenario}: coverage of nominal 95% intervals (MC 95% band +-{mc:.3f})")
        by_size = part.pivot_table(index="method", columns="train_size", values="coverage", aggfunc=["min", "mean"])
        lines.append("  min / mean over the 6 contrasts at each train size")
        lines.append("  " + " " * 10 + "  ".join(f"{'n=' + str(n):>11}" for n in sorted(part["train_size"].unique())))
        for method in [m for m in METHODS if m in by_size.index]:
            cells = "  ".join(
                f"{by_size.loc[method, ('min', n)]:.3f}/{by_size.loc[method, ('mean', n)]:.3f}"
                for n in sorted(part["train_size"].unique())
            )
            lines.append(f"  {method:9s} {cells}")
        chosen = result.get("auto_choices", {}).get(scenario)
        if chosen:
            lines.append(f"  auto chose: {', '.join(f'{m} in {k} studies' for m, k in sorted(chosen.items()))}")
        low = part[part["coverage"] < 0.90]
        if len(low):
            lines.append("  contrasts below 90%:")
            for _, row in low.sort_values(["method", "train_size", "frozen_layers"]).iterrows():
                lines.append(
                    f"    {row['method']:9s} frozen {row['frozen_layers']:>3} at n={row['train_size']:<5} "
                    f"{row['coverage']:.3f}"
                )
        else:
            lines.append("  no contrast below 90%")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-studies", type=int, default=1000)
    parser.add_argument("--scenarios", default="a,b")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS), help=f"any of {', '.join(METHODS)}")
    parser.add_argument("--output", default="bench/results/coverage.json")
    parser.add_argument("--from-json", help="reprint a saved run")
    args = parser.parse_args()
    compute = lambda: run(args.scenarios.split(","), args.n_studies, tuple(args.methods.split(",")))  # noqa: E731
    reprint_or_run(args.from_json, args.output, compute, report)


def exact_upper(errors: int, n: int) -> float:
    """The exact (Clopper-Pearson) one-sided 95% upper bound of a rate seen ``errors`` times in ``n`` studies:
    where no study erred the binomial SE is 0 and says nothing, this says how small the error has been shown to be.
    Shared by the benches that report a familywise error (adaptive_seeds.py, fwer_task_level.py)."""
    return 1.0 if errors >= n else float(stats.beta.ppf(0.95, errors + 1, n - errors))


def studies_path(output: str | Path) -> Path:
    """Where a run saved as ``output`` keeps its per-study rows (``<stem>_studies.parquet`` beside it), for the
    benches that merge chunks or resample studies (coverage_task_level.py, adaptive_seeds.py)."""
    output = Path(output)
    return output.with_name(f"{output.stem}_studies.parquet")


def reprint_or_run(
    from_json: str | None, output: str, compute: Callable[[], dict], show: Callable[[dict], str]
) -> None:
    """A coverage bench's command line: reprint a saved run, or run, save the record to ``output`` and print it."""
    if from_json:
        print(show(json.loads(Path(from_json).read_text())))
        return
    result = compute()
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(result, indent=1))
    print(show(result))


if __name__ == "__main__":
    main()

"""Error rates of the non-inferiority sequence and of Lee et al.'s 90% test, by simulating whole studies.

Each simulated study has the shape of a small freezing study: frozen 0/2/4/6, 8 seeds, one run per seed and
cell, train sizes 200 and 1000; a run is ``mu[k, n] + u_seed + e`` with a seed intercept of SD 0.2 points shared
by every cell, and a run SD of 1 point at n = 200 and 0.3 points at n = 1000 (accuracy scale: 1 point = 0.01).
The model is fitted per train size separately (``fit_mixed`` on the runs of one size, so each size has its own
residual variance), and the tests run on each fit. Two scenarios, both with a margin of 1 point:

* ``power``: freezing 2 / 4 / 6 layers costs 0.5 / 3 / 10 points. Reported: how often frozen 2 is named
  non-inferior (target >= 0.80 at n = 1000) and how often frozen 4 is (target <= 0.05: it costs 3 points).
* ``null``: freezing 2 costs exactly the margin (1 point), so every claim is false; freezing 4 keeps exactly 90%
  of the full model's mean (``mu_4 = 0.9 mu_0``) and 6 keeps 80%. Reported: the familywise error of the
  fixed-sequence procedure (any depth named non-inferior; target <= 0.05 + 2 MC SE), per size and across sizes,
  and the rejection rate of Lee et al.'s ratio test at frozen 4, where the ratio is exactly 0.9 (target 0.05
  within 2 MC SE; frozen 2 keeps 98.9%, so the sequence reaches frozen 4 in practically every study).

Every rate is a share of ``--n-studies`` independent studies, with its Monte Carlo SE ``sqrt(p (1 - p) / N)``.

    python bench/error_rates.py --n-studies 1000
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from freezestats.stats import fit_mixed
from freezestats.stats.inference.noninferiority import fixed_sequence, noninferiority_sequence
from freezestats.stats.relative_quality.operating_point import lee_ratio_tests

FROZEN = (0, 2, 4, 6)
SIZES = (200, 1000)
SEEDS = 8
MARGIN = 0.01
ALPHA = 0.05
SEED_SD = 0.002
RUN_SD = {200: 0.010, 1000: 0.003}
FULL_MEAN = {200: 0.85, 1000: 0.90}
RESPONSE = "heldout"


def true_means(scenario: str, size: int) -> dict[int, float]:
    """Cell means of one train size: the full model's mean minus the cost of each depth."""
    full = FULL_MEAN[size]
    if scenario == "power":
        return {0: full, 2: full - 0.005, 4: full - 0.03, 6: full - 0.10}
    if scenario == "null":
        return {0: full, 2: full - MARGIN, 4: 0.9 * full, 6: 0.8 * full}
    raise ValueError(f"`scenario` must be 'power' or 'null', but got scenario={scenario!r}.")


def simulate_study(scenario: str, rng: np.random.Generator, sizes: Sequence[int] = SIZES) -> pd.DataFrame:
    """One study's results table: every seed runs once in every (depth, size) cell."""
    seed_effect = rng.normal(0.0, SEED_SD, size=SEEDS)
    rows = []
    for size in sizes:
        means = true_means(scenario, size)
        for k in FROZEN:
            noise = rng.normal(0.0, RUN_SD[size], size=SEEDS)
            for seed in range(SEEDS):
                rows.append((size, k, seed + 1, means[k] + seed_effect[seed] + noise[seed]))
    table = pd.DataFrame(rows, columns=["train_size", "frozen_layers", "seed", RESPONSE])
    return table.assign(task="simulated", model="simulated", role="grid", state="complete", subset_draw=0, failed=False)


def analyse_study(table: pd.DataFrame, *, lee: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Non-inferiority and (optionally) Lee's ratio test, each train size fitted on its own.

    The non-inferiority table gets a column ``noninferior_bonferroni``: the same sequence run at ``alpha / S`` for
    the ``S`` sizes (what ``adjust_across="sizes"`` does on a fit of all sizes at once).
    """
    fits = [fit_mixed(part, RESPONSE) for _, part in table.groupby("train_size")]
    ni = pd.concat([noninferiority_sequence(fit, margin=MARGIN, alpha=ALPHA) for fit in fits], ignore_index=True)
    passed = ni["p_val"].to_numpy() < ALPHA / len(fits)
    ni["noninferior_bonferroni"] = fixed_sequence(ni["train_size"].to_numpy(), passed) & passed
    ratio = pd.concat([lee_ratio_tests(fit, ratio=0.9, alpha=ALPHA) for fit in fits]) if lee else pd.DataFrame()
    return ni, ratio


def _rate(hits: Sequence[bool], quantity: str, size: str, target: str, check) -> dict[str, object]:
    values = np.asarray(hits, dtype=float)
    p = float(values.mean())
    se = math.sqrt(p * (1 - p) / values.size)
    return {
        "quantity": quantity,
        "train_size": size,
        "rate": p,
        "mc_se": se,
        "target": target,
        "ok": bool(check(p, se)),
    }


def error_rates(n_studies: int = 1000, *, sizes: Sequence[int] = SIZES, rng: int = 2024, progress=None) -> pd.DataFrame:
    """Simulate ``n_studies`` studies of each scenario and return the table of rates with Monte Carlo SEs.

    ``progress``, when given, is called with no argument after each simulated study.
    """
    generator = np.random.default_rng(rng)
    claims = {"power": [], "null": []}
    for _ in range(n_studies):
        for scenario in ("power", "null"):
            claims[scenario].append(analyse_study(simulate_study(scenario, generator, sizes), lee=scenario == "null"))
            if progress is not None:
                progress()
    rows = []
    for size in sizes:
        power = [ni.set_index(["train_size", "frozen_layers"])["noninferior"] for ni, _ in claims["power"]]
        rows.append(
            _rate(
                [c[(size, 2)] for c in power],
                "P(frozen 2 non-inferior), cost 0.5",
                str(size),
                ">= 0.80 at n = 1000" if size == 1000 else "(none)",
                lambda p, se, s=size: p >= 0.80 or s != 1000,
            )
        )
        rows.append(
            _rate(
                [c[(size, 4)] for c in power],
                "P(frozen 4 non-inferior), cost 3",
                str(size),
                "<= 0.05",
                lambda p, se: p <= 0.05,
            )
        )
    null_any = [ni.groupby("train_size")["noninferior"].any() for ni, _ in claims["null"]]
    for size in sizes:
        rows.append(
            _rate(
                [c[size] for c in null_any],
                "FWER of the sequence, cost(2) = margin",
                str(size),
                "<= 0.05 + 2 MC SE",
                lambda p, se: p <= 0.05 + 2 * se,
            )
        )
    if len(sizes) > 1:
        rows.append(
            _rate(
                [c.any() for c in null_any],
                "FWER over sizes, no adjustment",
                "all",
                "(none; ~1-(0.95)^2)",
                lambda p, se: True,
            )
        )
        rows.append(
            _rate(
                [bool(ni["noninferior_bonferroni"].any()) for ni, _ in claims["null"]],
                "FWER over sizes, Bonferroni (alpha/2)",
                "all",
                "<= 0.05 + 2 MC SE",
                lambda p, se: p <= 0.05 + 2 * se,
            )
        )
    lee = [t.set_index(["train_size", "frozen_layers"])["reaches"] for _, t in claims["null"]]
    for size in sizes:
        rows.append(
            _rate(
                [c[(size, 4)] for c in lee],
                "Lee test rejects at ratio exactly 0.9",
                str(size),
                "0.05 +- 2 MC SE",
                lambda p, se: abs(p - 0.05) <= 2 * se,
            )
        )
    return pd.DataFrame(rows)


def _print(table: pd.DataFrame, n_studies: int, seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Table(title=f"Error rates over {n_studies} simulated studies per scenario ({seconds:.0f} s)")
    for column in ("quantity", "train_size", "rate", "mc_se", "target", "ok"):
        out.add_column(column, justify="left" if column in ("quantity", "target") else "right")
    for row in table.itertuples():
        out.add_row(
            row.quantity, row.train_size, f"{row.rate:.3f}", f"{row.mc_se:.3f}", row.target, "yes" if row.ok else "NO"
        )
    Console(width=120).print(out)


def main(argv: Sequence[str] | None = None) -> None:
    from rich.progress import Progress

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-studies", type=int, default=1000, help="studies per scenario (default 1000)")
    parser.add_argument("--seed", type=int, default=2024, help="random seed of the simulation")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with Progress() as bar:
        task = bar.add_task("simulating studies", total=2 * args.n_studies)
        table = error_rates(args.n_studies, rng=args.seed, progress=lambda: bar.advance(task))
    _print(table, args.n_studies, time.perf_counter() - started)


if __name__ == "__main__":
    main()

"""Fit time of the mixed model (and the OLS cross-check) on a blog-sized table and on one 10x larger; with
``--analyze``, the whole ``analyze`` inside a process that holds a loaded model, as a notebook or the test suite
does (where statsmodels' Holm, which calls ``gc.collect()`` every time, used to cost seconds).

The blog study has 350 runs per model fit (7 frozen levels x 5 sizes x 5 seeds x 2 tasks, fitted per task:
175 runs each); the 10x table has 50 seeds per cell. Tables are simulated with known effects
(``freezestats.stats.simulate_results``) so that the two fits differ only in size. Prints seconds per fit
(best of 3) and the ratio.

    python bench/fit_time.py
    python bench/fit_time.py --analyze
"""

from __future__ import annotations

import platform
import sys
import time

from freezestats.stats import fit_mixed, fit_ols, simulate_results

SIZE_SDS = {50: 0.071, 100: 0.024, 200: 0.0094, 500: 0.0042, 1000: 0.0044}  # blog appendix, median SST-2 cell SD


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    rows = []
    for label, seeds in (("blog (350 runs, 2 tasks)", 5), ("10x (3500 runs, 2 tasks)", 50)):
        table = simulate_results(tasks=("sst2", "cola"), seeds=seeds, rng=1)
        mixed = best_of(lambda t=table: [fit_mixed(t, task=task) for task in ("sst2", "cola")])
        ols = best_of(lambda t=table: [fit_ols(t, task=task) for task in ("sst2", "cola")])
        rows.append((label, len(table), mixed, ols))
    print(f"{'table':<26} {'runs':>5} {'mixed s':>8} {'ols s':>7}")
    for label, n, mixed, ols in rows:
        print(f"{label:<26} {n:>5} {mixed:>8.2f} {ols:>7.2f}")
    print(f"10x / blog fit time: mixed {rows[1][2] / rows[0][2]:.1f}x, ols {rows[1][3] / rows[0][3]:.1f}x")


def analyze_times() -> None:
    """``analyze`` (every table, both fits per task) on 350 and 3500 runs, with MiniLM loaded in the process."""
    from freezestats.analysis.pipeline import analyze
    from freezestats.encoder.backbone import load_classifier

    model = load_classifier("minilm-l6", 2, False)  # held for the whole measurement, like a notebook would
    print(
        f"{platform.processor() or platform.machine()}, python {sys.version.split()[0]}; MiniLM loaded: "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters"
    )
    for label, seeds in (("350 runs, 2 tasks", 5), ("3500 runs, 2 tasks", 50)):
        table = simulate_results(tasks=("sst2", "cola"), seeds=seeds, resid_sd=SIZE_SDS, fail_rate=0.05, rng=1)
        seconds = best_of(lambda t=table: analyze(t, n_boot=2000), repeats=2)
        print(f"analyze, {label}: {seconds:.1f} s")


if __name__ == "__main__":
    analyze_times() if "--analyze" in sys.argv else main()

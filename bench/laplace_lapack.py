"""The binomial GLMM's Laplace fits with LAPACK called directly against scipy.linalg's wrappers, side by side.

Why: PIRLS factorises and solves a small matrix (the seeds' Schur complement) tens of thousands of times per
analysis, and scipy >= 1.15 wraps ``cholesky`` and ``cho_solve`` in argument checks and a batching decorator that
cost more than the LAPACK call itself at that size. ``freezestats.stats.models.laplace_problem`` calls ``potrf`` /
``potrs`` directly. This bench records every ``fit_binomial_laplace`` call of one ``analyze`` of the blog
example (the joint draws' pair fits and the failure models), then refits all of them with the direct calls and
with scipy's (monkeypatched back in), alternating, best of ``--repeats``; it checks that both give the same bits
and prints the seconds and the ratio with the CPU and BLAS threads named.

    python bench/laplace_lapack.py
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import linalg

from freezestats.analysis.pipeline import analyze
from freezestats.results.item_predictions import read_item_predictions
from freezestats.stats.models import laplace, laplace_problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flops  # the CPU's name, as every bench gives it

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "blog2020-minilm"


def recorded_calls() -> list[tuple[tuple, dict]]:
    """The arguments of every Laplace fit that ``analyze`` makes on the blog example's SST-2 runs."""
    calls: list[tuple[tuple, dict]] = []
    original = laplace.fit_binomial_laplace

    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    runs = pd.read_csv(EXAMPLE / "results.csv")
    items = read_item_predictions(EXAMPLE / "predictions.parquet")
    modules = [m for m in _callers() if getattr(m, "fit_binomial_laplace", None) is original]
    for module in modules:
        module.fit_binomial_laplace = recording
    try:
        analyze(runs, items=items, tasks=["sst2"], n_boot=0)
    finally:
        for module in modules:
            module.fit_binomial_laplace = original
    return calls


def _callers() -> list:
    """The modules that import ``fit_binomial_laplace`` by name (the failure part's pair fits; the GLMM)."""
    from freezestats.stats.failures import pooled_rates
    from freezestats.stats.models import glmm

    return [pooled_rates, glmm]


def _scipy_cholesky(a: np.ndarray) -> np.ndarray:
    return linalg.cholesky(a, lower=True)


def _scipy_cho_solve(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return linalg.cho_solve((factor, True), rhs)


def refit(calls: list[tuple[tuple, dict]], use_scipy: bool) -> tuple[float, list]:
    """Seconds to refit every recorded call, and the fits, with the direct LAPACK calls or scipy's wrappers."""
    saved = laplace_problem._cholesky_lower, laplace_problem._cho_solve_lower
    if use_scipy:
        laplace_problem._cholesky_lower, laplace_problem._cho_solve_lower = _scipy_cholesky, _scipy_cho_solve
    try:
        started = time.perf_counter()
        fits = [laplace.fit_binomial_laplace(*args, **kwargs) for args, kwargs in calls]
        return time.perf_counter() - started, fits
    finally:
        laplace_problem._cholesky_lower, laplace_problem._cho_solve_lower = saved


def same(a: list, b: list) -> bool:
    return all(
        np.array_equal(x.beta, y.beta) and np.array_equal(x.sd, y.sd) and np.array_equal(x.cov_beta, y.cov_beta)
        for x, y in zip(a, b, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    calls = recorded_calls()
    direct, wrapped = [], []
    for _ in range(args.repeats):  # alternating, so that a busy machine slows both alike
        seconds, fits_direct = refit(calls, use_scipy=False)
        direct.append(seconds)
        seconds, fits_scipy = refit(calls, use_scipy=True)
        wrapped.append(seconds)
    print(f"{flops.cpu_name()}, python {platform.python_version()}, BLAS single-threaded (as the fits set it)")
    print(f"{len(calls)} Laplace fits of one analyze of the blog example (SST-2), best of {args.repeats}:")
    print(f"  scipy.linalg cholesky/cho_solve  {min(wrapped):7.2f} s")
    print(f"  LAPACK potrf/potrs directly      {min(direct):7.2f} s")
    print(f"  ratio (scipy / direct)           {min(wrapped) / min(direct):7.2f}")
    print(f"  the same fits, bit for bit: {same(fits_direct, fits_scipy)}")


if __name__ == "__main__":
    main()

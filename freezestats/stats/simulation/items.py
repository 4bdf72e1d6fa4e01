r"""Simulated studies with item-level predictions, to check the item-uncertainty intervals against a known truth.

Each run answers each validation item right or wrong, by a probit threshold model with the structure of real
fine-tuning runs: items differ in difficulty (most are always right or always wrong), each frozen level finds
some items easier or harder than the reference does, a seed moves every item of a run together, and a little
run-by-item noise remains:

.. math:: c_{r i} = 1\{\theta_{k n} + b_i + g_{i k} + s_{\mathrm{seed}, n} + \varepsilon_{r i} > 0\},
   \quad b_i \sim N(0, 1),\ g_{i k} \sim N(0, \tau_g^2),\ s \sim N(0, \sigma_{s,n}^2),\
   \varepsilon \sim N(0, \sigma_\varepsilon^2).

Two truths follow in closed form. Over new items and seeds (the task), the accuracy of level :math:`k` at size
:math:`n` is :math:`\mu_{kn} = \Phi(\theta_{kn} / \sqrt{1 + \tau_g^2 + \sigma_{s,n}^2 + \sigma_\varepsilon^2})`,
and ``theta`` is set from the requested accuracies so. On the drawn items (what the seed-only interval is
about), it is the item average of :math:`\Phi((\theta_{kn} + b_i + g_{ik}) / \sqrt{\sigma_{s,n}^2 +
\sigma_\varepsilon^2})`. ``sigma_s`` is set so that the run-to-run SD of a cell's accuracy on the score half
matches ``run_sd`` at each size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["ItemStudy", "simulate_item_study"]


@dataclass(frozen=True)
class ItemStudy:
    """A simulated study: the results table, its item table, and the two truths of every contrast."""

    results: pd.DataFrame
    items: pd.DataFrame
    #: (train_size, frozen_layers) -> contrast against frozen 0 over the item population (the task).
    truth_task: dict[tuple[int, int], float]
    #: (train_size, frozen_layers) -> contrast against frozen 0 on the drawn items.
    truth_items: dict[tuple[int, int], float]


def simulate_item_study(
    accuracy: Mapping[int, Mapping[int, float]],
    run_sd: Mapping[int, float],
    *,
    seeds: int = 8,
    n_items: int = 872,
    item_sd: float = 0.05,
    noise_sd: float = 0.02,
    rng: int | np.random.Generator | None = None,
) -> ItemStudy:
    """Simulate one study; ``accuracy[n][k]`` is level ``k``'s task accuracy at size ``n`` (``k = 0`` is the
    reference), ``run_sd[n]`` the run SD of a cell at size ``n`` on the score half (half of ``n_items``)."""
    gen = np.random.default_rng(rng)
    half = np.where(gen.permutation(n_items) < n_items // 2, "select", "score")
    score = half == "score"
    difficulty = gen.standard_normal(n_items)
    labels = gen.integers(0, 2, n_items)  # one validation set: every run answers the same items
    levels = sorted({k for row in accuracy.values() for k in row})
    shift = {k: item_sd * gen.standard_normal(n_items) for k in levels}
    runs, frames, truth_task, truth_items = [], [], {}, {}
    trial = 0
    for size, row in accuracy.items():
        # theta depends on sigma_s through the total scale, and sigma_s on theta: two fixed-point rounds suffice
        sigma_s = 0.0
        for _ in range(3):
            total = np.sqrt(1 + item_sd**2 + sigma_s**2 + noise_sd**2)
            theta = {k: stats.norm.ppf(row[k]) * total for k in row}
            sigma_s = _seed_sd(run_sd[size], theta[0], (difficulty + shift[0])[score], noise_sd)
        total = np.sqrt(1 + item_sd**2 + sigma_s**2 + noise_sd**2)
        theta = {k: stats.norm.ppf(row[k]) * total for k in row}
        cond = np.sqrt(sigma_s**2 + noise_sd**2)
        on_items = {k: stats.norm.cdf((theta[k] + difficulty + shift[k]) / cond)[score].mean() for k in row}
        for k in row:
            truth_task[(size, k)] = row[k] - row[0]
            truth_items[(size, k)] = on_items[k] - on_items[0]
        seed_shift = sigma_s * gen.standard_normal(seeds)
        for k in row:
            for seed in range(seeds):
                eta = theta[k] + difficulty + shift[k] + seed_shift[seed] + noise_sd * gen.standard_normal(n_items)
                correct = eta > 0
                predictions = np.where(correct, labels, 1 - labels)
                runs.append(_run_row(trial, size, k, seed + 1, correct, score))
                frames.append(_item_frame(trial, size, k, seed + 1, labels, predictions, half))
                trial += 1
    return ItemStudy(pd.DataFrame(runs), pd.concat(frames, ignore_index=True), truth_task, truth_items)


def _seed_sd(run_sd: float, theta: float, location: np.ndarray, noise_sd: float) -> float:
    """The seed SD on the latent scale that gives the reference cell the run SD ``run_sd`` on these items.

    A run's accuracy on items with latent locations ``theta + location`` varies in two ways: the seed shift moves
    every item together, and the run-by-item noise flips items near their threshold. Its variance is
    ``Var_s(mean_i p_i(s)) + E_s(mean_i p_i(s)(1 - p_i(s))) / I``, computed by Gauss-Hermite quadrature over the
    shift and solved for its SD by bisection (the variance grows with it).
    """
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()

    def sd_of(sigma_s: float) -> float:
        p = stats.norm.cdf((theta + location[None, :] + sigma_s * nodes[:, None]) / noise_sd)
        means = p.mean(axis=1)
        between = float(weights @ (means - weights @ means) ** 2)
        within = float(weights @ (p * (1 - p)).mean(axis=1)) / location.size
        return float(np.sqrt(between + within))

    low, high = 0.0, 4.0
    if sd_of(low) >= run_sd:  # the run-by-item noise alone already gives that spread
        return 0.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if sd_of(mid) < run_sd else (low, mid)
    return 0.5 * (low + high)


def _run_row(trial: int, size: int, level: int, seed: int, correct: np.ndarray, score: np.ndarray) -> dict:
    """One row of the results table, with the columns the models and the item statistics read."""
    heldout = float(correct[score].mean())
    return {
        "trial": trial, "state": "complete", "role": "grid", "task": "sst2", "model": "simulated",
        "metric": "accuracy", "frozen_layers": level, "train_size": size, "subset_draw": 0, "seed": seed,
        "order_seed": seed, "heldout": heldout, "best_dev": float(correct.mean()), "final_dev": float(correct.mean()),
        "failed": False, "majority_baseline": 0.5, "n_eval": len(correct), "n_correct": int(correct.sum()),
        "n_correct_best": int(correct.sum()), "n_correct_heldout": int(correct[score].sum()),
        "n_eval_heldout": int(score.sum()),
    }  # fmt: skip


def _item_frame(
    trial: int, size: int, level: int, seed: int, labels: np.ndarray, predictions: np.ndarray, half: np.ndarray
) -> pd.DataFrame:
    """The run's item rows (every checkpoint predicts the same here)."""
    return pd.DataFrame(
        {
            "trial": trial, "task": "sst2", "frozen_layers": level, "train_size": size, "subset_draw": 0,
            "seed": seed, "order_seed": seed, "idx": np.arange(len(labels)), "label": labels, "half": half,
            "prediction_best": predictions, "prediction_heldout": predictions, "prediction_final": predictions,
        }
    )  # fmt: skip

r"""How many seeds the task-level answer needs: power by simulation of each depth's own contrast, SDs uncertain.

The mixed model's power table (:mod:`freezestats.stats.inference.power`) draws from the model's per-size
residual variance taken as known. The task-level answer tests something else: each depth's paired contrast
with the reference, whose variance is that depth's own per-seed spread plus the evaluation items' part, plus
the failure part where runs fail (:func:`~freezestats.stats.items.task_level.task_level_contrasts`). So the
seeds it needs are simulated from those pieces, contrast by contrast:

* the per-seed SD :math:`\sigma_d` is not known, only its estimate :math:`s_d` on :math:`S - 1` df: each
  simulated study first draws :math:`\sigma_d^2 = s_d^2 (S-1)/\chi^2_{S-1}` (the scaled-inverse-\chi^2
  posterior under the reference prior), so the power is averaged over what the study says about the SD
  ("assurance", O'Hagan, Stevens & Campbell 2005); with 5 seeds that widens the answer a lot, as it should;
* it then draws :math:`S'` per-seed differences with no true cost, :math:`N(0, \sigma_d^2)`, and forms the
  test's bound: their mean minus :math:`t_{1-\alpha}` times :math:`\sqrt{s'^2/S' + v_{item} + v_{fail}\,S/S'}`
  with Welch–Satterthwaite df. The items' part :math:`v_{item}` does not shrink with more seeds (the items
  are the same 436 whatever the seeds), which is why more seeds cannot buy a task-level answer past a point;
  the failure part shrinks like one over the runs;
* :math:`\alpha` is the level the task's graphical procedure first gives the test
  (:func:`~freezestats.stats.inference.graphical.depth_sequence_graph`): a lower bound on its final level, so
  the seeds needed err on the safe side.

The power is the share of simulated studies whose bound clears ``-margin``. A depth with a true cost, or a
failure rate the study did not see, needs more; "not reached within ``max_seeds``" is reported as such.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.graphical import depth_sequence_graph
from freezestats.stats.inference.sequence import depth_rank, order_by_depth

__all__ = ["TASK_POWER_COLUMNS", "seeds_needed", "task_power"]

TASK_POWER_COLUMNS = ["train_size", "frozen_layers", "n_seeds", "power", "mc_se", "alpha", "margin", "population"]


def task_power(
    contrasts: pd.DataFrame,
    *,
    margin: float,
    alpha: float = 0.05,
    n_seeds: tuple[int, ...] = (3, 5, 8, 10, 15, 20, 30, 40),
    n_sim: int = 2000,
    rng: int = 0,
) -> pd.DataFrame:
    """Power to show each depth non-inferior for the task, had it no true cost, per number of seeds.

    ``contrasts`` is :func:`~freezestats.stats.items.task_level.task_level_contrasts` of one task (``se_seed,
    df_seed, se_item, df_item, se_lower`` per (train size, depth)); ``margin`` and ``alpha`` as in
    :func:`~freezestats.stats.inference.task_family.task_noninferiority`. Returns :data:`TASK_POWER_COLUMNS`, one
    row per contrast and number of seeds; ``mc_se`` is the Monte Carlo SE of ``power`` and ``alpha`` the test's
    first level under the graph.
    """
    if not margin > 0 or not 0 < alpha < 0.5:
        raise ModelFitError(f"task_power: need margin > 0 and 0 < alpha < 0.5, got {margin!r}, {alpha!r}.")
    needed = ["train_size", "frozen_layers", "se_seed", "df_seed", "se_item", "se", "population"]
    if missing := [c for c in needed if c not in contrasts]:
        raise ModelFitError(f"task_power: `contrasts` lacks {missing} (task_level_contrasts' columns).")
    if min(n_seeds) < 2:
        raise ModelFitError(f"task_power: every number of seeds must be >= 2, got {min(n_seeds)}.")
    table = order_by_depth(contrasts)
    weights, _ = depth_sequence_graph(table["train_size"].to_numpy(), depth_rank(table["frozen_layers"].to_numpy()))
    gen = np.random.default_rng(rng)
    rows = []
    for row, weight in zip(table.to_dict("records"), weights, strict=True):
        level = float(alpha * weight)
        fail_var = max(float(row.get("se_lower", row["se"])) ** 2 - row["se_seed"] ** 2 - row["se_item"] ** 2, 0.0)
        for seeds in n_seeds:
            shown = _simulate(row, fail_var, seeds, level, margin, n_sim, gen)
            power = float(shown.mean())
            rows.append({"train_size": int(row["train_size"]), "frozen_layers": int(row["frozen_layers"]),
                         "n_seeds": int(seeds), "power": power, "mc_se": float(np.sqrt(power * (1 - power) / n_sim)),
                         "alpha": level, "margin": float(margin), "population": row["population"]})  # fmt: skip
    return pd.DataFrame(rows, columns=TASK_POWER_COLUMNS)


def seeds_needed(power: pd.DataFrame, target: float = 0.8) -> pd.DataFrame:
    """Per (train size, depth) of :func:`task_power`'s table, the fewest seeds whose power reaches ``target``
    (``seeds``; NaN with ``reached`` False when none of the numbers tried does)."""
    rows = []
    for (size, depth), part in power.groupby(["train_size", "frozen_layers"], sort=True):
        enough = part.loc[part["power"] >= target, "n_seeds"]
        rows.append({"train_size": int(size), "frozen_layers": int(depth),
                     "seeds": float(enough.min()) if len(enough) else float("nan"), "reached": bool(len(enough)),
                     "most_tried": int(part["n_seeds"].max()), "target": float(target)})  # fmt: skip
    return pd.DataFrame(rows)


def _simulate(
    row: dict, fail_var: float, seeds: int, level: float, margin: float, n_sim: int, gen: np.random.Generator
) -> np.ndarray:
    """Whether each of ``n_sim`` simulated studies of ``seeds`` seeds shows the contrast non-inferior."""
    units = max(round(float(row["df_seed"])) + 1, 2)
    s_d = float(row["se_seed"]) * np.sqrt(units)
    sigma2 = s_d**2 * (units - 1) / gen.chisquare(units - 1, n_sim)  # the SD's uncertainty (module docstring)
    diffs = gen.standard_normal((n_sim, seeds)) * np.sqrt(sigma2)[:, None]
    v_seed = diffs.var(axis=1, ddof=1) / seeds
    v_item = float(row["se_item"]) ** 2
    df_item = float(row.get("df_item", np.inf))
    v_fail = fail_var * units / seeds
    var = v_seed + v_item + v_fail
    parts = v_seed**2 / (seeds - 1) + (v_item**2 / df_item if np.isfinite(df_item) and df_item > 0 else 0.0)
    df = np.where(parts > 0, var**2 / np.where(parts > 0, parts, 1.0), np.inf)
    lower = diffs.mean(axis=1) - stats.t.ppf(1 - level, df) * np.sqrt(var)
    return lower > -margin

"""Write tests/data/task_level_fixture.csv: S x I tables of paired per-item differences D_si, in long format
(``case, seed, item, d``), for the lme4 cross-check of ``crossed_contrast`` (tests/data/task_level_reference.R).

Three cases, each one contrast (one depth against the reference at one train size):

* ``accuracy``: 5 seeds x 436 items (SST-2's score half), D_si = correct_k - correct_0 in {-1, 0, 1}. Each item
  has a difficulty and a depth-specific shift (the items the frozen model gets wrong are not the reference's),
  and each run's seed moves its accuracy, more for the frozen depth's runs: seed and item components are both
  clearly above 0.
* ``pseudo_values``: 8 seeds x 200 items of continuous jackknife-pseudo-value-like differences (an F1- or
  Pearson-like metric): a small cost, seed and item effects, heavy-tailed (t with 5 df) residuals.
* ``seed_boundary``: 5 seeds x 100 items whose per-seed means agree better than the residual spread predicts
  (each row's deviation from the grand mean is shrunk to a fifth), so MS_seed < MS_res and REML puts the seed
  variance at 0, while the item variance stays inside its range.

Values are rounded to 4 decimals, so the committed file holds exactly what is analysed.

    python tests/data/make_task_level_fixture.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

RNG = 28  # issue 28: the task-level answer


def _accuracy(gen: np.random.Generator, seeds: int = 5, items: int = 436) -> np.ndarray:
    """Correctness of a depth's runs minus the reference's, on the same items and seeds (logit model)."""
    difficulty = gen.normal(2.0, 1.5, items)  # the reference gets ~ 80% right
    shift = gen.normal(-0.3, 1.0, items)  # item by depth: what the frozen encoder gets wrong is its own
    seed_ref, seed_depth = gen.normal(0, 0.3, seeds), gen.normal(0, 0.6, seeds)
    p_ref = 1 / (1 + np.exp(-(difficulty[None, :] + seed_ref[:, None])))
    p_depth = 1 / (1 + np.exp(-(difficulty[None, :] + shift[None, :] + seed_depth[:, None])))
    return (gen.random(p_depth.shape) < p_depth).astype(float) - (gen.random(p_ref.shape) < p_ref).astype(float)


def _pseudo_values(gen: np.random.Generator, seeds: int = 8, items: int = 200) -> np.ndarray:
    """delta + u_s + w_i + e_si on a pseudo-value scale, with t(5) residuals."""
    u, w = gen.normal(0, 0.06, seeds), gen.normal(0, 0.2, items)
    return -0.02 + u[:, None] + w[None, :] + 0.4 * gen.standard_t(5, (seeds, items))


def _seed_boundary(gen: np.random.Generator, seeds: int = 5, items: int = 100) -> np.ndarray:
    """No seed effect, and per-seed means closer together than chance: the REML seed variance sits at 0."""
    d = -0.01 + gen.normal(0, 0.15, items)[None, :] + gen.normal(0, 0.3, (seeds, items))
    rows = d.mean(axis=1, keepdims=True)
    return d - 0.8 * (rows - rows.mean())


CASES = {"accuracy": _accuracy, "pseudo_values": _pseudo_values, "seed_boundary": _seed_boundary}


def make_fixture(rng: int = RNG) -> pd.DataFrame:
    """One row per (case, seed, item): the paired difference ``d``, rounded to 4 decimals."""
    gen = np.random.default_rng(rng)
    frames = []
    for case, make in CASES.items():
        d = np.round(make(gen), 4)
        seeds, items = np.indices(d.shape)
        frames.append(pd.DataFrame({"case": case, "seed": seeds.ravel() + 1, "item": items.ravel() + 1,
                                    "d": d.ravel()}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def differences(table: pd.DataFrame, case: str) -> np.ndarray:
    """The S x I matrix of one case (rows: seeds, columns: items, both in ascending order)."""
    part = table[table["case"] == case]
    return part.pivot(index="seed", columns="item", values="d").sort_index().sort_index(axis=1).to_numpy()


if __name__ == "__main__":
    make_fixture().to_csv(Path(__file__).with_name("task_level_fixture.csv"), index=False, float_format="%.10g")

r"""Does freezing help when tasks share an encoder, and for which task? One task's runs, alone and in groups.

A task trained in a group (``trained_with`` a group name) and the same task trained alone (``trained_with`` the
task itself) are two arms of one experiment on that task: same subsets, same seeds, same dev set. So each task
gets one mixed model in which the cell is (trained_with, frozen_layers) × train size,

.. math:: y = \text{setting} \times \text{size} + (1 \mid \text{seed}) + (1 \mid \text{seed:size}) + \varepsilon,
          \qquad \varepsilon \sim N(0, \sigma^2_{\text{cell}}),

with a residual variance per cell (training with other tasks can change the spread as much as freezing
does; a per-cell variance floored at one item's resolution is right for every arm, as in
:mod:`freezestats.stats.comparisons.arm_levels`). Models are per task, never pooled across tasks: their metrics differ
(accuracy, F1, Pearson), and a group trial's rows of different tasks share one encoder and one seed, so a
model that used several of them would need a trial random effect. One row per (trial, task) in a per-task
model is one observation per trial.

Three families of contrasts, each Holm-adjusted within (task, size, family):

* ``together_vs_alone``: at each frozen depth, the group's score minus the score trained alone;
* ``frozen_vs_0``: within each group, each frozen depth minus the group's full fine-tuning (frozen 0);
* ``freezing_gain_difference``: how much more freezing helps together than alone,
  :math:`(\mu_{g,k} - \mu_{g,0}) - (\mu_{\text{alone},k} - \mu_{\text{alone},0})` — the source's claim that
  freezing helped STS-B in a group is a statement about this difference of differences.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.comparisons.arm_levels import arm_codes, require_every_cell
from freezestats.stats.design.model_frame import standard_errors
from freezestats.stats.inference.emm import _design_rows
from freezestats.stats.inference.multitest import adjusted_t_tests
from freezestats.stats.models.mixed import fit_mixed

__all__ = ["SHARED_ENCODER_COLUMNS", "shared_encoder_contrasts", "training_setting"]

SHARED_ENCODER_COLUMNS = [
    "comparison", "trained_with", "frozen_layers", "train_size", "estimate", "se", "df", "ci_low", "ci_high",
    "ci_low_adj", "ci_high_adj", "p_val", "p_adj", "adjust",
]  # fmt: skip
_ALONE = "alone"


def training_setting(runs: pd.DataFrame, task: str) -> np.ndarray:
    """Each run's setting: ``"alone"`` for the task trained by itself, else the group it trained in."""
    return np.where(runs["trained_with"] == task, _ALONE, runs["trained_with"].astype(str))


def shared_encoder_contrasts(
    runs: pd.DataFrame,
    response: str,
    *,
    task: str,
    variance: str = "per_cell",
    adjust: str = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """The three contrast families of one task (module docstring), from one mixed model of its runs.

    ``runs`` holds the task's grid runs with ``trained_with``; every (setting, frozen depth, size) cell that
    appears needs a run, and the task must have been trained alone at frozen 0 (the reference). Returns
    :data:`SHARED_ENCODER_COLUMNS`.
    """
    frame = runs[runs["task"] == task]
    if "trained_with" not in frame.columns or not (frame["trained_with"] != task).any():
        raise ModelFitError(f"shared_encoder_contrasts: task '{task}' has no runs trained in a group (trained_with).")
    setting = training_setting(frame, task)
    labelled = frame.assign(arm=setting, arm_level=frame["frozen_layers"].astype("int64"))
    codes = arm_codes(labelled, (_ALONE, 0))
    coded = labelled.merge(codes, on=["arm", "arm_level"])
    require_every_cell(
        coded, f"shared_encoder_contrasts (task {task!r})", cell="{arm}, frozen {level}", variance=variance
    )
    fit = fit_mixed(coded.assign(frozen_layers=coded["code"]), response, variance=variance)
    code_of = {(a, int(k)): int(c) for a, k, c in codes[["arm", "arm_level", "code"]].itertuples(index=False)}
    sizes = sorted(int(n) for n in coded["train_size"].unique())
    groups = sorted(set(codes["arm"]) - {_ALONE})
    rows, labels = [], []
    for n in sizes:
        for g in groups:
            for k in sorted(int(k) for a, k in code_of if a == g):
                cells = {(a, kk): code_of.get((a, kk)) for a in (g, _ALONE) for kk in (k, 0)}
                if cells[(_ALONE, k)] is not None:
                    rows.append(_row(fit, {cells[(g, k)]: 1, cells[(_ALONE, k)]: -1}, n))
                    labels.append(("together_vs_alone", g, k, n))
                if k != 0 and cells[(g, 0)] is not None:
                    rows.append(_row(fit, {cells[(g, k)]: 1, cells[(g, 0)]: -1}, n))
                    labels.append(("frozen_vs_0", g, k, n))
                    if cells[(_ALONE, k)] is not None:
                        weights = {cells[(g, k)]: 1, cells[(g, 0)]: -1, cells[(_ALONE, k)]: -1, 0: 1}
                        rows.append(_row(fit, weights, n))
                        labels.append(("freezing_gain_difference", g, k, n))
    if not rows:
        raise ModelFitError(f"shared_encoder_contrasts: task '{task}' has no cell a group and training alone share.")
    out = pd.DataFrame(labels, columns=["comparison", "trained_with", "frozen_layers", "train_size"])
    return _tests(out, fit, np.vstack(rows), adjust, confidence)


def _row(fit: object, weights: dict[int, int], size: int) -> np.ndarray:
    """The contrast row sum_i w_i x(cell_i, size) of the fit's design."""
    codes = np.array(list(weights))
    design = _design_rows(fit, codes, np.full(len(codes), size))  # type: ignore[arg-type]
    return np.asarray(list(weights.values()), dtype=float) @ design


def _tests(out: pd.DataFrame, fit: object, rows: np.ndarray, adjust: str, confidence: float) -> pd.DataFrame:
    estimate = rows @ fit.params  # type: ignore[attr-defined]
    se = standard_errors(np.einsum("ij,jk,ik->i", rows, fit.cov_params, rows))  # type: ignore[attr-defined]
    df = np.asarray(fit.contrast_df(rows), dtype=float)  # type: ignore[attr-defined]
    families = (out["comparison"].astype(str) + "|" + out["train_size"].astype(str)).to_numpy()
    out = out.assign(
        estimate=estimate, se=se, df=df, **adjusted_t_tests(estimate, se, df, families, adjust, confidence)
    )
    out["adjust"] = adjust
    return out[SHARED_ENCODER_COLUMNS]

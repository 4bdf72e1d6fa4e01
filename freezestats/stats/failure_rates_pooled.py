r"""P(fail) per cell for the two-part contrasts, borrowing strength across frozen levels and cells.

Why not one logistic coefficient per level (the Firth model this replaces in :mod:`two_part`)
---------------------------------------------------------------------------------------------
With 5 seeds a cell, a level that never failed in its 25 runs still gets a Firth estimate near 2% with a logit
SE near 1.5, and the delta method turns that into a failure share of the contrast's variance that dwarfs the
healthy spread at large train sizes (0.4 points of score between a failed and a healthy run, times an SE of P
of ~0.03). On simulated blog-shaped studies without random failures (``bench/coverage.py``, scenario a) that
made every large-n interval cover 99.8%. Levels are not unrelated, though: a run's chance to collapse is mostly
a property of the training set size and of a few structural cells (everything frozen), so the rate of one level
is best estimated with the others' help.

The model
---------
Cells in which *every* run failed are structural (a fully frozen encoder, or a size too small for any depth):
their P(fail) is taken as 1, with no variance, and they do not enter the fit. With 5 seeds a cell whose true rate
is 50% still looks like that 3% of the time; the report's failure section shows the rates with intervals. The
other runs' failures follow a binomial GLMM

.. math:: \operatorname{logit} P(\text{fail}) = \beta_0 + \beta_1 \log_2 n + u_\text{level} + u_\text{level:size},

fitted by glmer's joint Laplace (:func:`freezestats.stats.laplace.fit_binomial_laplace`; in R
``glmer(failed ~ log2(n) + (1 | level) + (1 | level:size), binomial)``). The two random intercepts let a level or
a cell fail more often when the data say so, and pool them when they do not. A cell's P is
``expit(x'beta + u_level + u_cell)`` at the conditional modes; its uncertainty for the delta method comes from
Henderson's mixed-model equations at the optimum, ``C = [[X'WX, X'WZ], [Z'WX, Z'WZ + G^{-1}]]^{-1}``: the error
covariance of ``(beta_hat, u_hat - u)`` given the SDs (their own uncertainty is left out, as in lme4's
prediction intervals). Components estimated at zero are left out of ``Z``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special

from freezestats.exceptions import ModelFitError
from freezestats.stats.laplace import RandomTerm, fit_binomial_laplace

__all__ = ["Cell", "pooled_failure_probabilities"]

Cell = tuple[int, int]  # (frozen_layers, train_size)
_ZERO_SD = 1e-4  # lme4's isSingular tolerance, as laplace.py reports boundary SDs


def pooled_failure_probabilities(
    runs: pd.DataFrame, failed: np.ndarray
) -> tuple[dict[Cell, float], dict[Cell, tuple[np.ndarray, np.ndarray] | None]]:
    """P(fail) per (level, size), and per cell ``(dp/dtheta, Cov(theta))`` for the delta method over the joint
    vector of fixed effects and random effects (``None`` where P is 0 or 1 by the rules above: no variance).

    Raises :class:`ModelFitError` when the GLMM cannot be fitted (the caller may fall back to another model).
    """
    levels = runs["frozen_layers"].to_numpy()
    sizes = runs["train_size"].to_numpy()
    keys = list(zip(levels.tolist(), sizes.tolist(), strict=True))
    frame = pd.DataFrame({"cell": keys, "failed": failed})
    all_failed = frame.groupby("cell")["failed"].all()
    p_fail: dict[Cell, float] = {cell: (1.0 if every else 0.0) for cell, every in all_failed.items()}
    grad: dict[Cell, tuple[np.ndarray, np.ndarray] | None] = {cell: None for cell in p_fail}
    rest = ~frame["cell"].map(all_failed).to_numpy(dtype=bool)
    if not failed[rest].any():  # no failure outside structural cells: P is 0 there, exactly
        return p_fail, grad
    fit_keys = [key for key, keep in zip(keys, rest, strict=True) if keep]
    log_size = np.log2(sizes[rest].astype(float))
    x = np.ones((len(fit_keys), 1))
    if np.ptp(log_size) > 0:
        x = np.column_stack([x, log_size - log_size.mean()])
    level_codes, level_names = pd.factorize(levels[rest])
    cell_codes, cell_names = pd.factorize(pd.Series(fit_keys))
    terms = [
        RandomTerm("level:size", cell_codes, np.zeros(len(cell_names), dtype=int), ("level:size",)),
        RandomTerm("level", level_codes, np.zeros(len(level_names), dtype=int), ("level",)),
    ]
    y = failed[rest].astype(int)
    try:
        fit = fit_binomial_laplace(y, np.ones_like(y), x, terms)
    except np.linalg.LinAlgError as err:
        raise ModelFitError(f"the pooled failure model could not be fitted ({err})") from None
    sd_cell, sd_level = (float(fit.sd[0]), float(fit.sd[1]))
    u_cell, u_level = fit.modes[: len(cell_names)], fit.modes[len(cell_names) :]
    # Z and G^-1 of the components that are not at zero; a zero SD fixes its effects at 0 with no error
    z_blocks, g_inv, offsets = [], [], {}
    for name, codes, n_levels, sd in (
        ("cell", cell_codes, len(cell_names), sd_cell),
        ("level", level_codes, len(level_names), sd_level),
    ):
        if sd > _ZERO_SD:
            offsets[name] = x.shape[1] + sum(block.shape[1] for block in z_blocks)
            z_blocks.append(np.eye(n_levels)[codes])
            g_inv.extend([1.0 / sd**2] * n_levels)
    eta = x @ fit.beta + u_cell[cell_codes] + u_level[level_codes]
    weights = special.expit(eta) * (1 - special.expit(eta))
    design = np.column_stack([x, *z_blocks])
    penalty = np.diag(np.concatenate([np.zeros(x.shape[1]), g_inv]))
    information = design.T @ (weights[:, None] * design) + penalty
    try:
        cov = np.linalg.inv(information)
    except np.linalg.LinAlgError as err:
        raise ModelFitError(f"the pooled failure model's mixed-model equations are singular ({err})") from None
    for position in np.flatnonzero(~pd.Series(fit_keys).duplicated().to_numpy()):
        cell = fit_keys[position]
        a = np.zeros(design.shape[1])
        a[: x.shape[1]] = x[position]
        if "cell" in offsets:
            a[offsets["cell"] + cell_codes[position]] = 1.0
        if "level" in offsets:
            a[offsets["level"] + level_codes[position]] = 1.0
        p = float(special.expit(eta[position]))
        p_fail[cell] = p
        grad[cell] = (p * (1 - p) * a, cov)
    return p_fail, grad

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
Every run enters a binomial GLMM with three crossed random intercepts,

.. math:: \operatorname{logit} P(\text{fail}) = \beta_0 + u_\text{level} + u_\text{size} + u_\text{level:size},

fitted by glmer's joint Laplace (:func:`freezestats.stats.models.laplace.fit_binomial_laplace`; in R
``glmer(failed ~ 1 + (1 | level) + (1 | size) + (1 | level:size), binomial)``, checked against lme4 by
``tests/test_stats_failure_pooled.py``). A level or a size that fails more often gets its own effect when the
data show it, a cell with its interaction, and all of them are pulled towards the others as far as the data
allow. Size is a random intercept, not a slope in log2(size): the flagged failure rate is not log-linear in size
(near-majority runs of deep cells count as failed at small sizes only), and a slope fitted to it extrapolated
the reference cell's rate at n = 1000 to half its true value in scenario b of ``bench/coverage.py``, which took
coverage of frozen 12 vs 0 there to 0.76. Cells where every run failed stay in the fit (leaving them out biased
the same way); their P comes out high but below 1.

Two levels
----------
The task-level contrast fits this model to one depth's and the reference's runs only
(:mod:`freezestats.stats.items.task_two_part`), so ``level`` has two levels, and two values cannot estimate an
SD: it often comes out near zero, and the depth's rate is then pulled to the reference's. That pooling biases
exactly the difference the contrast needs. On the realistic simulator at 100 examples (5 seeds, 40 null
studies) the deep depths' contrasts came out 0.4-1.1 points too favourable
(``bench/results/task_level_bias_estimated_sd.txt``; with the SD given: ``task_level_bias.txt``). The pair's
fit therefore gives the level SD instead of estimating it: 2.5 on the logit, a weakly informative normal prior
on each level's effect (the scale Gelman et al. 2008 propose for logistic coefficients), which lets the data
set the depth's difference from the reference and still keeps a depth that never failed (separation) at a
finite rate. Sizes and cells keep estimated SDs. ``tests/data/failure_glmm_pair_reference.R`` checks this fit
against glmmTMB with the SD mapped.

A cell's P is ``expit(beta_0 + u_level + u_size + u_cell)`` at the conditional modes; the uncertainty of that
linear predictor comes from Henderson's mixed-model equations at the optimum,
``C = [[X'WX, X'WZ], [Z'WX, Z'WZ + G^{-1}]]^{-1}``: the error covariance of ``(beta_hat, u_hat - u)`` given the
SDs (their own uncertainty is left out, as in lme4's prediction intervals). Components estimated at zero are
left out of ``Z``. With no failed run P is 0 everywhere, with only failed runs 1, both without variance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.rate_posterior import MIN_ESS, RatePosterior, sample_rate_posterior
from freezestats.stats.failures.sd_integration import RateMixture, integrate_over_sd
from freezestats.stats.models.laplace import fit_binomial_laplace
from freezestats.stats.models.laplace_layout import RandomTerm

__all__ = ["Cell", "pooled_failure_fit", "pooled_failure_probabilities"]

Cell = tuple[int, int]  # (frozen_layers, train_size)
_ZERO_SD = 1e-4  # lme4's isSingular tolerance, as laplace.py reports boundary SDs


def pooled_failure_probabilities(
    runs: pd.DataFrame, failed: np.ndarray, level_sd: float | None = None
) -> tuple[dict[Cell, float], dict[Cell, tuple[np.ndarray, np.ndarray] | None]]:
    """P(fail) per (level, size), and per cell ``(row, Cov(theta))``: the cell's linear predictor is ``row @ theta``
    over the joint vector of fixed effects and random effects, with ``Cov(theta)`` its error covariance
    (``None`` where P is 0 or 1 by the rule above: no variance).

    ``level_sd``: the levels' SD, given instead of estimated (see "Two levels" in the module docstring); None
    estimates it.

    Raises :class:`ModelFitError` when the GLMM cannot be fitted (the caller may fall back to another model).
    """
    p_fail, rows, _ = pooled_failure_fit(runs, failed, level_sd, posterior=None)
    return p_fail, rows


def pooled_failure_fit(
    runs: pd.DataFrame,
    failed: np.ndarray,
    level_sd: float | None = None,
    *,
    posterior: str | None = "integrated",
) -> tuple[dict[Cell, float], dict[Cell, tuple[np.ndarray, np.ndarray] | None], RatePosterior | RateMixture | None]:
    """:func:`pooled_failure_probabilities`, plus the coefficients' posterior draws, which the task-level
    contrast's failure part reads its interval from: ``posterior="fitted"`` given the fitted SDs
    (:mod:`~freezestats.stats.failures.rate_posterior`), ``"integrated"`` averaged over the level x size SD
    (:mod:`~freezestats.stats.failures.sd_integration`), ``None`` none. The draws are None where every P is 0 or 1
    by rule, or where they are too few to trust (:data:`~freezestats.stats.failures.rate_posterior.MIN_ESS`)."""
    if posterior not in (None, "fitted", "integrated"):
        raise ModelFitError(f"`posterior` must be None, 'fitted' or 'integrated', but got {posterior!r}.")
    levels = runs["frozen_layers"].to_numpy()
    sizes = runs["train_size"].to_numpy()
    keys = list(zip(levels.tolist(), sizes.tolist(), strict=True))
    failed = np.asarray(failed, dtype=bool)
    if not failed.any() or failed.all():  # nothing to estimate: P is 0 (or 1) everywhere, exactly
        value = 1.0 if failed.any() else 0.0
        return {key: value for key in keys}, {key: None for key in keys}, None
    components = {  # name -> (codes, number of levels)
        name: (codes, len(uniques))
        for name, (codes, uniques) in {
            "level:size": pd.factorize(pd.Series(keys)),
            "level": pd.factorize(levels),
            "size": pd.factorize(sizes),
        }.items()
    }
    terms = [
        RandomTerm(name, codes, np.zeros(n_levels, dtype=int), (name,))
        for name, (codes, n_levels) in components.items()
        if n_levels > 1 or name == "level:size"
    ]
    given = {"level": level_sd} if level_sd is not None and any(t.name == "level" for t in terms) else {}
    y = failed.astype(int)
    fit = _conditional(y, terms, components, given)
    # a cell's linear predictor is its design row times (beta, u): every run of the cell has the same row
    first = np.flatnonzero(~pd.Series(keys).duplicated().to_numpy())
    p_fail = {keys[i]: float(fit.p[i]) for i in first}
    rows: dict[Cell, tuple[np.ndarray, np.ndarray] | None] = {keys[i]: (fit.design[i], fit.cov) for i in first}
    if posterior is None:
        return p_fail, rows, None
    frame = pd.DataFrame({"cell": keys, "failed": y}).groupby("cell", sort=False)["failed"].agg(["sum", "size"])
    counts = {cell: (int(n), int(m)) for cell, (n, m) in frame.iterrows()}

    def draws(at: _Conditional, n_draws: int) -> RatePosterior:
        cells = {keys[i]: at.design[i] for i in first}
        return sample_rate_posterior(cells, counts, at.theta, at.cov, at.prior_precision, n_draws=n_draws)

    def fit_at(sd: float) -> tuple[float, Callable[[int], RatePosterior]] | None:  # an sd_integration.FitAt
        try:
            at = _conditional(y, terms, components, {**given, "level:size": sd})
        except ModelFitError:
            return None
        return at.loglik, lambda n_draws: draws(at, n_draws)

    try:
        if posterior == "integrated":
            return p_fail, rows, integrate_over_sd(fit_at)
        fitted = draws(fit, 10_000)
    except np.linalg.LinAlgError:  # a covariance no proposal can be built on: the caller's fallback
        return p_fail, rows, None
    return p_fail, rows, (fitted if fitted.ess >= MIN_ESS else None)


@dataclass(frozen=True)
class _Conditional:
    """The pair's GLMM at its optimum for given SDs: P per run, the joint design over (beta, u) of the components
    not at zero, the mode, its error covariance (mixed-model equations) and the prior precisions."""

    p: np.ndarray
    design: np.ndarray
    theta: np.ndarray
    cov: np.ndarray
    prior_precision: np.ndarray
    loglik: float


def _information(design: np.ndarray, p: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """The mixed-model equations' matrix at rates ``p``: the binomial information plus the prior precisions."""
    return design.T @ ((p * (1 - p))[:, None] * design) + np.diag(precision)


def _conditional(y: np.ndarray, terms: list[RandomTerm], components: dict, given: dict[str, float]) -> _Conditional:
    """Fit the pair's GLMM with the ``given`` SDs (the others estimated); raises :class:`ModelFitError`."""
    x = np.ones((len(y), 1))
    try:
        fit = fit_binomial_laplace(y, np.ones_like(y), x, terms, given_sd=given or None)
    except np.linalg.LinAlgError as err:
        raise ModelFitError(f"the pooled failure model could not be fitted ({err})") from None
    # Z and G^-1 of the components that are not at zero; a zero SD fixes its effects at 0 with no error
    z_blocks, g_inv, eta, theta = [], [], x @ fit.beta, [np.asarray(fit.beta, dtype=float)]
    start = 0
    for term, sd in zip(terms, fit.sd, strict=True):
        codes, n_levels = components[term.name]
        eta = eta + fit.modes[start : start + n_levels][codes]
        if sd > _ZERO_SD:
            z_blocks.append(np.eye(n_levels)[codes])
            g_inv.extend([1.0 / float(sd) ** 2] * n_levels)
            theta.append(np.asarray(fit.modes[start : start + n_levels], dtype=float))
        start += n_levels
    p = special.expit(eta)
    design = np.column_stack([x, *z_blocks])
    prior_precision = np.concatenate([np.zeros(x.shape[1]), g_inv])
    try:
        cov = np.linalg.inv(_information(design, p, prior_precision))
    except np.linalg.LinAlgError as err:
        raise ModelFitError(f"the pooled failure model's mixed-model equations are singular ({err})") from None
    return _Conditional(p, design, np.concatenate(theta), cov, prior_precision, float(fit.loglik))

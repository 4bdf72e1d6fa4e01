r"""Estimated marginal means and contrasts against a reference depth, from a fitted model (equivalence tests of
those contrasts: :mod:`.equivalence`).

Every quantity here is a linear combination :math:`l'\beta` of the fixed effects of a :class:`MixedFit` or
:class:`OlsFit` (anything implementing :class:`freezestats.stats.models.FixedEffectsFit`), with standard error
:math:`\sqrt{l' \hat V l}` from the model's covariance of :math:`\hat\beta`, and a t reference distribution whose
degrees of freedom the fit supplies (Satterthwaite for the mixed model, ``G - 1`` for seed-clustered OLS). The
rows :math:`l` are built from the fit's patsy design, so they follow whatever coding the model used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import pandas as pd
import patsy
from scipy import optimize, stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import FixedEffectsFit, standard_errors
from freezestats.stats.inference.multitest import adjusted_t_tests

__all__ = ["contrasts_vs_reference", "estimated_marginal_means"]

_ADJUST = ("holm", "bonferroni", "dunnett", "none")
# Multivariate t / normal probabilities by Genz's randomised quasi-Monte Carlo: fixed seed (repeatable results)
# and 10,000 points per dimension (absolute error about 2e-5; R's mvtnorm default is 25,000 in all, error 1e-3).
_MVT_SEED = 20200101
_MVT_POINTS = 10_000
_BONFERRONI_BELOW = 1e-4


def _check_fit(fit: object, caller: str) -> FixedEffectsFit:
    if not isinstance(fit, FixedEffectsFit):
        raise ModelFitError(
            f"{caller} needs a fit with fixed effects, their full covariance and degrees of freedom (a MixedFit "
            f"from fit_mixed, an OlsFit from fit_ols or a GlmmFit from fit_glmm), but got {type(fit).__name__}."
        )
    return fit


def _design_rows(fit: FixedEffectsFit, frozen: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Rows x of the fixed-effects design for cells (frozen[i], sizes[i]), via the fit's patsy design."""
    grid = pd.DataFrame(
        {
            "frozen_layers": pd.Categorical(frozen, categories=list(fit.frozen_levels)),
            "train_size": pd.Categorical(sizes, categories=list(fit.train_sizes)),
        }
    )
    (rows,) = patsy.build_design_matrices([fit.design_info], grid)
    return np.asarray(rows, dtype=float)


def _cells(fit: FixedEffectsFit) -> pd.DataFrame:
    return pd.DataFrame(
        [(k, n) for n in fit.train_sizes for k in sorted(fit.frozen_levels)],
        columns=["frozen_layers", "train_size"],
    )


def _estimate(fit: FixedEffectsFit, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    estimate = rows @ fit.params
    se = standard_errors(np.einsum("ij,jk,ik->i", rows, fit.cov_params, rows))
    df = np.asarray(fit.contrast_df(rows), dtype=float)
    return estimate, se, df


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ModelFitError(f"`confidence` must be in (0, 1), but got confidence={confidence!r}.")


def estimated_marginal_means(fit: FixedEffectsFit, *, confidence: float = 0.95) -> pd.DataFrame:
    r"""Model-based mean of every (frozen_layers, train_size) cell, with its standard error and interval.

    Parameters
    ----------
    fit
        A :class:`~freezestats.stats.models.MixedFit` or :class:`~freezestats.stats.models.OlsFit`.
    confidence
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``train_size`` then ``frozen_layers``, with columns

        * ``frozen_layers``, ``train_size`` (int)
        * ``emmean``: :math:`x'\hat\beta`, the estimated mean response of the cell
        * ``se``: :math:`\sqrt{x' \hat V x}`
        * ``df``: degrees of freedom of the t reference (``fit.contrast_df``; ``inf`` means normal)
        * ``ci_low``, ``ci_high``: ``emmean ± t(df) quantile × se``

    Raises
    ------
    ModelFitError
        ``fit`` has no fixed-effects covariance (e.g. a GLMM), or ``confidence`` is not in (0, 1).

    Notes
    -----
    :math:`x` is the cell's row of the fixed-effects design, built from the fit's patsy ``design_info``. The model
    has one mean per cell, so the estimated marginal means are its fitted cell means, which equal the raw cell
    means when every seed ran in every cell; their standard errors are not those of the raw means: for the mixed
    model :math:`\operatorname{Var}(\bar y_{kn}) = (\sigma^2_{seed} + \sigma^2)/S` with :math:`S` seeds, which
    the t reference with Satterthwaite degrees of freedom accounts for (few seeds, few df). Checked against
    emmeans (``lmer.df = "satterthwaite"``) in ``tests/data/lme4_reference.R``.

    References
    ----------
    Searle, S. R., Speed, F. M. & Milliken, G. A. (1980). Population marginal means in the linear model: an
    alternative to least squares means. *The American Statistician* 34(4), 216-221.
    Lenth, R. V. emmeans: Estimated Marginal Means, aka Least-Squares Means. R package.
    """
    fit = _check_fit(fit, "estimated_marginal_means")
    _check_confidence(confidence)
    cells = _cells(fit)
    rows = _design_rows(fit, cells["frozen_layers"].to_numpy(), cells["train_size"].to_numpy())
    estimate, se, df = _estimate(fit, rows)
    crit = stats.t.ppf(0.5 + confidence / 2, df)
    return cells.assign(
        emmean=estimate,
        se=se,
        df=df,
        ci_low=estimate - crit * se,
        ci_high=estimate + crit * se,
    )


def _reference_rows(fit: FixedEffectsFit, reference: int, caller: str) -> tuple[pd.DataFrame, np.ndarray]:
    if reference not in fit.frozen_levels:
        raise ModelFitError(
            f"`reference` must be one of the frozen levels of the fit {sorted(fit.frozen_levels)}, but got "
            f"reference={reference!r} ({caller})."
        )
    others = [k for k in sorted(fit.frozen_levels) if k != reference]
    if not others:
        raise ModelFitError(
            f"{caller} compares frozen levels with the reference, but the fit has only frozen_layers={reference}."
        )
    table = pd.DataFrame(
        [(n, k) for n in fit.train_sizes for k in others],
        columns=["train_size", "frozen_layers"],
    )
    rows = _design_rows(fit, table["frozen_layers"].to_numpy(), table["train_size"].to_numpy())
    ref_rows = _design_rows(fit, np.full(len(table), reference), table["train_size"].to_numpy())
    return table.assign(reference=reference), rows - ref_rows


def _max_abs_t_probability(corr: np.ndarray, df: float) -> Callable[[float], float]:
    """c -> P(max_j |T_j| < c) for T multivariate t (df) or normal (df = inf) with correlation ``corr``."""
    m = corr.shape[0]
    maxpts = _MVT_POINTS * m
    if np.isfinite(df):
        dist = stats.multivariate_t(shape=corr, df=df)

        def probability(c: float) -> float:
            box = np.full(m, c)
            return float(dist.cdf(box, lower_limit=-box, maxpts=maxpts, random_state=_MVT_SEED))

    else:

        def probability(c: float) -> float:
            box = np.full(m, c)
            return float(stats.multivariate_normal.cdf(box, cov=corr, lower_limit=-box, maxpts=maxpts, rng=_MVT_SEED))

    return probability


def _dunnett(
    t_stat: np.ndarray,
    cov: np.ndarray,
    df: float,
    confidence: float,
    train_size: int,
    critical_values: dict[tuple[bytes, float], float],
) -> tuple[np.ndarray, float]:
    """Single-step (max |t|) adjusted p values and the simultaneous critical value for one family.

    ``critical_values`` caches the critical value by (correlation, df): a balanced design has the same family at
    every train size.
    """
    m = len(t_stat)
    p_raw = 2 * stats.t.sf(np.abs(t_stat), df)
    if m == 1:
        return p_raw, float(stats.t.ppf(0.5 + confidence / 2, df))
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd)
    if np.linalg.eigvalsh(corr).min() < 1e-10:
        raise ModelFitError(
            f"the Dunnett adjustment needs a non-singular covariance of the {m} contrasts at "
            f"train_size={train_size}, but it is singular (rank {np.linalg.matrix_rank(corr)}); a cluster-robust "
            "covariance with G seeds has rank at most G - 1. Use adjust='holm', or fit_mixed."
        )
    probability = _max_abs_t_probability(corr, df)
    bonferroni = np.minimum(m * p_raw, 1.0)
    # P(max |T| >= |t_j|) lies in [p_j, m p_j]; where m p_j is below the integration's resolution the union
    # bound is used (its relative error is of the order of the pairwise exceedance probabilities).
    p_adj = np.array(
        [b if b < _BONFERRONI_BELOW else 1.0 - probability(abs(t)) for t, b in zip(t_stat, bonferroni, strict=True)]
    )
    key = (np.round(corr, 10).tobytes(), round(df, 6))
    if key not in critical_values:
        low = float(stats.t.ppf(0.5 + confidence / 2, df))
        high = float(stats.t.ppf(1 - (1 - confidence) / (2 * m), df))  # Bonferroni: never below Dunnett's
        critical_values[key] = optimize.brentq(
            lambda c: probability(c) - confidence, low - 1e-6, high + 1e-6, xtol=1e-7
        )
    return np.clip(p_adj, p_raw, bonferroni), critical_values[key]


def contrasts_vs_reference(
    fit: FixedEffectsFit,
    reference: int = 0,
    adjust: Literal["holm", "bonferroni", "dunnett", "none"] = "holm",
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    r"""Every frozen level minus the reference level, within each train size, with multiplicity adjustment.

    Parameters
    ----------
    fit
        A :class:`~freezestats.stats.models.MixedFit` or :class:`~freezestats.stats.models.OlsFit`.
    reference
        The frozen level every other level is compared with; default 0 (nothing frozen, full fine-tuning).
    adjust
        ``"holm"`` (default), ``"bonferroni"``, ``"dunnett"`` or ``"none"``; the family is the comparisons within
        one train size (see Notes).
    confidence
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per (train_size, frozen level other than the reference), sorted by ``train_size`` then
        ``frozen_layers``, with columns

        * ``train_size``, ``frozen_layers``, ``reference`` (int)
        * ``estimate``: mean of ``frozen_layers`` minus mean of ``reference`` at that size
        * ``se``: its standard error; the seed intercept cancels in a within-seed difference
        * ``df``: degrees of freedom of the t reference
        * ``ci_low``, ``ci_high``: intervals; simultaneous over the family for ``"dunnett"``, per comparison
          (unadjusted) otherwise
        * ``ci_low_adj``, ``ci_high_adj``: intervals that match ``p_adj``: simultaneous for ``"dunnett"``,
          Bonferroni (level ``1 - (1 - confidence) / m`` for the ``m`` comparisons of the train size) for
          ``"bonferroni"`` and ``"holm"`` — Holm's step-down procedure has no interval form, and Bonferroni is
          what emmeans' ``confint`` substitutes for it — and per comparison for ``"none"``
        * ``t``: ``estimate / se``
        * ``p_val``: two-sided, unadjusted
        * ``p_adj``: adjusted within the train size (equal to ``p_val`` for ``"none"``)
        * ``adjust``: the method

    Raises
    ------
    ModelFitError
        Unknown ``adjust``, ``reference`` not a level of the fit, a fit without covariance, or (``"dunnett"``) a
        singular covariance of the contrasts.

    Notes
    -----
    Each contrast is :math:`l = x_{k,n} - x_{ref,n}`, built from the fit's design (so it does not depend on the
    coding of the model). The family for the adjustment is the :math:`K - 1` comparisons at one train size:
    the question "which depths differ from the reference at this amount of data" is asked once per size.

    * ``"holm"`` / ``"bonferroni"``: :func:`freezestats.stats.inference.multitest.adjust_p` (equal to statsmodels'
      ``multipletests``, without its ``gc.collect()`` per call) applied to the raw p values of each train size
      separately.
    * ``"dunnett"``: the single-step max-|t| method with the model's covariance of the contrasts (Hothorn,
      Bretz & Westfall 2008), i.e. ``adjust = "mvt"`` in emmeans: the adjusted p value of :math:`|t_j|` is
      :math:`1 - P(\max_i |T_i| < |t_j|)` for :math:`T` multivariate t with the contrasts' correlation matrix
      and the smallest df of the family (normal for infinite df), integrated with scipy's
      ``multivariate_t.cdf`` / ``multivariate_normal.cdf`` (Genz's randomised quasi-Monte Carlo, fixed seed;
      absolute error about 2e-5). Where the Bonferroni bound :math:`m p_j` is below 1e-4, beyond that
      resolution, it is reported instead (the exact value lies in :math:`[p_j, m p_j]`, and the bound is
      nearly tight there). The simultaneous critical value solves :math:`P(\max |T| < c) =` ``confidence``.
      A singular covariance of the contrasts (cluster-robust errors with few seeds) is refused.
      ``scipy.stats.dunnett`` is not used because it takes raw samples of independent groups, whereas these
      contrasts come from a model whose estimates share seeds (the tests check that the two agree where the
      groups are independent).

    References
    ----------
    Dunnett, C. W. (1955). A multiple comparison procedure for comparing several treatments with a control.
    *JASA* 50(272), 1096-1121.
    Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scand. J. Statist.* 6, 65-70.
    Hothorn, T., Bretz, F. & Westfall, P. (2008). Simultaneous inference in general parametric models.
    *Biometrical Journal* 50(3), 346-363.
    """
    fit = _check_fit(fit, "contrasts_vs_reference")
    _check_confidence(confidence)
    if adjust not in _ADJUST:
        raise ModelFitError(f"`adjust` must be one of {list(_ADJUST)}, but got adjust={adjust!r}.")
    table, rows = _reference_rows(fit, reference, "contrasts_vs_reference")
    estimate, se, df = _estimate(fit, rows)
    t_stat = estimate / se
    sizes = table["train_size"].to_numpy()
    tests = adjusted_t_tests(estimate, se, df, sizes, "none" if adjust == "dunnett" else adjust, confidence)
    if adjust == "dunnett":  # simultaneous from the contrasts' joint t distribution, per size
        critical_values: dict[tuple[bytes, float], float] = {}
        for size in fit.train_sizes:
            idx = np.flatnonzero(sizes == size)
            cov = rows[idx] @ fit.cov_params @ rows[idx].T
            p_family, crit = _dunnett(t_stat[idx], cov, float(df[idx].min()), confidence, size, critical_values)
            tests["p_adj"][idx] = p_family
            for side, sign in (("low", -1.0), ("high", 1.0)):
                tests[f"ci_{side}"][idx] = tests[f"ci_{side}_adj"][idx] = estimate[idx] + sign * crit * se[idx]
    return table.assign(
        estimate=estimate,
        se=se,
        df=df,
        ci_low=tests["ci_low"],
        ci_high=tests["ci_high"],
        ci_low_adj=tests["ci_low_adj"],
        ci_high_adj=tests["ci_high_adj"],
        t=t_stat,
        p_val=tests["p_val"],
        p_adj=tests["p_adj"],
        adjust=adjust,
    )

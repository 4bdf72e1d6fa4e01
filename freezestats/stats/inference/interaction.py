"""The test of the frozen x size interaction in one task's mixed model: does freezing act alike at every size?

Apart from :mod:`freezestats.stats.models.mixed` so that models fit and inference tests (here and in
:mod:`.ftest`) import models, never the other way round.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import _design, _prepare, _Prepared
from freezestats.stats.inference.ftest import bootstrap_lrt, grouped_model, lrt, lrt_method, result_row, wald_f_test
from freezestats.stats.models.mixed import fit_mixed
from freezestats.stats.models.mixed_fit import MixedFit
from freezestats.stats.models.mixed_grouped import GROUPED_VARIANCES
from freezestats.stats.models.mixed_pooled import _fit_mixedlm, _mixed_from_prepared

__all__ = ["interaction_test"]


def interaction_test(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    task: str | None = None,
    method: str = "F",
    variance: str = "per_size",
    n_boot: int = 1000,
    rng: int | np.random.Generator | None = 0,
    progress: Callable[[int, int], object] | None = None,
    fit: MixedFit | None = None,
) -> pd.DataFrame:
    r"""Test of the frozen_layers × train_size interaction: does the cost of freezing depend on the train size?

    Parameters
    ----------
    data, response, task
        As for :func:`fit_mixed`; failed runs are included.
    method
        ``"F"`` (default): Wald F test of the :math:`(K-1)(N-1)` interaction coefficients in the REML fit of
        :func:`fit_mixed` (``variance`` as given: by default a residual variance per train size, ``(1 | seed) +
        (1 | seed:train_size)``), with Satterthwaite's denominator df by lmerTest's rule for multi-df
        hypotheses (:func:`freezestats.stats.inference.ftest.wald_f_test`). One fit, nothing refitted.
        ``"lrt"``: :math:`\chi^2` likelihood-ratio test of ML fits of the full and the additive model
        (``C(frozen_layers) + C(train_size)``), both with the same variance structure.
        ``"bootstrap"``: the same likelihood ratio referred to ``n_boot`` parametric-bootstrap draws from the ML
        fit of the additive model, each refitted by both models,
        :math:`p = (1 + \#\{LR^* \ge LR\}) / (n_{boot} + 1)` (pbkrtest's ``PBmodcomp``); two ML fits per draw.
    variance
        The residual variance structure, as for :func:`fit_mixed` (``"per_size"``, ``"per_cell"`` or
        ``"pooled"``; ``"bootstrap"`` needs one of the first two).
    n_boot, rng, progress
        For ``method="bootstrap"``: the number of draws, their random seed, and a callback
        ``progress(done, n_boot)`` called after each draw (the CLI shows a progress bar with it).
    fit
        The REML :func:`fit_mixed` of the same task, when at hand: ``method="F"`` then fits nothing.

    Returns
    -------
    pandas.DataFrame
        One row (index ``"frozen_layers:train_size"``) with columns

        * ``test``: ``"frozen_layers:train_size"``
        * ``f_stat``, ``num_df``, ``den_df``: the F statistic and its df (NaN for the likelihood-ratio methods,
          except ``num_df``)
        * ``p_val``: upper tail of :math:`F(q, \nu)`, of :math:`\chi^2_{df}`, or the bootstrap p value
        * ``method``: ``"F (Satterthwaite)"``, ``"LRT (chi-square, ML)"`` or
          ``"parametric bootstrap LRT (ML, <n> draws)"``
        * ``lr_stat``: :math:`2(\ell_{full} - \ell_{reduced})` (NaN for the F test)
        * ``df``: number of interaction coefficients, :math:`(K - 1)(N - 1)` (= ``num_df``)
        * ``llf_full``, ``llf_reduced``: maximised ML log-likelihoods (NaN for the F test)

    Raises
    ------
    ModelFitError
        As for :func:`fit_mixed`; an unknown ``method``; for the likelihood-ratio methods, an ML fit that does
        not converge.

    Notes
    -----
    Why F by default: the :math:`\chi^2` reference treats the variances as known. With 5 seeds and a residual
    variance per train size, each variance rests on a few degrees of freedom, and the LRT of 24-30
    coefficients rejects a true null far more often than its level (see ``tests/test_stats_ftest.py``); the F
    test's denominator df carry that uncertainty. Likelihood ratios compare ML fits: REML likelihoods of models
    with different fixed effects are not comparable (Pinheiro & Bates 2000, Sec. 2.4.2). The bootstrap is
    exact up to Monte Carlo error under the fitted null, and costs two ML fits per draw.

    Checked against R on ``tests/data/hetero_fixture.csv`` (``tests/data/ftest_reference.R``): the F test
    against lmerTest's ``contest`` / ``anova(ddf = "Satterthwaite")`` on a homoscedastic lmer model, the LRT
    of the per-size model against nlme's ``anova(additive, full)`` of ML fits.

    References
    ----------
    Pinheiro, J. C. & Bates, D. M. (2000). *Mixed-Effects Models in S and S-PLUS*. Springer, Sec. 2.4.
    Kuznetsova, A., Brockhoff, P. B. & Christensen, R. H. B. (2017). lmerTest package: tests in linear mixed
    effects models. *Journal of Statistical Software* 82(13).
    Halekoh, U. & Højsgaard, S. (2014). A Kenward-Roger approximation and parametric bootstrap methods for
    tests in linear mixed models: the R package pbkrtest. *Journal of Statistical Software* 59(9).
    """
    label = "frozen_layers:train_size"
    if method not in ("F", "lrt", "bootstrap"):
        raise ModelFitError(f"`method` must be one of ['F', 'lrt', 'bootstrap'], but got method={method!r}.")
    if variance not in (*GROUPED_VARIANCES, "pooled"):
        raise ModelFitError(
            f"`variance` must be one of {[*GROUPED_VARIANCES, 'pooled']}, but got variance={variance!r}."
        )
    if method == "F":
        if fit is None:
            fit = fit_mixed(data, response, task=task, variance=variance)
        names = [n for n in fit.design_info.column_names if n.startswith("frozen_layers[") and ":train_size[" in n]
        f = wald_f_test(fit, names, test=label).iloc[0]
        return result_row(
            label,
            f_stat=f["f_stat"],
            num_df=f["num_df"],
            den_df=f["den_df"],
            p_val=f["p_val"],
            method=f["method"],
            index=label,
        )
    prepared = _prepare(data, response, task=task, include_failed=True, caller="interaction_test")
    if variance == "pooled":
        if method == "bootstrap":
            raise ModelFitError(
                "method='bootstrap' refits the per-size (or per-cell) model; use variance='per_size' or 'per_cell'."
            )
        full = _mixed_from_prepared(prepared, response, reml=False)
        llf_reduced, reduced_converged, k_reduced, reduced_warnings = _mixed_reduced(prepared, response)
        for name, converged, messages in (
            ("full", full.diagnostics.converged, full.diagnostics.warnings),
            ("reduced", reduced_converged, tuple(reduced_warnings)),
        ):
            if not converged:
                raise ModelFitError(
                    f"the likelihood-ratio test needs both ML fits to converge, but the {name} model of task "
                    f"{prepared.task!r} did not ({'; '.join(messages)}); try fit_mixed(..., reml=False) to inspect it."
                )
        llf_full = full.diagnostics.llf
        df = len(full.params) - k_reduced
        lr = max(2.0 * (llf_full - llf_reduced), 0.0)
        out = {"lr_stat": lr, "df": df, "llf_full": llf_full, "llf_reduced": llf_reduced}
        out["p_val"] = float(stats.chi2.sf(lr, df)) if df > 0 else math.nan
    else:
        full_model = grouped_model(prepared, response, variance=variance)
        reduced_model = grouped_model(prepared, response, "frozen_layers + train_size", variance=variance)
        if method == "lrt":
            out = lrt(full_model, reduced_model)
        else:
            out = bootstrap_lrt(full_model, reduced_model, n_boot=n_boot, rng=rng, progress=progress)
    return result_row(
        label,
        num_df=out["df"],
        p_val=out["p_val"],
        method=lrt_method(method, out.get("n_boot")),
        lr_stat=out["lr_stat"],
        llf_full=out["llf_full"],
        llf_reduced=out["llf_reduced"],
        index=label,
    )


def _mixed_reduced(prepared: _Prepared, response: str) -> tuple[float, bool, int, list[str]]:
    """ML fit of the additive model: log-likelihood, convergence, number of fixed effects, warnings."""
    x = _design(prepared, "frozen_layers + train_size")
    y = prepared.frame[response].to_numpy(dtype=float)
    result, _, notes, _, reported = _fit_mixedlm(y, x, prepared, reml=False)
    return float(result.llf), bool(result.converged), x.shape[1], notes + reported

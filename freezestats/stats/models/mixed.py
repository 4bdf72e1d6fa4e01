"""The linear mixed model of one task: the per-train-size variance model (default) and the pooled one.

This module holds the entry point, :func:`fit_mixed`, which chooses between the two implementations: the per-size
model in :mod:`freezestats.stats.models.mixed_grouped` and the pooled one, fitted by
statsmodels, in :mod:`freezestats.stats.models.mixed_pooled`.
"""

from __future__ import annotations

import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import unreplicated_cells
from freezestats.stats.design.model_frame import _prepare, _Prepared
from freezestats.stats.models.mixed_fit import MixedFit
from freezestats.stats.models.mixed_grouped import GROUPED_VARIANCES, fit_grouped
from freezestats.stats.models.mixed_pooled import _mixed_from_prepared

# --------------------------------------------------------------------------------------------------------------
# Linear mixed model


def fit_mixed(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    task: str | None = None,
    include_failed: bool = True,
    reml: bool = True,
    variance: str = "per_size",
) -> MixedFit:
    r"""Fit the linear mixed model of one task: a mean per (frozen_layers, train_size) cell and the seed structure.

    Parameters
    ----------
    data
        The results table (one row per run, the columns of :func:`freezestats.results.export.results_table`).
    response
        ``"best_dev"``, ``"final_dev"`` or ``"heldout"``.
    task
        The task to model; may be left out when the table holds one task.
    include_failed
        Keep failed (collapsed) runs, default ``True``; see Notes.
    reml
        Restricted maximum likelihood (default) or maximum likelihood (for likelihood-ratio tests of fixed
        effects, see :func:`interaction_test`).
    variance
        ``"per_size"`` (default): one residual variance per train size, with ``(1 | seed) + (1 | seed:train_size)``
        (:mod:`freezestats.stats.models.mixed_grouped`; nlme's ``lme(random = ~1 | seed/size, weights =
        varIdent(~1 | size))``). ``"per_cell"``: one residual variance per cell. ``"pooled"``: one residual
        variance and ``(1 | seed)``, the model below, which lme4 fits too.

    Returns
    -------
    MixedFit
        With ``fixed_effects`` (``term, estimate, se, ci_low, ci_high, z, p_val``), ``variance_components``
        (``component, variance, sd``), ``icc_seed`` and ``diagnostics`` (:class:`FitDiagnostics`).

    Raises
    ------
    ModelFitError
        The table is empty, lacks a column, holds several tasks (and ``task`` is not given) or models, has a
        cell without runs, a single seed, a constant response, or no optimizer could fit it.

    Notes
    -----
    Model, for run :math:`i` in cell :math:`(k, n)` with seed :math:`s` and subset draw :math:`d`:

    .. math::

        y_i = \mu_{kn} + u_{s} + v_{d} + \varepsilon_i, \quad
        u_s \sim N(0, \sigma^2_{seed}),\; v_d \sim N(0, \sigma^2_{subset}),\; \varepsilon_i \sim N(0, \sigma^2)

    in lme4 notation ``response ~ C(frozen_layers) * C(train_size) + (1 | seed) [+ (1 | subset_draw)]``, in the
    treatment coding described in :mod:`freezestats.stats.models`. The seed intercept is shared by every cell
    of the task (the same seed number means the same initialisation of the head and the same data order), so
    contrasts between cells are estimated within seed. The subset-draw intercept is crossed with seed and only
    modelled when the table has more than one draw; with one draw it is confounded with the intercept.

    Fitting: statsmodels ``MixedLM``; with one draw the usual ``groups=seed`` form, with several draws the
    crossed form (one group holding every run, with a variance component for seed and one for subset draw).
    Optimizers are tried in the order ``bfgs`` (statsmodels' default), ``lbfgs``, ``cg`` (gradient based, fast),
    then ``powell`` and ``nm`` (derivative-free, slower but robust); the first that converges is reported, and
    every failure is listed in ``diagnostics.warnings``.

    Inference: ``fixed_effects`` shows Wald z tests, as statsmodels and lme4 print them. With 5 seeds a normal
    reference is anti-conservative for anything involving the seed variance (a cell mean), so
    :func:`freezestats.stats.estimated_marginal_means` and the contrast functions use t with Satterthwaite
    degrees of freedom (:meth:`MixedFit.contrast_df`), as lmerTest and emmeans do.

    Missing data: runs whose response is missing are dropped (listwise deletion) and counted in
    ``diagnostics.n_excluded``. Failed runs (``failed=True``, collapsed to the majority baseline) are included
    by default: they are what fine-tuning at that setting produces, and dropping them makes every estimate
    conditional on success, which flatters fragile settings. They also make residuals bimodal, so report the
    failure rate per cell alongside and check the conclusions with ``include_failed=False``.

    The covariance of the fixed effects is :math:`(X'\hat V^{-1}X)^{-1}` at the estimated variances, as in lme4.

    Checked against lme4 (``lmer(..., REML = TRUE)``), lmerTest and emmeans in R on
    ``tests/data/stats_fixture.csv`` (``tests/data/lme4_reference.R``): fixed effects and marginal means agree to
    1e-14, their standard errors to 1e-9, variance components to 1e-7 (relative), Satterthwaite df to 1e-6.

    References
    ----------
    Pinheiro, J. C. & Bates, D. M. (2000). *Mixed-Effects Models in S and S-PLUS*. Springer.
    Bates, D., Mächler, M., Bolker, B. & Walker, S. (2015). Fitting linear mixed-effects models using lme4.
    *Journal of Statistical Software* 67(1).
    Kuznetsova, A., Brockhoff, P. B. & Christensen, R. H. B. (2017). lmerTest package: tests in linear mixed
    effects models. *Journal of Statistical Software* 82(13).

    Examples
    --------
    >>> from freezestats.stats import fit_mixed, simulate_results
    >>> fit = fit_mixed(simulate_results(rng=1))
    >>> fit.variance_components["component"].tolist()  # a residual variance per train size (the default)
    ['seed', 'residual:50', 'residual:100', 'residual:200', 'residual:500', 'residual:1000', 'seed:train_size']
    >>> fit.diagnostics.converged, fit.diagnostics.method
    (True, 'REML')
    """
    if variance not in (*GROUPED_VARIANCES, "pooled"):
        raise ModelFitError(
            f"`variance` must be one of {[*GROUPED_VARIANCES, 'pooled']}, but got variance={variance!r}."
        )
    # a per-cell variance needs two runs a cell: without failed runs, a level with a lone healthy run leaves the fit
    # (with a note), as a level with none does; with them, a lone run is refused below
    prepared = _prepare(
        data, response, task=task, include_failed=include_failed, caller="fit_mixed",
        min_healthy_runs=2 if variance == "per_cell" else 1,
    )  # fmt: skip
    if variance == "per_cell" and include_failed:
        _require_replicated_cells(prepared)
    if variance == "pooled":
        return _mixed_from_prepared(prepared, response, reml)
    return fit_grouped(prepared, response, reml=reml, variance=variance)


def _require_replicated_cells(prepared: _Prepared) -> None:
    """A per-cell residual variance needs two runs in its cell: with one, REML puts it near zero and the cell's
    intervals shrink to what the seed variance alone allows (a one-run cell's EMM SE was 0.019 against 0.032 under
    per-size variances in a simulated study). A study still running has such cells; the per-size model does not
    need them replicated."""
    lone = [f"frozen {k} at n = {n}" for (k,), n, _ in unreplicated_cells(prepared.frame, ["frozen_layers"])]
    if lone:
        raise ModelFitError(
            "fit_mixed: variance='per_cell' gives every cell its own residual variance, which a cell with one run "
            f"cannot estimate ({', '.join(lone)}); use variance='per_size' (the default) or run more seeds."
        )


# --------------------------------------------------------------------------------------------------------------
# Likelihood-ratio test of the interaction

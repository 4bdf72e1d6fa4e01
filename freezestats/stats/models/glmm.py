r"""A binomial mixed model of the correct counts per run, fitted by maximum likelihood (glmer's Laplace).

A run's accuracy is ``k`` correct answers out of ``n`` evaluation items: its evaluation noise is binomial and known,
so a binomial GLMM only has to estimate how much the runs' *true* accuracies spread around their cell (a run-level
random effect, per train size by default) and how much of that spread a seed shares across cells (a seed random
effect). The fit is :func:`freezestats.stats.models.laplace.fit_binomial_laplace`, which reproduces ``lme4::glmer(...,
nAGQ = 1)``; this module turns a results table into that model and the fit into the tables the other models give.

Scales. Everything in :class:`GlmmFit` (``fixed_effects``, ``params``, ``cov_params``, and therefore
:func:`freezestats.stats.estimated_marginal_means`, :func:`~freezestats.stats.contrasts_vs_reference` and
:func:`~freezestats.stats.equivalence_tests` applied to it) is on the **logit scale** and **conditional** on the
random effects being zero, i.e. the log-odds of a typical seed's typical run. The accuracy to show is
:func:`~freezestats.stats.marginal_accuracy`, the population average over seeds and runs.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import patsy

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import (
    _FEW_SEEDS,
    FIXED_FORMULA,
    FitDiagnostics,
    _coef_table,
    _design,
    _prepare,
    _Prepared,
)
from freezestats.stats.models.glmm_counts import COUNT_COLUMNS, count_columns, run_counts
from freezestats.stats.models.laplace import LaplaceFit, fit_binomial_laplace
from freezestats.stats.models.laplace_layout import RandomTerm

# COUNT_COLUMNS lives in glmm_counts; it is exported here too because fit_glmm's ``response`` is read against it
__all__ = ["COUNT_COLUMNS", "LAPLACE_METHOD", "RUN_VARIANCES", "GlmmFit", "fit_glmm"]

LAPLACE_METHOD = "Laplace (glmer nAGQ=1)"
"""``GlmmFit.approximation`` and ``diagnostics.method``."""

RUN_VARIANCES: tuple[str, ...] = ("per_size", "pooled")
"""The run-level variance structures :func:`fit_glmm` fits."""

_OPTIMIZER = "L-BFGS-B, then projected Newton (freezestats.stats.models.laplace)"


@dataclass(frozen=True, eq=False)
class GlmmFit:
    r"""A binomial GLMM fitted by :func:`fit_glmm` (maximum likelihood, Laplace approximation as glmer's ``nAGQ=1``).

    It implements :class:`~freezestats.stats.models.FixedEffectsFit`, so
    :func:`~freezestats.stats.estimated_marginal_means`, :func:`~freezestats.stats.contrasts_vs_reference` and
    :func:`~freezestats.stats.equivalence_tests` accept it. They then work **on the logit scale** with a normal
    reference (Wald z, ``df = inf``): the "estimated marginal means" are *conditional* logits, the log-odds of a run
    whose seed and run effects are zero, not accuracies; contrasts are log odds ratios; an equivalence ``margin`` is
    a log odds ratio. Show :func:`~freezestats.stats.marginal_accuracy` as the accuracy of a cell.

    Attributes
    ----------
    result
        The :class:`~freezestats.stats.models.laplace.LaplaceFit` (estimates, covariances, conditional modes, deviance).
    response
        The response whose checkpoint's counts were modelled (see :data:`COUNT_COLUMNS`).
    task, design_info, frozen_levels, train_sizes
        As for :class:`MixedFit`.
    run_variance
        ``"per_size"`` (one run-level variance per train size) or ``"pooled"`` (one for all runs).
    counts
        The (correct, scored) columns of the results table that were modelled.
    formula
        The model in lme4 notation.
    approximation
        ``"Laplace (glmer nAGQ=1)"``.
    fixed_effects
        ``term, estimate, se, ci_low, ci_high, z, p_val`` on the logit scale: Wald z tests and 95% normal intervals
        with the standard errors of :attr:`cov_params`.
    variance_components
        ``component, variance, sd, train_size`` on the logit scale: ``seed``; ``run:<size>`` (``train_size`` set)
        or ``run``; ``subset_draw`` when several training-subset draws are modelled.
    diagnostics
        :class:`FitDiagnostics`; ``llf``, ``aic`` and ``bic`` are glmer's (Laplace log-likelihood, binomial
        coefficients included; ``aic = deviance + 2 (fixed effects + SDs)``).
    """

    result: LaplaceFit
    response: str
    task: str
    run_variance: str
    counts: tuple[str, str]
    formula: str
    design_info: patsy.DesignInfo
    frozen_levels: tuple[int, ...]
    train_sizes: tuple[int, ...]
    approximation: str
    fixed_effects: pd.DataFrame
    variance_components: pd.DataFrame
    diagnostics: FitDiagnostics

    @property
    def params(self) -> np.ndarray:
        """Fixed effects on the logit scale, in the order of ``design_info.column_names``."""
        return self.result.beta.copy()

    @property
    def cov_params(self) -> np.ndarray:
        """Their covariance from the Hessian of the Laplace deviance, glmer's ``vcov(fit, use.hessian = TRUE)``."""
        return self.result.cov_beta.copy()

    @property
    def df_method(self) -> str:
        return "wald-z"

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        """``inf`` for every row: Wald z (normal reference), as glmer and emmeans report a GLMM."""
        rows = np.atleast_2d(np.asarray(contrasts, dtype=float)).shape[0]
        return np.full(rows, np.inf)

    def random_effect_variance(self, train_size: int) -> float:
        """Variance of the sum of the random effects of one run at ``train_size`` (logit scale).

        The seed variance, plus the run-level variance of that size (``per_size``) or of all runs (``pooled``),
        plus the subset-draw variance when modelled: what :func:`~freezestats.stats.marginal_accuracy` averages over.
        """
        if train_size not in self.train_sizes:
            raise ModelFitError(
                f"`train_size` must be one of the fit's train sizes {list(self.train_sizes)}, but got {train_size!r}."
            )
        sd = dict(zip(self.result.sd_names, self.result.sd, strict=True))
        run = sd[f"run:{train_size}"] if self.run_variance == "per_size" else sd["run"]
        return float(sd["seed"] ** 2 + run**2 + sd.get("subset_draw", 0.0) ** 2)


# --------------------------------------------------------------------------------------------------------------
# Binomial GLMM


def _random_terms(prepared: _Prepared, run_variance: str) -> list[RandomTerm]:
    frame = prepared.frame
    n = len(frame)
    seed_codes, seed_levels = pd.factorize(frame["seed"], sort=True)
    terms = [RandomTerm("seed", seed_codes, np.zeros(len(seed_levels), dtype=int), ("seed",))]
    if prepared.n_subset_draws > 1:
        draw_codes, draw_levels = pd.factorize(frame["subset_draw"], sort=True)
        terms.append(RandomTerm("subset_draw", draw_codes, np.zeros(len(draw_levels), dtype=int), ("subset_draw",)))
    if run_variance == "per_size":
        size_index = frame["train_size"].cat.codes.to_numpy()  # categories = prepared.train_sizes, sorted
        names = tuple(f"run:{size}" for size in prepared.train_sizes)
        terms.append(RandomTerm("run", np.arange(n), size_index, names))
    else:
        terms.append(RandomTerm("run", np.arange(n), np.zeros(n, dtype=int), ("run",)))
    return terms


def _formula(counts: tuple[str, str], prepared: _Prepared, run_variance: str) -> str:
    correct, scored = counts
    random = "(1 | seed)" + (" + (1 | subset_draw)" if prepared.n_subset_draws > 1 else "")
    if run_variance == "per_size":
        random += "".join(f' + (0 + dummy(train_size, "{size}") | run)' for size in prepared.train_sizes)
    else:
        random += " + (1 | run)"
    return f"cbind({correct}, {scored} - {correct}) ~ {FIXED_FORMULA} + {random}"


def _variance_table(fit: LaplaceFit) -> pd.DataFrame:
    rows = []
    for name, sd in zip(fit.sd_names, fit.sd, strict=True):
        size = float(name.split(":", 1)[1]) if name.startswith("run:") else math.nan
        rows.append({"component": name, "variance": float(sd) ** 2, "sd": float(sd), "train_size": size})
    return pd.DataFrame(rows, columns=["component", "variance", "sd", "train_size"])


def _notes(prepared: _Prepared, fit: LaplaceFit, raw: list[str], counts: tuple[str, ...], response: str) -> list[str]:
    """What the diagnostics warn of, in words: the library's warnings, a metric that is not the counts' accuracy,
    few seeds, boundary fits and non-convergence (kept out of :func:`fit_glmm` so that the fit reads as one job)."""
    notes = list(prepared.notes)
    notes.extend(f"laplace: {message}" for message in raw)
    if "metric" in prepared.frame.columns:
        metrics = sorted({str(m) for m in prepared.frame["metric"].dropna().unique()} - {"accuracy"})
        if metrics:
            notes.append(
                f"the metric of task {prepared.task!r} is {metrics[0]!r}, but the GLMM models the accuracy "
                f"({counts[0]} / {counts[1]}) of the checkpoint that {response} selected, not the metric."
            )
    if prepared.n_seeds < _FEW_SEEDS:
        notes.append(
            f"only {prepared.n_seeds} seeds: the seed variance is estimated from {prepared.n_seeds} values, so z "
            "intervals of cell logits and marginal accuracies are anti-conservative; contrasts within a train size, "
            "which cancel the seed effect, are not affected."
        )
    for name in fit.boundary:
        notes.append(
            f"boundary (singular) fit: the {name} SD is estimated at 0 (below lme4's tolerance 1e-4 on the logit "
            f"scale), so the data show no {name} variation beyond the binomial noise; the model is then the one "
            "without this component, and intervals treat it as known to be 0."
        )
    if not fit.converged:
        notes.append(
            "the Laplace fit did not converge (see the laplace: warnings above): treat its estimates and standard "
            "errors as unreliable."
        )
    return notes


def fit_glmm(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    task: str | None = None,
    include_failed: bool = True,
    run_variance: str = "per_size",
) -> GlmmFit:
    r"""Fit a binomial (logit) mixed model to the correct counts of every run, by maximum likelihood.

    Parameters
    ----------
    data
        The results table (one row per run), with the count columns of the response's checkpoint.
    response
        Which checkpoint's correct counts to model (:data:`COUNT_COLUMNS`): ``"best_dev"`` (default;
        ``n_correct_best`` of ``n_eval``, the checkpoint selected on the whole validation set), ``"final_dev"``
        (``n_correct`` of ``n_eval``, the final checkpoint) or ``"heldout"`` (``n_correct_heldout`` of
        ``n_eval_heldout``, the score half of the validation set). The response column itself must be present
        too: a run missing it or its counts is dropped, so every model sees the same runs.
    task, include_failed
        As for :func:`fit_mixed`.
    run_variance
        ``"per_size"`` (default): the run-level variance differs by train size, one per size (fine-tuning on 50
        examples scatters runs far more than on 1000). ``"pooled"``: one run-level variance for all runs.

    Returns
    -------
    GlmmFit
        With ``fixed_effects`` (``term, estimate, se, ci_low, ci_high, z, p_val``, logit scale, Wald),
        ``variance_components`` (``component, variance, sd, train_size``, logit scale), ``formula``,
        ``approximation`` and ``diagnostics``; usable with :func:`freezestats.stats.estimated_marginal_means`,
        :func:`~freezestats.stats.contrasts_vs_reference` and :func:`~freezestats.stats.equivalence_tests` on the
        logit scale (z, ``df = inf``), and with :func:`~freezestats.stats.marginal_accuracy` for accuracies.

    Raises
    ------
    ModelFitError
        As for :func:`fit_mixed`; the response's count columns are missing (a table written before the runner
        stored per-checkpoint counts has only ``n_correct``: fit ``response="final_dev"`` then), or the counts are
        not integers ``0 <= correct <= scored`` with ``scored >= 1``, or every run has all or no items right.

    Notes
    -----
    Model, for run :math:`i` in cell :math:`(k, n)` with seed :math:`s`:

    .. math::

        \text{correct}_i \sim \operatorname{Binomial}(\text{scored}_i, p_i), \quad
        \operatorname{logit} p_i = \mu_{kn} + u_s + w_i, \quad
        u_s \sim N(0, \sigma^2_{seed}),\; w_i \sim N(0, \sigma^2_{run,n})

    in lme4 notation (``run_variance="per_size"``)::

        cbind(correct, scored - correct) ~ C(frozen_layers) * C(train_size) + (1 | seed)
            + (0 + dummy(train_size, "50") | run) + (0 + dummy(train_size, "200") | run) + ...

    and ``... + (1 | seed) + (1 | run)`` for ``"pooled"``, with the fixed effects and treatment coding of
    :func:`fit_mixed`. The observation-level run intercept :math:`w_i` carries the run-to-run variation of
    fine-tuning beyond the binomial noise of the evaluation set (SD about 0.011 at 88% accuracy on 872 items,
    while seeds typically differ by several points); without it intervals would be far too narrow (Harrison
    2014). When the table has several training-subset draws, a crossed ``(1 | subset_draw)`` is added, as in
    :func:`fit_mixed`.

    Fitting: :func:`freezestats.stats.models.laplace.fit_binomial_laplace`, the Laplace approximation of the marginal
    likelihood maximised jointly over fixed effects and SDs, as ``glmer(..., nAGQ = 1)``; it matches glmer to
    ~1e-6 (``tests/test_stats_laplace.py``, ``tests/test_stats_glmm.py``). One row per run with its counts (no
    expansion into Bernoulli rows). Standard errors: ``cov_params`` is glmer's ``vcov(fit, use.hessian = TRUE)``,
    the fixed-effects block of the inverse Hessian of the deviance, so it accounts for the estimated SDs.

    Inference: Wald z on the logit scale (glmer's ``summary``, emmeans' ``df = Inf`` for a GLMM). Contrasts within
    a train size cancel the seed effect and rest on the run variance of that size, estimated from many runs; cell
    means (logits and :func:`~freezestats.stats.marginal_accuracy`) also carry the seed variance, estimated from
    few seeds, so their z intervals are anti-conservative with 5 seeds (the diagnostics say so).

    Scale: estimates are *conditional* log-odds (random effects at zero). The population-average accuracy of a
    cell is pulled towards 0.5 from ``expit(logit)``; report :func:`~freezestats.stats.marginal_accuracy`.

    Missing data: runs missing the response or its counts are dropped (listwise deletion), as in
    :func:`fit_mixed`. When ``metric`` is not accuracy (e.g. Matthews correlation for CoLA) the counts still
    measure the accuracy of the checkpoint that the metric selected, and the diagnostics say so.

    References
    ----------
    Bates, D., Mächler, M., Bolker, B. & Walker, S. (2015). Fitting linear mixed-effects models using lme4.
    *Journal of Statistical Software* 67(1).
    Harrison, X. A. (2014). Using observation-level random effects to model overdispersion in count data in
    ecology and evolution. *PeerJ* 2:e616.

    Examples
    --------
    >>> from freezestats.stats import fit_glmm, marginal_accuracy, simulate_results
    >>> fit = fit_glmm(simulate_results(frozen_levels=(0, 2), train_sizes=(100, 500), rng=1), "best_dev")
    >>> fit.diagnostics.method, fit.diagnostics.converged
    ('Laplace (glmer nAGQ=1)', True)
    >>> marginal_accuracy(fit).columns.tolist()  # the accuracies to show (estimated_marginal_means: logits)
    ['frozen_layers', 'train_size', 'conditional', 'marginal', 'se', 'ci_low', 'ci_high']
    """
    if run_variance not in RUN_VARIANCES:
        raise ModelFitError(f"`run_variance` must be one of {list(RUN_VARIANCES)}, but got {run_variance=!r}.")
    counts = count_columns(data, response)
    prepared = _prepare(
        data, response, task=task, include_failed=include_failed, caller="fit_glmm", extra_columns=counts
    )
    x = _design(prepared)
    successes, trials = run_counts(prepared, counts)
    terms = _random_terms(prepared, run_variance)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_binomial_laplace(successes, trials, x.to_numpy(dtype=float), terms)
    raw = [f"{w.category.__name__}: {w.message}" for w in caught] + list(fit.warnings)

    notes = _notes(prepared, fit, raw, counts, response)
    singular = any("not positive definite" in message for message in fit.warnings)

    se = np.sqrt(np.diag(fit.cov_beta))
    fixed = _coef_table(list(x.columns), fit.beta, se, df=None)
    n_params = len(fit.beta) + len(fit.sd)
    diagnostics = FitDiagnostics(
        converged=bool(fit.converged),
        boundary=bool(fit.boundary),
        singular=singular,
        optimizer=_OPTIMIZER,
        method=LAPLACE_METHOD,
        warnings=tuple(notes),
        library_warnings=tuple(raw),
        n_obs=len(prepared.frame),
        n_seeds=prepared.n_seeds,
        n_subset_draws=prepared.n_subset_draws,
        n_failed=prepared.n_failed,
        n_excluded=prepared.n_excluded,
        llf=fit.loglik,
        aic=fit.deviance + 2 * n_params,
        bic=fit.deviance + math.log(len(prepared.frame)) * n_params,
    )
    return GlmmFit(
        result=fit,
        response=response,
        task=prepared.task,
        run_variance=run_variance,
        counts=counts,
        formula=_formula(counts, prepared, run_variance),
        design_info=x.design_info,
        frozen_levels=prepared.frozen_levels,
        train_sizes=prepared.train_sizes,
        approximation=LAPLACE_METHOD,
        fixed_effects=fixed,
        variance_components=_variance_table(fit),
        diagnostics=diagnostics,
    )

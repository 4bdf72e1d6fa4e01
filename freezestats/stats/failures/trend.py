"""A logistic trend of the failure rate over training size and frozen fraction: :func:`failure_model`.

Where :mod:`freezestats.stats.failures.rates` counts failed runs cell by cell (Wilson intervals, flags, summaries),
this module fits one smooth model across the grid, ``logit P(failed) ~ log2(size) * frozen fraction``, by
Firth's penalised likelihood (:mod:`freezestats.stats.failures.firth`) or maximum likelihood, with an exact check for
separation before fitting. It is a model fit with its own design, diagnostics and output table, hence its own
module; :mod:`freezestats.stats.failures.rates` re-exports :func:`failure_model`.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd
from scipy import optimize

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import _failure_frame, check_confidence, require_single_task
from freezestats.stats.failures.firth import firth_table

__all__ = ["failure_model"]

MODEL_COLUMNS = [
    "term",
    "estimate",
    "se",
    "ci_low",
    "ci_high",
    "z",
    "p_val",
    "odds_ratio",
    "at_train_size",
    "method",
    "warning",
]
TERMS = ["intercept", "log2_train_size", "frozen_fraction", "log2_train_size:frozen_fraction"]
_MIN_EVENTS_PER_TERM = 10


def failure_model(
    data: pd.DataFrame,
    task: str | None = None,
    confidence: float = 0.95,
    on_separation: Literal["raise", "nan"] = "raise",
    method: Literal["firth", "ml"] = "firth",
) -> pd.DataFrame:
    r"""Logistic regression of run failure on training size, freeze depth and their interaction.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (one row per run); needs
        ``role, task, train_size, frozen_layers, n_layers, failed``.
    task : str or None
        The task to model; required when the table holds several tasks.
    confidence : float
        Coverage of the intervals, in (0, 1).
    on_separation : {"raise", "nan"}
        Only for ``method="ml"``: what to do when the data are (quasi-)completely separated, so that the
        maximum-likelihood estimates do not exist: ``"raise"`` a
        :class:`~freezestats.exceptions.ModelFitError` (the default), or return the four rows with NaN
        statistics and the diagnosis in ``warning``. Firth's estimates always exist, so with
        ``method="firth"`` separation is only reported in ``warning``.
    method : {"firth", "ml"}
        ``"firth"`` (default): Firth's penalised likelihood, finite under separation, with profile
        penalised-likelihood intervals and p values (as R's ``logistf``). ``"ml"``: maximum likelihood
        (statsmodels GLM) with Wald intervals.

    Returns
    -------
    pandas.DataFrame
        One row per term, in the order ``intercept, log2_train_size, frozen_fraction,
        log2_train_size:frozen_fraction``:

        - ``term``: the coefficient (see Notes for the covariates).
        - ``estimate``: log-odds coefficient (penalised or plain maximum likelihood, see ``method``).
        - ``se``: its standard error: square root of the diagonal of the inverse Fisher information at the
          estimate.
        - ``ci_low``, ``ci_high``: Firth: profile penalised-likelihood interval; ML: Wald interval,
          ``estimate ± z_{1-α/2} se``.
        - ``z``: Wald statistic ``estimate / se``.
        - ``p_val``: two-sided p value. Firth: penalised likelihood-ratio test of the coefficient = 0
          (consistent with the interval); ML: Wald, ``z`` under N(0, 1).
        - ``odds_ratio``: ``exp(estimate)`` (for the intercept: the odds of failure of full
          fine-tuning at ``at_train_size``); ``exp(ci_low)``, ``exp(ci_high)`` bound it.
        - ``at_train_size``: the training size at which the intercept and the ``frozen_fraction``
          main effect are evaluated (the geometric mean of the design's distinct sizes).
        - ``method``: ``"firth"`` or ``"ml"``.
        - ``warning``: empty string, or the caveats of this fit joined by ``"; "``: separation (Firth: estimates
          are finite but driven by the penalty in the separated direction; ML with ``on_separation="nan"``:
          no estimates), few failures per coefficient, an optimiser that did not converge.

    Raises
    ------
    ModelFitError
        As :func:`failure_rates`; several tasks and no ``task``; no failure at all, or every run
        failed (nothing to model: use :func:`failure_rates`); fewer than two distinct training sizes
        or freeze fractions (the interaction is not identified); an unknown ``method`` or
        ``on_separation``; separation with ``method="ml"`` and ``on_separation="raise"``.

    Notes
    -----
    The model, fitted to the individual runs, is

    .. math::

        \operatorname{logit} P(\text{failed}) = \beta_0 + \beta_1 s + \beta_2 f + \beta_3 s f,
        \qquad s = \log_2(\text{train\_size}) - c,\quad f = \frac{\max(k, 0)}{L},

    with :math:`k` the freeze depth, :math:`L` = ``n_layers`` and :math:`c` the mean of
    :math:`\log_2` of the distinct training sizes (so :math:`2^c` = ``at_train_size``). :math:`f` is the
    share of transformer blocks frozen: freezing only the embeddings (:math:`k=-1`) counts as 0 blocks,
    like full fine-tuning (:math:`k=0`). :math:`\beta_1` is the change in log-odds per doubling of the
    data for full fine-tuning, :math:`\beta_2` the change from full fine-tuning to freezing every
    block at ``at_train_size``, and :math:`\beta_3` how the latter changes per doubling.

    Why numeric covariates rather than factors: with 5 seeds per cell and failures concentrated in a
    few cells, a factor × factor model has one parameter per cell and is separated (some cells have
    0% or 100% failures), so its estimates are infinite. The smooth model borrows strength across
    cells at the price of assuming the log-odds are linear in :math:`\log_2` size and frozen share;
    check it against :func:`failure_rates`.

    Separation. When some combination of the covariates splits failed from healthy runs perfectly
    (complete separation) or up to ties (quasi-complete), the likelihood increases without bound along
    that direction and the maximum-likelihood estimate does not exist. Separation is detected exactly,
    before fitting, with the linear program of Konis (2007) — maximise :math:`\sum_i y^*_i x_i^\top\beta`
    subject to :math:`y^*_i x_i^\top\beta \ge 0` and :math:`|\beta_j| \le 1`, with :math:`y^*_i = \pm 1`; a
    positive optimum is a separating direction. Small failure studies are often separated (no failure at all
    above some size), so the default fit is Firth's (1993) penalised likelihood, which maximises

    .. math:: \ell^*(\beta) = \ell(\beta) + \tfrac12 \log\det I(\beta), \qquad I(\beta) = X^\top W X,

    (the Jeffreys-prior penalty). Its estimates are finite under separation and have :math:`O(n^{-2})` bias
    instead of maximum likelihood's :math:`O(n^{-1})` (Heinze & Schemper 2002). It is solved by Newton steps on
    the modified score :math:`U^*(\beta) = X^\top(y - p + h(\tfrac12 - p))`, with :math:`h` the diagonal of
    the hat matrix :math:`W^{1/2}X I^{-1} X^\top W^{1/2}`, step length capped at 5 and halved while
    :math:`\ell^*` decreases (the algorithm of ``logistf``). The standard error is from :math:`I(\hat\beta)^{-1}`;
    because Wald intervals are poor exactly where Firth's method is needed (a separated coefficient's profile
    is far from quadratic), the interval is the profile penalised-likelihood interval
    :math:`\{\beta_j: 2(\ell^*(\hat\beta) - \max_{\beta_{-j}} \ell^*(\beta)) \le \chi^2_{1,1-\alpha}\}` and the
    p value the penalised likelihood-ratio test, as ``logistf`` reports them (Heinze & Schemper 2002). A bound
    that the profile never reaches is reported as ``-inf``/``inf``. With no separation and many runs the
    Firth and ML estimates agree (the penalty is :math:`O(1)` against a log-likelihood of order :math:`n`).

    Wald and likelihood intervals are asymptotic; with fewer than 10 failures (or successes) per
    coefficient (Peduzzi et al., 1996) the ``warning`` column says so. Runs are treated as independent:
    no seed grouping is used (a seed effect on failure is not modelled), so runs that share a seed across
    cells make the intervals optimistic if some seeds fail more than others.

    Missing data: runs with a missing ``failed`` flag are dropped (listwise deletion).

    References
    ----------
    .. [1] Albert, A., & Anderson, J. A. (1984). On the existence of maximum likelihood estimates in
       logistic regression models. *Biometrika*, 71(1), 1–10.
    .. [2] Konis, K. (2007). *Linear programming algorithms for detecting separated data in binary
       logistic regression models* (DPhil thesis). University of Oxford.
    .. [3] Firth, D. (1993). Bias reduction of maximum likelihood estimates. *Biometrika*, 80(1), 27–38.
    .. [4] Heinze, G., & Schemper, M. (2002). A solution to the problem of separation in logistic
       regression. *Statistics in Medicine*, 21(16), 2409–2419.
    .. [5] Peduzzi, P., Concato, J., Kemper, E., Holford, T. R., & Feinstein, A. R. (1996). A simulation
       study of the number of events per variable in logistic regression analysis. *Journal of
       Clinical Epidemiology*, 49(12), 1373–1379.
    """
    level = check_confidence(confidence, "failure_model")
    if on_separation not in ("raise", "nan"):
        raise ModelFitError(
            f"failure_model: `on_separation` must be 'raise' or 'nan', but got on_separation={on_separation!r}."
        )
    if method not in ("firth", "ml"):
        raise ModelFitError(f"failure_model: `method` must be 'firth' or 'ml', but got method={method!r}.")
    frame = _failure_frame(data, task, single_task=True, caller="failure_model", extra=["n_layers"])
    name = require_single_task(frame)
    y = frame["failed"].to_numpy(dtype=float)
    n, n_failed = y.size, int(y.sum())
    if n_failed == 0 or n_failed == n:
        which = "no run failed" if n_failed == 0 else "every run failed"
        raise ModelFitError(
            f"failure_model: a logistic model needs both failed and healthy runs, but {which} "
            f"({n_failed} of {n} grid runs of task {name!r}); the failure rate is "
            f"{n_failed / n:.0%} everywhere: report failure_rates (Wilson intervals) instead."
        )
    design, at_size = _failure_design(frame, name)

    notes: list[str] = []
    separation = _separation(design, y)
    if separation is not None and method == "ml":
        message = (
            f"{separation} in task {name!r}: the maximum-likelihood estimates do not exist (they diverge), so no "
            "coefficients, standard errors or p-values are reported; compare cells with failure_rates instead"
        )
        if on_separation == "raise":
            raise ModelFitError(
                f"failure_model: a logistic fit needs overlapping failed and healthy runs, but found {message} "
                "(or pass on_separation='nan' to get NaN rows, or method='firth' for finite estimates)."
            )
        out = pd.DataFrame({"term": TERMS})
        for column in MODEL_COLUMNS[1:-3]:
            out[column] = np.nan
        out["at_train_size"] = at_size
        out["method"] = method
        out["warning"] = message
        return out[MODEL_COLUMNS]
    if separation is not None:
        notes.append(
            f"{separation} in task {name!r}: maximum-likelihood estimates do not exist; Firth's penalised estimates "
            "are finite, but in the separated direction they are set by the penalty, so read the profile interval "
            "rather than the point estimate"
        )

    events = min(n_failed, n - n_failed)
    if events < _MIN_EVENTS_PER_TERM * design.shape[1]:
        notes.append(
            f"only {events} {'failures' if n_failed <= n - n_failed else 'healthy runs'} for {design.shape[1]} "
            f"coefficients (fewer than {_MIN_EVENTS_PER_TERM} per coefficient): "
            + ("intervals and p-values" if method == "firth" else "Wald intervals and p-values")
            + " may be inaccurate"
        )
    fit = firth_table(design, y, level, notes) if method == "firth" else _ml_table(design, y, level, name, notes)
    out = fit.assign(term=TERMS, at_train_size=at_size, method=method, warning="; ".join(dict.fromkeys(notes)))
    out["odds_ratio"] = np.exp(out["estimate"])
    return out[MODEL_COLUMNS]


def _failure_design(frame: pd.DataFrame, name: str) -> tuple[np.ndarray, float]:
    """The design ``[1, s, f, s f]`` of :func:`failure_model` and the size ``2^c`` at which ``s = 0``."""
    if (frame["n_layers"] <= 0).any():
        raise ModelFitError(
            f"failure_model: `n_layers` must be > 0, but got n_layers={int(frame['n_layers'].min())}; "
            "it is the number of transformer blocks of the model."
        )
    log_size = np.log2(frame["train_size"].to_numpy(dtype=float))
    centre = float(np.mean(np.unique(log_size)))
    s = log_size - centre
    f = np.maximum(frame["frozen_layers"].to_numpy(dtype=float), 0.0) / frame["n_layers"].to_numpy(dtype=float)
    design = np.column_stack([np.ones(len(frame)), s, f, s * f])
    n_sizes, n_fractions = np.unique(s).size, np.unique(f).size
    if n_sizes < 2 or n_fractions < 2 or np.linalg.matrix_rank(design) < design.shape[1]:
        raise ModelFitError(
            f"failure_model: the model with an interaction needs at least 2 distinct training sizes and 2 distinct "
            f"frozen fractions, but got {n_sizes} size(s) and {n_fractions} fraction(s) (task {name!r}); "
            "use failure_rates for a single row or column of the grid."
        )
    return design, float(2.0**centre)


def _ml_table(design: np.ndarray, y: np.ndarray, level: float, name: str, notes: list[str]) -> pd.DataFrame:
    """Maximum-likelihood fit (statsmodels GLM) with Wald statistics; appends statsmodels' warnings to ``notes``."""
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = sm.GLM(y, design, family=sm.families.Binomial()).fit()
        except (np.linalg.LinAlgError, ValueError) as err:
            raise ModelFitError(f"failure_model: the logistic fit failed for task {name!r}: {err}.") from err
    for item in caught:
        if issubclass(item.category, (ConvergenceWarning, PerfectSeparationWarning, RuntimeWarning)):
            notes.append(f"statsmodels: {str(item.message).strip()}")
    bounds = np.asarray(result.conf_int(alpha=1.0 - level), dtype=float)
    return pd.DataFrame(
        {
            "estimate": np.asarray(result.params, dtype=float),
            "se": np.asarray(result.bse, dtype=float),
            "ci_low": bounds[:, 0],
            "ci_high": bounds[:, 1],
            "z": np.asarray(result.tvalues, dtype=float),
            "p_val": np.asarray(result.pvalues, dtype=float),
        }
    )


def _separation(design: np.ndarray, y: np.ndarray) -> str | None:
    r"""'complete separation' / 'quasi-complete separation' of binary ``y`` by ``design``, or None if they overlap.

    Konis (2007): with signed rows :math:`a_i = y^*_i x_i`, the MLE exists iff the only :math:`\beta` with
    :math:`A\beta \ge 0` is 0 (``design`` has full column rank). A positive optimum of
    max :math:`1^\top A\beta` subject to :math:`A\beta \ge 0, |\beta_j| \le 1` is a separating direction; it is
    complete when some :math:`\beta` makes every :math:`a_i^\top \beta` positive.
    """
    scale = np.maximum(np.abs(design).max(axis=0), 1.0)
    signed = (np.where(y > 0.5, 1.0, -1.0)[:, None] * design) / scale
    p = signed.shape[1]
    bounds = [(-1.0, 1.0)] * p
    lp = optimize.linprog(-signed.sum(axis=0), A_ub=-signed, b_ub=np.zeros(len(signed)), bounds=bounds, method="highs")
    tol = 1e-7 * len(signed)
    if lp.status != 0 or -lp.fun <= tol:
        return None
    # Complete separation: maximise t subject to A beta >= t, |beta| <= 1, t <= 1.
    c = np.zeros(p + 1)
    c[-1] = -1.0
    a_ub = np.column_stack([-signed, np.ones(len(signed))])
    lp2 = optimize.linprog(c, A_ub=a_ub, b_ub=np.zeros(len(signed)), bounds=[*bounds, (None, 1.0)], method="highs")
    if lp2.status == 0 and -lp2.fun > 1e-9:
        return "complete separation"
    return "quasi-complete separation"

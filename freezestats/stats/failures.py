"""How often fine-tuning collapses to the majority class, and how that depends on freezing and data size.

A run is *failed* when it ends no better than the best constant predictor
(:func:`freezestats.metrics.is_failed_run`). Such runs are frequent on small data sets and are
reported apart from the healthy ones: :func:`failure_rates` gives each cell's failure proportion with a
Wilson interval, :func:`failure_model` a logistic regression of failure on freeze depth and training
size.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd
from scipy import optimize

from freezestats.exceptions import ModelFitError
from freezestats.stats._checks import CELL, check_confidence, prepare, require_single_task

__all__ = ["failure_model", "failure_rates"]

RATE_COLUMNS = [*CELL, "n", "n_failed", "rate", "ci_low", "ci_high"]
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
    "warning",
]
TERMS = ["intercept", "log2_train_size", "frozen_fraction", "log2_train_size:frozen_fraction"]
_MIN_EVENTS_PER_TERM = 10


def failure_rates(data: pd.DataFrame, task: str | None = None, confidence: float = 0.95) -> pd.DataFrame:
    r"""Share of collapsed runs in every cell, with a Wilson score interval.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (one row per run); needs ``role, task, train_size, frozen_layers, failed``.
    task : str or None
        Only this task; None keeps every task.
    confidence : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``task, train_size, frozen_layers``:

        - ``task``, ``train_size``, ``frozen_layers``: the cell.
        - ``n``: runs with a known ``failed`` flag.
        - ``n_failed``: runs that collapsed.
        - ``rate``: ``n_failed / n``.
        - ``ci_low``, ``ci_high``: Wilson score interval for the cell's failure probability.

    Raises
    ------
    ModelFitError
        Empty table, missing columns, no grid rows, unknown ``task``, several models, a ``failed``
        value that is not boolean, or no run with a known ``failed`` flag.

    Notes
    -----
    With :math:`x` failures in :math:`n` runs, :math:`\hat p = x/n` and :math:`z = \Phi^{-1}(1-\alpha/2)`,
    the Wilson interval is

    .. math::

        \frac{\hat p + \frac{z^2}{2n} \pm z \sqrt{\frac{\hat p (1-\hat p)}{n} + \frac{z^2}{4n^2}}}
             {1 + \frac{z^2}{n}}.

    Unlike the Wald interval it stays inside [0, 1] and does not collapse to a point when no run (or
    every run) failed: with 0 failures in 5 runs the 95% interval is [0, 0.43]. Computed with
    :func:`statsmodels.stats.proportion.proportion_confint` (``method="wilson"``); the tests check it
    against the closed form above.

    The interval treats the runs of a cell as independent Bernoulli trials, which they are when
    each run has its own seed. Missing data: runs whose ``failed`` flag is missing are dropped
    (listwise deletion) and not counted in ``n``.

    References
    ----------
    .. [1] Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
       *Journal of the American Statistical Association*, 22(158), 209–212.
    .. [2] Brown, L. D., Cai, T. T., & DasGupta, A. (2001). Interval estimation for a binomial
       proportion. *Statistical Science*, 16(2), 101–133.
    """
    from statsmodels.stats.proportion import proportion_confint

    level = check_confidence(confidence, "failure_rates")
    frame = _failure_frame(data, task, single_task=False, caller="failure_rates")
    out = frame.groupby(CELL, sort=True)["failed"].agg(n="count", n_failed="sum").reset_index()
    out["n"] = out["n"].astype(np.int64)
    out["n_failed"] = out["n_failed"].astype(np.int64)
    out["rate"] = out["n_failed"] / out["n"]
    low, high = proportion_confint(out["n_failed"], out["n"], alpha=1.0 - level, method="wilson")
    out["ci_low"] = np.asarray(low, dtype=float)
    out["ci_high"] = np.asarray(high, dtype=float)
    return out[RATE_COLUMNS]


def failure_model(
    data: pd.DataFrame,
    task: str | None = None,
    confidence: float = 0.95,
    on_separation: Literal["raise", "nan"] = "raise",
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
        Coverage of the Wald intervals, in (0, 1).
    on_separation : {"raise", "nan"}
        What to do when the data are (quasi-)completely separated, so that the maximum-likelihood
        estimates do not exist: ``"raise"`` a :class:`~freezestats.exceptions.ModelFitError` (the
        default), or return the four rows with NaN statistics and the diagnosis in ``warning``.

    Returns
    -------
    pandas.DataFrame
        One row per term, in the order ``intercept, log2_train_size, frozen_fraction,
        log2_train_size:frozen_fraction``:

        - ``term``: the coefficient (see Notes for the covariates).
        - ``estimate``: maximum-likelihood log-odds coefficient.
        - ``se``: its standard error (inverse observed information).
        - ``ci_low``, ``ci_high``: Wald interval, ``estimate ± z_{1-α/2} se``.
        - ``z``: Wald statistic ``estimate / se``.
        - ``p_val``: two-sided p-value of ``z`` under N(0, 1).
        - ``odds_ratio``: ``exp(estimate)`` (for the intercept: the odds of failure of full
          fine-tuning at ``at_train_size``); ``exp(ci_low)``, ``exp(ci_high)`` bound it.
        - ``at_train_size``: the training size at which the intercept and the ``frozen_fraction``
          main effect are evaluated (the geometric mean of the design's distinct sizes).
        - ``warning``: empty string, or the caveats of this fit joined by ``"; "``: few failures
          per coefficient, a convergence warning from statsmodels, or (with ``on_separation="nan"``)
          separation.

    Raises
    ------
    ModelFitError
        As :func:`failure_rates`; several tasks and no ``task``; no failure at all, or every run
        failed (nothing to model: use :func:`failure_rates`); fewer than two distinct training sizes
        or freeze fractions (the interaction is not identified); separation with
        ``on_separation="raise"``.

    Notes
    -----
    The model, fitted to the individual runs (``statsmodels`` GLM, binomial family, logit link), is

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
    that direction and the maximum-likelihood estimate does not exist; an iterative fit stops at
    arbitrary large values with huge standard errors. Firth's penalised likelihood would give finite
    estimates but is not available in statsmodels, so this function does not fit such data:
    separation is detected *before* fitting, exactly, with the linear program of Konis (2007) —
    maximise :math:`\sum_i y^*_i x_i^\top\beta` subject to :math:`y^*_i x_i^\top\beta \ge 0` and
    :math:`|\beta_j| \le 1`, with :math:`y^*_i = \pm 1`; a positive optimum is a separating direction —
    and reported as an error (default) or as NaN rows with a ``warning``.

    Wald intervals and p-values are asymptotic; with fewer than 10 failures (or successes) per
    coefficient (Peduzzi et al., 1996) the ``warning`` column says so. Runs are treated as independent;
    runs that share a seed across cells are not, which makes the standard errors optimistic.

    Missing data: runs with a missing ``failed`` flag are dropped (listwise deletion).

    References
    ----------
    .. [1] Albert, A., & Anderson, J. A. (1984). On the existence of maximum likelihood estimates in
       logistic regression models. *Biometrika*, 71(1), 1–10.
    .. [2] Konis, K. (2007). *Linear programming algorithms for detecting separated data in binary
       logistic regression models* (DPhil thesis). University of Oxford.
    .. [3] Firth, D. (1993). Bias reduction of maximum likelihood estimates. *Biometrika*, 80(1), 27–38.
    .. [4] Peduzzi, P., Concato, J., Kemper, E., Holford, T. R., & Feinstein, A. R. (1996). A simulation
       study of the number of events per variable in logistic regression analysis. *Journal of
       Clinical Epidemiology*, 49(12), 1373–1379.
    """
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    level = check_confidence(confidence, "failure_model")
    if on_separation not in ("raise", "nan"):
        raise ModelFitError(
            f"failure_model: `on_separation` must be 'raise' or 'nan', but got on_separation={on_separation!r}."
        )
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
    if (frame["n_layers"] <= 0).any():
        raise ModelFitError(
            f"failure_model: `n_layers` must be > 0, but got n_layers={int(frame['n_layers'].min())}; "
            "it is the number of transformer blocks of the model."
        )

    log_size = np.log2(frame["train_size"].to_numpy(dtype=float))
    centre = float(np.mean(np.unique(log_size)))
    s = log_size - centre
    f = np.maximum(frame["frozen_layers"].to_numpy(dtype=float), 0.0) / frame["n_layers"].to_numpy(dtype=float)
    design = np.column_stack([np.ones(n), s, f, s * f])
    n_sizes, n_fractions = np.unique(s).size, np.unique(f).size
    if n_sizes < 2 or n_fractions < 2 or np.linalg.matrix_rank(design) < design.shape[1]:
        raise ModelFitError(
            f"failure_model: the model with an interaction needs at least 2 distinct training sizes and 2 distinct "
            f"frozen fractions, but got {n_sizes} size(s) and {n_fractions} fraction(s) (task {name!r}); "
            "use failure_rates for a single row or column of the grid."
        )
    at_size = float(2.0**centre)

    notes: list[str] = []
    separation = _separation(design, y)
    if separation is not None:
        message = (
            f"{separation} in task {name!r}: the maximum-likelihood estimates do not exist (they diverge), so no "
            "coefficients, standard errors or p-values are reported; compare cells with failure_rates instead"
        )
        if on_separation == "raise":
            raise ModelFitError(
                f"failure_model: a logistic fit needs overlapping failed and healthy runs, but found {message} "
                "(or pass on_separation='nan' to get NaN rows)."
            )
        out = pd.DataFrame({"term": TERMS})
        for column in MODEL_COLUMNS[1:-2]:
            out[column] = np.nan
        out["at_train_size"] = at_size
        out["warning"] = message
        return out[MODEL_COLUMNS]

    events = min(n_failed, n - n_failed)
    if events < _MIN_EVENTS_PER_TERM * design.shape[1]:
        notes.append(
            f"only {events} {'failures' if n_failed <= n - n_failed else 'healthy runs'} for {design.shape[1]} "
            f"coefficients (fewer than {_MIN_EVENTS_PER_TERM} per coefficient): Wald intervals and p-values "
            "may be inaccurate"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = sm.GLM(y, design, family=sm.families.Binomial()).fit()
        except (np.linalg.LinAlgError, ValueError) as err:
            raise ModelFitError(f"failure_model: the logistic fit failed for task {name!r}: {err}.") from err
    for item in caught:
        if issubclass(item.category, (ConvergenceWarning, PerfectSeparationWarning, RuntimeWarning)):
            notes.append(f"statsmodels: {str(item.message).strip()}")

    params = np.asarray(result.params, dtype=float)
    se = np.asarray(result.bse, dtype=float)
    bounds = np.asarray(result.conf_int(alpha=1.0 - level), dtype=float)
    out = pd.DataFrame(
        {
            "term": TERMS,
            "estimate": params,
            "se": se,
            "ci_low": bounds[:, 0],
            "ci_high": bounds[:, 1],
            "z": np.asarray(result.tvalues, dtype=float),
            "p_val": np.asarray(result.pvalues, dtype=float),
            "odds_ratio": np.exp(params),
            "at_train_size": at_size,
            "warning": "; ".join(dict.fromkeys(notes)),
        }
    )
    return out[MODEL_COLUMNS]


def _failure_frame(
    data: pd.DataFrame, task: str | None, *, single_task: bool, caller: str, extra: list[str] | None = None
) -> pd.DataFrame:
    """Prepared grid rows with ``failed`` as a clean boolean column (missing flags dropped)."""
    frame = prepare(data, columns=[*CELL, *(extra or []), "failed"], task=task, single_task=single_task, caller=caller)
    raw = frame["failed"]
    known = raw.notna()
    flags = raw[known].map(_as_flag)
    bad = flags.isna()
    if bad.any():
        value = raw[known][bad].iloc[0]
        value = value.item() if isinstance(value, np.generic) else value
        raise ModelFitError(
            f"{caller}: column 'failed' must be boolean (True/False), but got failed={value!r}; "
            "it flags runs that collapsed to the majority class."
        )
    frame = frame[known].copy()
    if frame.empty:
        raise ModelFitError(f"{caller}: column 'failed' must be known for some grid run, but every value is missing.")
    frame["failed"] = flags.astype(bool).to_numpy()
    return frame.reset_index(drop=True)


def _as_flag(value: object) -> bool | None:
    """True/False for a boolean-like value (bool, 0/1, "true"/"false"/"1"/"0"), else None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "false": False, "1": True, "0": False}.get(value.strip().lower())
    if isinstance(value, (int, float, np.integer, np.floating)) and value in (0, 1):
        return bool(value)
    return None


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

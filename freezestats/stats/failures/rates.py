"""How often fine-tuning collapses to the majority class, and how that depends on freezing and data size.

A run is *failed* when it ends no better than the best constant predictor
(:func:`freezestats.tasks.metrics.is_failed_run`). Such runs are frequent on small data sets and are
reported apart from the healthy ones: :func:`failure_rates` gives each cell's failure proportion with a
Wilson interval, :func:`failure_model` a logistic regression of failure on freeze depth and training
size (Firth's penalised likelihood, finite under separation; it lives in
:mod:`freezestats.stats.failures.trend` and is re-exported here).

The runner's ``failed`` flag looks at the final checkpoint only, with a fixed rule. :func:`flag_failures`
re-derives the flag from the stored per-checkpoint counts, for the checkpoint the analysed metric scores
and with a stated rule (an exact binomial test against the majority rate, or a dominant predicted class),
and :func:`~freezestats.stats.failures.summary.failure_summary` puts the failure rate of each cell beside the
mean with and without the failed runs.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import CELL, _failure_frame, check_confidence
from freezestats.stats.failures.trend import failure_model

__all__ = ["failure_model", "failure_rates", "flag_failures"]

RATE_COLUMNS = [*CELL, "n", "n_failed", "rate", "ci_low", "ci_high"]
CHECKPOINT_COLUMNS = {
    "best": ("n_correct_best", "n_eval", "top_class_share_best"),
    "heldout": ("n_correct_heldout", "n_eval_heldout", "top_class_share_heldout"),
    "final": ("n_correct", "n_eval", "top_class_share_final"),
}
"""For each checkpoint: its correct count, the number of items it was scored on, its top predicted-class share."""
_SHARE_TOL = 1e-12


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

    level = check_confidence(confidence, "failure_rates")
    frame = _failure_frame(data, task, single_task=False, caller="failure_rates")
    out = frame.groupby(CELL, sort=True)["failed"].agg(n="count", n_failed="sum").reset_index()
    return with_wilson_rate(out, level, "rate")[RATE_COLUMNS]


def with_wilson_rate(counts: pd.DataFrame, level: float, rate: str) -> pd.DataFrame:
    """``counts`` (its ``n`` and ``n_failed`` per cell) with the failure proportion in column ``rate`` and its
    Wilson interval in ``ci_low, ci_high`` (statsmodels' ``proportion_confint``); shared by the rates table and
    :func:`~freezestats.stats.failures.summary.failure_summary`, so both intervals are the same."""
    from statsmodels.stats.proportion import proportion_confint

    out = counts.astype({"n": np.int64, "n_failed": np.int64})
    out[rate] = out["n_failed"] / out["n"]
    low, high = proportion_confint(out["n_failed"], out["n"], alpha=1.0 - level, method="wilson")
    return out.assign(ci_low=np.asarray(low, dtype=float), ci_high=np.asarray(high, dtype=float))


def flag_failures(
    table: pd.DataFrame,
    checkpoint: Literal["best", "heldout", "final"] = "best",
    rule: Literal["binomial", "dominant_class"] = "binomial",
    alpha: float = 0.05,
    dominant_share: float = 0.95,
    majority_rate: float | pd.Series | None = None,
) -> pd.Series:
    r"""Which runs failed, judged on the checkpoint the analysed metric scores, by a stated rule.

    The runner's ``failed`` flag asks whether the *final* checkpoint beats the majority baseline at all; a run
    that scores one item above the baseline passes, and a run whose final checkpoint collapsed counts as failed
    even when the analysed metric (``best_dev``) comes from a healthy earlier checkpoint. This function asks
    the question of the right checkpoint, with a rule that accounts for the evaluation set's size.

    Parameters
    ----------
    table : pandas.DataFrame
        The results table (one row per run) with the runner's per-checkpoint counts: ``n_correct`` (final
        checkpoint, whole validation set), ``n_correct_best`` (whole set), ``n_correct_heldout`` with
        ``n_eval_heldout`` (the score half), ``n_eval``, ``majority_baseline`` (for ``rule="binomial"``) and
        ``top_class_share_best`` / ``_heldout`` / ``_final`` (for ``rule="dominant_class"``).
    checkpoint : {"best", "heldout", "final"}
        The checkpoint to judge. Use the one the analysed metric scores: ``best_dev`` -> ``"best"``,
        ``heldout`` -> ``"heldout"``, ``final_dev`` -> ``"final"``.
    rule : {"binomial", "dominant_class"}
        ``"binomial"``: the run fails when a one-sided exact binomial test does not show its accuracy above the
        majority rate at level ``alpha``. ``"dominant_class"``: the run fails when one predicted class takes at
        least ``dominant_share`` of the predictions.
    alpha : float
        Level of the binomial test, in (0, 1).
    dominant_share : float
        Threshold of the dominant-class rule, in (0, 1]; a share exactly equal to it fails.
    majority_rate : float, pandas.Series or None
        The accuracy of the constant majority-class predictor, for ``rule="binomial"``: None (default) takes the
        table's ``majority_baseline`` column, which is that accuracy only when the task's ``metric`` is
        ``"accuracy"`` (for MCC it is 0); pass the rate for other metrics (a number, or a Series aligned with
        ``table``).

    Returns
    -------
    pandas.Series
        Nullable boolean (``"boolean"`` dtype) with ``table``'s index, named ``failed_<checkpoint>``: True for a
        failed run, False for a healthy one, ``<NA>`` where the checkpoint's counts (or share) are missing
        (regression tasks, runs from before the runner stored them, search trials without predictions).

    Raises
    ------
    ModelFitError
        ``table`` is not a DataFrame or lacks the columns the rule needs, an unknown ``checkpoint`` or ``rule``,
        ``alpha`` or ``dominant_share`` out of range, counts that are not whole numbers in ``0..n``, a majority
        rate outside [0, 1], or ``majority_baseline`` of a non-accuracy metric with no ``majority_rate``.

    Notes
    -----
    *Binomial rule.* With :math:`x` correct out of :math:`n` items and majority rate :math:`p_0`, the p value is
    :math:`P(X \ge x)` for :math:`X \sim \mathrm{Bin}(n, p_0)` (``scipy.stats.binomtest(x, n, p_0,
    alternative="greater")``), and the run is healthy when it is below ``alpha``. The items of the validation
    set are the "trials": a run is healthy when its accuracy could not plausibly be the majority predictor's
    with different validation items. On SST-2 (:math:`n = 872`, :math:`p_0 = 444/872`) that takes 469 correct
    (53.8%) at ``alpha = 0.05``, where the runner's rule takes 445. For ``checkpoint="heldout"`` the counts are
    over the score half (``n_eval_heldout``) and the rate is still ``majority_baseline``, the majority share of
    the whole validation set: the table does not store the share of the half, which the random split keeps
    close to it.

    *Dominant-class rule.* Collapse shows in the predictions before it shows in the accuracy: a model that
    predicts one class for 95% of the items has learned little whatever its accuracy. The share is compared
    with a tolerance of 1e-12, so 836/880 = 0.95 fails at ``dominant_share=0.95``.
    """
    if not isinstance(table, pd.DataFrame):
        raise ModelFitError(
            f"flag_failures: `table` must be a pandas DataFrame (the results table), but got {type(table).__name__}."
        )
    if checkpoint not in CHECKPOINT_COLUMNS:
        raise ModelFitError(
            f"flag_failures: `checkpoint` must be one of {list(CHECKPOINT_COLUMNS)}, but got checkpoint={checkpoint!r}."
        )
    correct_col, n_col, share_col = CHECKPOINT_COLUMNS[checkpoint]
    if rule == "binomial":
        _check_open_unit(alpha, "alpha", "flag_failures")
        _require(table, [correct_col, n_col] + ([] if majority_rate is not None else ["majority_baseline"]))
        flags = _binomial_failures(table, correct_col, n_col, alpha, majority_rate)
    elif rule == "dominant_class":
        if isinstance(dominant_share, bool) or not 0.0 < _as_float(dominant_share) <= 1.0:
            raise ModelFitError(
                f"flag_failures: `dominant_share` must be in (0, 1], but got dominant_share={dominant_share!r}."
            )
        _require(table, [share_col])
        share = pd.to_numeric(table[share_col], errors="coerce").astype(float)
        flags = pd.Series(pd.NA, index=table.index, dtype="boolean")
        known = share.notna()
        flags[known] = (share[known] >= float(dominant_share) - _SHARE_TOL).to_numpy()
    else:
        raise ModelFitError(f"flag_failures: `rule` must be 'binomial' or 'dominant_class', but got rule={rule!r}.")
    return flags.rename(f"failed_{checkpoint}")


def _as_float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _check_open_unit(value: float, name: str, caller: str) -> None:
    if isinstance(value, bool) or not 0.0 < _as_float(value) < 1.0:
        raise ModelFitError(f"{caller}: `{name}` must be in (0, 1), but got {name}={value!r}.")


def _require(table: pd.DataFrame, columns: list[str]) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ModelFitError(
            f"flag_failures: the results table must have the columns {missing}, but they are missing; tables "
            "written before the runner stored per-checkpoint counts lack them (use the `failed` column instead)."
        )


def _majority_rates(table: pd.DataFrame, majority_rate: float | pd.Series | None) -> pd.Series:
    """The majority-class accuracy of every row of ``table``, validated to lie in [0, 1]."""
    if majority_rate is None:
        rate = pd.to_numeric(table["majority_baseline"], errors="coerce").astype(float)
        if "metric" in table.columns:
            other = rate.notna() & table["metric"].notna() & (table["metric"].astype(str) != "accuracy")
            if other.any():
                metric = str(table.loc[other, "metric"].iloc[0])
                raise ModelFitError(
                    f"flag_failures: rule='binomial' needs the majority class's accuracy, but majority_baseline of "
                    f"metric={metric!r} rows is that metric's score; pass majority_rate= or use "
                    "rule='dominant_class'."
                )
    elif isinstance(majority_rate, pd.Series):
        if not table.index.isin(majority_rate.index).all():
            raise ModelFitError(
                "flag_failures: `majority_rate` must have a value for every row of `table` (aligned on the index), "
                "but some rows are missing from it."
            )
        rate = pd.to_numeric(majority_rate.reindex(table.index), errors="coerce").astype(float)
    else:
        rate = pd.Series(_as_float(majority_rate), index=table.index)
        if rate.isna().any():
            raise ModelFitError(f"flag_failures: `majority_rate` must be a number, but got {majority_rate!r}.")
    bad = rate.notna() & ((rate < 0) | (rate > 1))
    if bad.any():
        raise ModelFitError(
            f"flag_failures: the majority rate must be an accuracy in [0, 1], but got {float(rate[bad].iloc[0])!r}."
        )
    return rate


def _binomial_failures(
    table: pd.DataFrame, correct_col: str, n_col: str, alpha: float, majority_rate: float | pd.Series | None
) -> pd.Series:
    """Failed when ``binomtest(correct, n, rate, alternative="greater").pvalue >= alpha``; NA where unknown."""
    correct = pd.to_numeric(table[correct_col], errors="coerce").astype(float)
    total = pd.to_numeric(table[n_col], errors="coerce").astype(float)
    rate = _majority_rates(table, majority_rate)
    known = correct.notna() & total.notna() & rate.notna()
    bad = known & (
        (correct != np.round(correct)) | (total != np.round(total)) | (total < 1) | (correct < 0) | (correct > total)
    )
    if bad.any():
        row = bad[bad].index[0]
        raise ModelFitError(
            f"flag_failures: `{correct_col}` must be a whole number of correct items in 0..{n_col}, but got "
            f"{correct_col}={correct[row]!r} with {n_col}={total[row]!r} (row {row!r})."
        )
    flags = pd.Series(pd.NA, index=table.index, dtype="boolean")
    cache: dict[tuple[int, int, float], bool] = {}
    for row in known[known].index:
        key = (int(correct[row]), int(total[row]), float(rate[row]))
        if key not in cache:
            cache[key] = bool(stats.binomtest(key[0], key[1], key[2], alternative="greater").pvalue >= alpha)
        flags[row] = cache[key]
    return flags

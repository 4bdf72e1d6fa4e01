"""Per-cell descriptive statistics and the spread across seeds.

The 2020 blog post "How many layers of my BERT model should I freeze?" reports, per task, training
size and freeze depth, the mean, median, standard deviation, minimum and maximum of the best
validation accuracy over 5 seeds, and claims that freezing layers does not reduce the instability
across seeds. :func:`cell_summary` computes the same statistics, :func:`seed_spread` puts a confidence
interval on each cell's standard deviation, and :func:`spread_test` tests whether the spread differs
between freeze depths at a fixed training size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import CELL, check_confidence, prepare
from freezestats.stats.inference.multitest import holm

__all__ = ["cell_summary", "seed_spread", "spread_test", "variance_homogeneity"]

SUMMARY_COLUMNS = [*CELL, "n", "mean", "median", "std", "min", "max"]
SPREAD_COLUMNS = [*CELL, "n", "std", "ci_low", "ci_high"]
_MIN_GROUP = 3
_TEST_STATS = ["statistic", "df_between", "df_within", "p_val", "p_holm", "n_groups", "n"]


def cell_summary(data: pd.DataFrame, response: str = "best_dev", task: str | None = None) -> pd.DataFrame:
    r"""The blog's per-cell statistics of one response: n, mean, median, SD, min and max over runs.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (long format, one row per fine-tuning run), as written by
        ``freezestats export``. Needs ``role, task, train_size, frozen_layers`` and ``response``.
    response : str
        Per-run score to summarise: ``"best_dev"`` (the blog's statistic: best validation score during
        training, biased upwards because the same set picks the checkpoint), ``"final_dev"``,
        ``"heldout"`` or a ``final_<metric>`` column.
    task : str or None
        Summarise only this task; None summarises every task of the table.

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``task, train_size, frozen_layers``:

        - ``task``, ``train_size``, ``frozen_layers``: the cell.
        - ``n``: number of runs with a finite response.
        - ``mean``, ``median``: centre of the runs' responses.
        - ``std``: sample standard deviation (``ddof=1``); NaN when ``n < 2``.
        - ``min``, ``max``: extremes of the runs' responses.

    Raises
    ------
    ModelFitError
        Empty table, missing columns, unknown or non-numeric ``response``, no grid rows, unknown
        ``task``, several models.

    Notes
    -----
    With responses :math:`y_1, \dots, y_n` of the runs (seeds and subset draws) of a cell,

    .. math:: \bar y = \frac1n \sum_i y_i, \qquad s = \sqrt{\frac{1}{n-1} \sum_i (y_i - \bar y)^2}.

    The blog does not state its convention; ``ddof=1`` is pandas' default, with which such tables are
    usually made. Its rounded appendix figures cannot settle the question: for most cells no set of five
    scores ``k / n_eval`` reproduces all five printed statistics under either convention.

    Only ``role == "grid"`` rows with ``state == "complete"`` are used. Missing data: runs whose
    response is missing or non-finite are dropped (listwise deletion) and not counted in ``n``.
    Collapsed runs (``failed``) are *kept*: they are genuine outcomes of the protocol, and the blog's
    figures include them (its minima sit at the majority baseline).

    References
    ----------
    .. [1] "How many layers of my BERT model should I freeze?" (blog post, 2020), appendix tables;
       shipped as ``data/reference/blog2020_roberta_base.csv``.
    """
    frame = prepare(data, columns=CELL, response=response, task=task, caller="cell_summary")
    grouped = frame.groupby(CELL, sort=True)[response]
    out = grouped.agg(["count", "mean", "median", "std", "min", "max"]).reset_index()
    out = out.rename(columns={"count": "n"})
    out["n"] = out["n"].astype(np.int64)
    return out[SUMMARY_COLUMNS]


def seed_spread(data: pd.DataFrame, response: str, task: str | None = None, confidence: float = 0.95) -> pd.DataFrame:
    r"""Standard deviation across runs of every cell, with a chi-square confidence interval.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (one row per run); needs ``role, task, train_size, frozen_layers`` and
        ``response``.
    response : str
        Per-run score: ``"best_dev"``, ``"final_dev"``, ``"heldout"`` or a ``final_<metric>`` column.
    task : str or None
        Only this task; None keeps every task.
    confidence : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``task, train_size, frozen_layers``:

        - ``task``, ``train_size``, ``frozen_layers``: the cell.
        - ``n``: number of runs with a finite response.
        - ``std``: sample standard deviation (``ddof=1``).
        - ``ci_low``, ``ci_high``: the chi-square confidence interval for the population SD.

        ``std``, ``ci_low`` and ``ci_high`` are NaN in a cell with fewer than 2 runs.

    Raises
    ------
    ModelFitError
        As :func:`cell_summary`, and if no cell has at least 2 runs (a spread needs two).

    Notes
    -----
    If the responses of a cell are normal, :math:`(n-1)s^2/\sigma^2 \sim \chi^2_{n-1}`, so

    .. math::

        \left[\, s\sqrt{\frac{n-1}{\chi^2_{1-\alpha/2,\,n-1}}},\;
                  s\sqrt{\frac{n-1}{\chi^2_{\alpha/2,\,n-1}}} \,\right]

    covers :math:`\sigma` with probability :math:`1-\alpha`. **The interval assumes normality and
    is not robust to it**: its coverage depends on the kurtosis of the responses, and a cell that
    mixes collapsed runs (at the majority baseline) with healthy ones is bimodal, so read its interval
    as indicative only. With 5 seeds the interval is wide (about 0.6 s to 2.9 s). A cell whose runs
    all agree (e.g. every run collapsed to the majority class) has ``s = 0`` and the degenerate
    interval [0, 0].

    Missing data: listwise deletion of runs with a missing response; a cell left with fewer than two
    runs gets NaN rather than an error, so that one crashed trial does not block the whole table.

    References
    ----------
    .. [1] Sheskin, D. J. (2011). *Handbook of Parametric and Nonparametric Statistical Procedures*
       (5th ed.), Test 3 (single-sample chi-square test for a population variance).
    """
    level = check_confidence(confidence, "seed_spread")
    frame = prepare(data, columns=CELL, response=response, task=task, caller="seed_spread")
    out = frame.groupby(CELL, sort=True)[response].agg(["count", "std"]).reset_index()
    out = out.rename(columns={"count": "n"})
    out["n"] = out["n"].astype(np.int64)
    if (out["n"] < 2).all():
        raise ModelFitError(
            f"seed_spread: a standard deviation needs at least 2 runs per cell, but every cell has "
            f"n={int(out['n'].max())} run(s); run more seeds (grid.seeds) or subset draws."
        )
    dof = (out["n"] - 1).to_numpy(dtype=float)
    alpha = 1.0 - level
    with np.errstate(divide="ignore", invalid="ignore"):
        dof_ok = np.where(dof >= 1, dof, np.nan)
        chi_upper = stats.chi2.ppf(1.0 - alpha / 2.0, dof_ok)
        chi_lower = stats.chi2.ppf(alpha / 2.0, dof_ok)
        s = out["std"].to_numpy(dtype=float)
        out["ci_low"] = s * np.sqrt(dof_ok / chi_upper)
        out["ci_high"] = s * np.sqrt(dof_ok / chi_lower)
    out.loc[out["n"] < 2, ["std", "ci_low", "ci_high"]] = np.nan
    return out[SPREAD_COLUMNS]


def spread_test(data: pd.DataFrame, response: str, task: str | None = None, by: str = "frozen_layers") -> pd.DataFrame:
    r"""Brown–Forsythe test of whether the spread across runs differs between freeze depths.

    For every training size (the default), the runs are grouped by freeze depth and a
    Brown–Forsythe test (Levene's test with median centring) compares the groups' spreads. The blog
    claims that freezing layers does not reduce the instability across seeds; this is the test of
    that claim, one training size at a time.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (one row per run); needs ``role, task, train_size, frozen_layers`` and
        ``response``.
    response : str
        Per-run score: ``"best_dev"``, ``"final_dev"``, ``"heldout"`` or a ``final_<metric>`` column.
    task : str or None
        The task to analyse; required when the table holds several tasks.
    by : {"frozen_layers", "train_size"}
        The factor whose levels are compared. The test is repeated within every level of the other
        factor, which gives the output's first column (``train_size`` for the default).

    Returns
    -------
    pandas.DataFrame
        One row per level of the other factor (``train_size`` by default), sorted:

        - ``train_size`` (or ``frozen_layers`` when ``by="train_size"``): the stratum tested.
        - ``statistic``: the Brown–Forsythe :math:`W` (an F statistic).
        - ``df_between``: :math:`k - 1`, with :math:`k` the number of groups.
        - ``df_within``: :math:`N - k`, with :math:`N` the number of runs in those groups.
        - ``p_val``: upper tail of :math:`F(k-1, N-k)` at ``statistic`` (uncorrected).
        - ``p_holm``: ``p_val`` adjusted by Holm's step-down method across the rows of the table.
        - ``n_groups``: :math:`k`, the groups with at least 3 runs (smaller groups are left out, see Notes).
        - ``n``: :math:`N`.

        A stratum with fewer than 2 usable groups has NaN statistics (and is left out of the Holm
        adjustment). ``statistic`` is NaN (0/0) when every run of the stratum equals its group's median.

    Raises
    ------
    ModelFitError
        As :func:`cell_summary`; several tasks and no ``task``; an unknown ``by``; no stratum with at
        least two groups of at least three runs.

    Notes
    -----
    With :math:`z_{ij} = |y_{ij} - \tilde y_j|` the absolute deviation of run :math:`i` of group
    :math:`j` from its group median, :math:`W` is the one-way ANOVA F statistic of the :math:`z_{ij}`:

    .. math::

        W = \frac{N-k}{k-1} \,
            \frac{\sum_j n_j (\bar z_{j} - \bar z)^2}{\sum_j \sum_i (z_{ij} - \bar z_{j})^2}.

    The deviations are taken *within each cell*, so differences in location between freeze depths
    (or training sizes) are removed before spreads are compared: a depth that scores lower is not
    thereby "more variable". Median centring keeps the test's level close to nominal for skewed or
    heavy-tailed responses (Brown & Forsythe, 1974), which matters here because collapsed runs make
    cells bimodal. Computed with :func:`scipy.stats.levene` (``center="median"``).

    Read a large p-value with care: with 5 runs per cell the test has little power, so it does not
    show that spreads are equal. Cells in which every run collapsed to the majority class have a spread
    near 0 and can drive a rejection on their own; consider excluding fully frozen depths, or testing
    ``failed`` separately (:func:`freezestats.stats.failures.rates.failure_model`). Runs are treated as
    independent, although runs that share a seed and subset draw across depths are not.

    Missing data: listwise deletion of runs with a missing response. Groups with fewer than three
    runs are left out: one run lies on its own median (:math:`z = 0`), and the two runs of a pair
    lie at the same distance (half their range) from their median, so such a group has no
    within-group variation of :math:`z` and would inflate :math:`W` without bound.

    References
    ----------
    .. [1] Brown, M. B., & Forsythe, A. B. (1974). Robust tests for the equality of variances.
       *Journal of the American Statistical Association*, 69(346), 364–367.
    .. [2] Levene, H. (1960). Robust tests for equality of variances. In *Contributions to Probability
       and Statistics*, 278–292. Stanford University Press.
    .. [3] Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian
       Journal of Statistics*, 6(2), 65–70.
    """
    if by not in ("frozen_layers", "train_size"):
        raise ModelFitError(
            f"spread_test: `by` must be 'frozen_layers' or 'train_size', but got by={by!r}; "
            "it names the factor whose levels are compared."
        )
    stratum = "train_size" if by == "frozen_layers" else "frozen_layers"
    frame = prepare(data, columns=CELL, response=response, task=task, single_task=True, caller="spread_test")
    rows = []
    for level, part in frame.groupby(stratum, sort=True):
        groups = [g[response].to_numpy(dtype=float) for _, g in part.groupby(by, sort=True)]
        groups = [g for g in groups if g.size >= _MIN_GROUP]
        k = len(groups)
        n = int(sum(g.size for g in groups))
        row = {stratum: int(level), "n_groups": k, "n": n}
        if k >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                result = stats.levene(*groups, center="median")
            row.update(statistic=float(result.statistic), df_between=float(k - 1), df_within=float(n - k))
            row["p_val"] = float(result.pvalue)
        else:
            row.update(statistic=np.nan, df_between=np.nan, df_within=np.nan, p_val=np.nan)
        rows.append(row)
    out = pd.DataFrame(rows)
    if (out["n_groups"] < 2).all():
        raise ModelFitError(
            f"spread_test: comparing spreads needs, within some {stratum}, at least 2 {by} levels with at least "
            f"{_MIN_GROUP} runs each, but the largest number of such levels is {int(out['n_groups'].max())}; "
            "run more seeds (grid.seeds)."
        )
    out["p_holm"] = holm(out["p_val"].to_numpy(dtype=float))
    out["n_groups"] = out["n_groups"].astype(np.int64)
    out["n"] = out["n"].astype(np.int64)
    return out[[stratum, *_TEST_STATS]]


def variance_homogeneity(data: pd.DataFrame, response: str) -> pd.DataFrame:
    """Brown–Forsythe test that all (frozen_layers, train_size) cells share one residual variance.

    The mixed and OLS models assume they do; fine-tuning runs often break it (collapsed cells have no
    spread, small-data cells a lot). Cells with fewer than 3 runs are left out (with 2 runs both absolute
    deviations from the median are equal, so they carry no information on spread).

    Returns one row: ``statistic, p_val, n_groups, n, min_sd, max_sd``.
    """
    groups = [g[response].to_numpy(dtype=float) for _, g in data.groupby(["frozen_layers", "train_size"])]
    groups = [g[~pd.isna(g)] for g in groups]
    usable = [g for g in groups if len(g) >= 3]
    if len(usable) < 2:
        raise ModelFitError(
            f"checking equal variances needs at least 2 cells with >= 3 runs each, but {len(usable)} cell(s) have "
            "that many; run more seeds (grid.seeds)."
        )
    sds = [float(g.std(ddof=1)) for g in usable]
    if max(sds) == 0:
        raise ModelFitError("every cell has zero spread; there is no variance to compare.")
    statistic, p_val = stats.levene(*usable, center="median")
    return pd.DataFrame(
        [
            {
                "statistic": float(statistic),
                "p_val": float(p_val),
                "n_groups": len(usable),
                "n": int(sum(len(g) for g in usable)),
                "min_sd": min(sds),
                "max_sd": max(sds),
            }
        ]
    )

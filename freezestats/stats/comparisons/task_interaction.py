r"""Does the effect of freezing depend on the task? The task × freezing test in the pooled model of all tasks.

Kept apart from :mod:`.pooled_tasks`, which builds and fits that model: this module only compares it with the
model without the task × freezing terms, by a Wald F test of the REML fit (default), a likelihood ratio, or a
parametric bootstrap of the likelihood ratio.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.comparisons.pooled_tasks import (
    _FULL,
    _NO_TASK_BY_FREEZE,
    PooledFit,
    _model,
    _prepare,
    _random_terms,
    fit_pooled,
)
from freezestats.stats.inference.ftest import bootstrap_lrt, lrt, lrt_method, result_row, wald_f_test

__all__ = ["task_interaction_test"]

_TEST = "task:frozen_layers (+ task:frozen_layers:train_size)"
_METHODS = ("F", "lrt", "bootstrap")


def _task_by_freeze(names: list[str]) -> list[str]:
    """The coefficients the reduced model sets to zero: every term with both a task and a frozen_layers part."""
    return [n for n in names if "task[" in n and "frozen_layers[" in n]


def task_interaction_test(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    method: str = "F",
    standardize: bool = False,
    include_failed: bool = True,
    n_boot: int = 1000,
    rng: int | np.random.Generator | None = 0,
    progress: Callable[[int, int], object] | None = None,
    fit: PooledFit | None = None,
) -> pd.DataFrame:
    r"""Does the effect of freezing (at each size) differ between tasks?

    :math:`H_0`: every ``task × frozen_layers`` and ``task × frozen_layers × train_size`` coefficient is 0,
    i.e. the model ``task * train_size + frozen_layers * train_size`` (each task keeps its own size profile,
    the freezing effects at each size are shared), against the pooled model of :func:`fit_pooled`.

    Parameters
    ----------
    data, response, standardize, include_failed
        As for :func:`fit_pooled`.
    method
        ``"F"`` (default): Wald F test of those coefficients in the REML fit, with Satterthwaite's denominator
        df (:func:`freezestats.stats.inference.ftest.wald_f_test`); one fit. ``"lrt"``: :math:`\chi^2` likelihood-ratio
        test of ML fits of the two models (same variance structure); anti-conservative with few seeds and 30
        coefficients. ``"bootstrap"``: the likelihood ratio referred to ``n_boot`` parametric-bootstrap draws
        from the reduced model (``progress(done, n_boot)`` after each; two ML fits per draw).
    n_boot, rng, progress
        For ``method="bootstrap"``.
    fit
        The REML :func:`fit_pooled` of the same table, when at hand (``method="F"`` then fits nothing).

    Returns
    -------
    pandas.DataFrame
        One row: ``test, f_stat, num_df, den_df, p_val, method, lr_stat, df, llf_full, llf_reduced,
        standardized``; the F columns are NaN for the likelihood-ratio methods and the LR columns for the F
        test. ``df`` = ``num_df`` = the number of coefficients tested, :math:`(T-1)(K-1)N`.
    """
    if method not in _METHODS:
        raise ModelFitError(f"`method` must be one of {list(_METHODS)}, but got method={method!r}.")
    if method == "F":
        if fit is None:
            fit = fit_pooled(data, response, include_failed=include_failed, standardize=standardize)
        names = _task_by_freeze(list(fit.design_info.column_names))
        f = wald_f_test(fit, names, test=_TEST).iloc[0]
        row = result_row(
            _TEST,
            f_stat=f["f_stat"],
            num_df=f["num_df"],
            den_df=f["den_df"],
            p_val=f["p_val"],
            method=f["method"] + (", responses z-scored per task" if fit.standardized else ""),
        )
        return row.assign(standardized=fit.standardized)
    pooled = _prepare(data, response, include_failed, standardize)
    random = _random_terms(pooled)
    full, _ = _model(pooled, _FULL, random)
    reduced, _ = _model(pooled, _NO_TASK_BY_FREEZE, random)
    if method == "lrt":
        out = lrt(full, reduced)
    else:
        out = bootstrap_lrt(full, reduced, n_boot=n_boot, rng=rng, progress=progress)
    label = lrt_method(method, out.get("n_boot"))
    row = result_row(
        _TEST,
        num_df=out["df"],
        p_val=out["p_val"],
        method=label + (", responses z-scored per task" if pooled.standardized else ""),
        lr_stat=out["lr_stat"],
        llf_full=out["llf_full"],
        llf_reduced=out["llf_reduced"],
    )
    return row.assign(standardized=pooled.standardized)

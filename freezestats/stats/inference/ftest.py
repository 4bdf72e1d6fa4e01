r"""Tests of several fixed effects at once: Wald F with Satterthwaite's df, LRT and its parametric bootstrap.

With 5 seeds, the :math:`\chi^2` reference of a likelihood-ratio test of 24-30 interaction coefficients is
anti-conservative: the test treats the variances as known, and a per-size model estimates one residual variance
from the 4 seed-degrees-of-freedom-ish spread of each train size. The default test here is therefore the Wald
F test of :math:`H_0: L\beta = 0` (``q`` rows),

.. math:: F = (L\hat\beta)' (L C L')^{-1} (L\hat\beta) / q, \qquad C = (X'\hat V^{-1}X)^{-1},

referred to :math:`F(q, \nu)` with :math:`\nu` by lmerTest's method for multi-df contrasts (Kuznetsova et al.
2017; Fai & Cornelius 1996): diagonalise :math:`L C L' = P D P'`, compute Satterthwaite's df :math:`\nu_m` of
each of the ``q`` independent t statistics :math:`(P'L)_m \hat\beta / \sqrt{d_m}`, and match the mean of their
squares, :math:`E = \sum_m \nu_m/(\nu_m - 2)`, to that of an :math:`F(q, \nu)`: :math:`\nu = 2E/(E - q)`.
As lmerTest does, :math:`\nu = 2` when some :math:`\nu_m \le 2` (the mean of :math:`F` is then infinite, and
the rule is conservative; SAS instead sums over :math:`\nu_m > 2` only), the mean of the :math:`\nu_m` when
they are all equal, and directions with :math:`d_m \le \sqrt{\epsilon}\, d_1` are dropped (a rank-deficient
:math:`L`).

The module also holds the machinery of the likelihood-ratio tests that compare two models of the same
variance structure fitted by :mod:`freezestats.stats.models.reml` (:class:`ComponentModel`, :func:`lrt`,
:func:`bootstrap_lrt`), used by :func:`freezestats.stats.interaction_test` and
:func:`freezestats.stats.task_interaction_test`.

References
----------
Kuznetsova, A., Brockhoff, P. B. & Christensen, R. H. B. (2017). lmerTest package: tests in linear mixed effects
models. *Journal of Statistical Software* 82(13).
Fai, A. H.-T. & Cornelius, P. L. (1996). Approximate F-tests of multiple degree of freedom hypotheses in
generalized least squares analyses of unbalanced split-plot experiments. *J. Statist. Comput. Simul.* 54.
Halekoh, U. & Højsgaard, S. (2014). A Kenward-Roger approximation and parametric bootstrap methods for tests in
linear mixed models: the R package pbkrtest. *Journal of Statistical Software* 59(9).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import _design, _Prepared
from freezestats.stats.models.reml import Component, RemlFit, fit_components

__all__ = [
    "TEST_COLUMNS",
    "ComponentModel",
    "bootstrap_lrt",
    "f_test_ddf",
    "grouped_model",
    "lrt",
    "lrt_method",
    "result_row",
    "wald_f_test",
]

TEST_COLUMNS: tuple[str, ...] = (
    "test",
    "f_stat",
    "num_df",
    "den_df",
    "p_val",
    "method",
    "lr_stat",
    "df",
    "llf_full",
    "llf_reduced",
)
"""The columns of every multi-coefficient test table (F, LRT or bootstrap; the others' columns are NaN)."""

F_METHOD = "F (Satterthwaite)"
LRT_METHOD = "LRT (chi-square, ML)"

Progress = Callable[[int, int], object]


# --------------------------------------------------------------------------------------------------------------
# Wald F test


def f_test_ddf(nu: Sequence[float] | np.ndarray, tol: float = 1e-8) -> float:
    r"""Denominator df of an F statistic that averages ``q`` independent squared t statistics with df ``nu``.

    lmerTest's ``get_Fstat_ddf``: ``nu`` itself for one statistic, the mean when all are equal (to ``tol``),
    2 when any :math:`\nu_m \le 2`, else :math:`2E/(E - q)` with :math:`E = \sum \nu_m/(\nu_m - 2)` (an infinite
    :math:`\nu_m` adds 1 to :math:`E`).
    """
    nu = np.asarray(nu, dtype=float)
    if nu.size == 0:
        return math.nan
    if nu.size == 1:
        return float(nu[0])
    if np.all(np.isinf(nu)) or np.all(np.abs(np.diff(nu)) < tol):
        return float(np.mean(nu))
    if np.any(nu <= 2):
        return 2.0
    ratio = np.where(np.isinf(nu), 1.0, nu / np.where(np.isinf(nu), 1.0, nu - 2))
    e = float(np.sum(ratio))
    return 2 * e / (e - nu.size)


def _parts(fit: object) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], np.ndarray], str]:
    """Estimates, their covariance, the per-row df rule and its name, from any fit this package makes."""
    if isinstance(fit, RemlFit):
        return fit.beta, fit.cov_beta, fit.satterthwaite_df, "satterthwaite"
    try:
        beta = np.asarray(fit.params, dtype=float)  # type: ignore[attr-defined]
        cov = np.asarray(fit.cov_params, dtype=float)  # type: ignore[attr-defined]
        df_rule = fit.contrast_df  # type: ignore[attr-defined]
    except AttributeError as err:
        raise ModelFitError(
            f"wald_f_test needs a fit with estimates, their covariance and a df rule (a RemlFit, MixedFit, "
            f"PooledFit or OlsFit), but got {type(fit).__name__}."
        ) from err
    return beta, cov, df_rule, str(getattr(fit, "df_method", "satterthwaite"))


def _column_names(fit: object) -> list[str] | None:
    info = getattr(fit, "design_info", None)
    if info is not None:
        return list(info.column_names)
    names = getattr(fit, "column_names", None)
    return list(names) if names is not None else None


def _hypothesis(fit: object, hypothesis: np.ndarray | Sequence[str], p: int) -> np.ndarray:
    """``L`` as a q x p matrix; a list of coefficient names selects those coefficients (one row each)."""
    if isinstance(hypothesis, str):
        hypothesis = [hypothesis]
    if len(hypothesis) and all(isinstance(h, str) for h in hypothesis):
        names = _column_names(fit)
        if names is None:
            raise ModelFitError(
                f"wald_f_test was given coefficient names, but the {type(fit).__name__} has no column names; "
                "pass L as a matrix instead."
            )
        unknown = [h for h in hypothesis if h not in names]
        if unknown:
            raise ModelFitError(f"wald_f_test: no coefficient(s) {unknown} in the model; its coefficients are {names}.")
        out = np.zeros((len(hypothesis), p))
        out[np.arange(len(hypothesis)), [names.index(h) for h in hypothesis]] = 1.0
        return out
    matrix = np.atleast_2d(np.asarray(hypothesis, dtype=float))
    if matrix.size and matrix.shape[1] != p:
        raise ModelFitError(f"wald_f_test: L must have {p} columns (one per coefficient), but has {matrix.shape[1]}.")
    return matrix.reshape(-1, p)


def wald_f_test(
    fit: object,
    L: np.ndarray | Sequence[str],
    *,
    rhs: np.ndarray | Sequence[float] | float = 0.0,
    test: str = "L beta = 0",
) -> pd.DataFrame:
    r"""Wald F test of :math:`L\beta = r` with Satterthwaite's denominator df (lmerTest's ``contestMD``).

    Parameters
    ----------
    fit
        A :class:`freezestats.stats.models.reml.RemlFit`, or a fit with ``params``, ``cov_params`` and
        ``contrast_df`` (:class:`MixedFit`, :class:`PooledFit`; an :class:`OlsFit` gives its own df rule).
    L
        The hypothesis, ``q x p`` (a vector is one row), or a list of coefficient names (one unit row each).
    rhs
        :math:`r`, default 0.
    test
        The label of the ``test`` column.

    Returns
    -------
    pandas.DataFrame
        One row: ``test, f_stat, num_df, den_df, p_val, method``. ``num_df`` is the rank of :math:`LCL'`;
        ``f_stat`` and ``p_val`` are NaN when it is 0 (nothing to test).

    Notes
    -----
    See the module docstring for the df. One row (``q = 1``) is the squared t test with Satterthwaite's df,
    as lmerTest's ``contest1D``. The df come from the REML (or ML, as fitted) observed information of the
    variances; variances at their bound are held fixed.
    """
    beta, cov, df_rule, df_name = _parts(fit)
    matrix = _hypothesis(fit, L, len(beta))
    r = np.broadcast_to(np.asarray(rhs, dtype=float), (matrix.shape[0],))
    method = F_METHOD if df_name == "satterthwaite" else f"F ({df_name} df)"
    if matrix.shape[0] == 0:
        return _f_row(test, math.nan, 0, math.nan, method)
    centre = matrix @ beta - r
    vl = matrix @ cov @ matrix.T
    d, p_mat = np.linalg.eigh((vl + vl.T) / 2)
    order = np.argsort(d)[::-1]
    d, p_mat = d[order], p_mat[:, order]
    keep = d > max(np.sqrt(np.finfo(float).eps) * d[0], 0.0)
    q = int(np.sum(keep))
    if q == 0:
        return _f_row(test, math.nan, 0, math.nan, method)
    directions = p_mat[:, keep].T @ matrix  # q x p: independent linear functions, variances d
    t2 = (p_mat[:, keep].T @ centre) ** 2 / d[keep]
    f_stat = float(np.sum(t2) / q)
    nu = np.asarray(df_rule(directions), dtype=float)
    den_df = f_test_ddf(nu)
    return _f_row(test, f_stat, q, den_df, method)


def _f_row(test: str, f_stat: float, q: int, den_df: float, method: str) -> pd.DataFrame:
    if q == 0 or not np.isfinite(f_stat):
        p = math.nan
    elif np.isinf(den_df):
        p = float(stats.chi2.sf(f_stat * q, q))
    else:
        p = float(stats.f.sf(f_stat, q, den_df))
    return pd.DataFrame(
        {
            "test": [test],
            "f_stat": [f_stat],
            "num_df": [q],
            "den_df": [float(den_df)],
            "p_val": [p],
            "method": [method],
        }
    )


def result_row(
    test: str,
    *,
    f_stat: float = math.nan,
    num_df: int,
    den_df: float = math.nan,
    p_val: float,
    method: str,
    lr_stat: float = math.nan,
    llf_full: float = math.nan,
    llf_reduced: float = math.nan,
    index: str | None = None,
) -> pd.DataFrame:
    """One row with :data:`TEST_COLUMNS` (``df`` is ``num_df``, the number of coefficients the test sets to 0)."""
    row = {
        "test": test,
        "f_stat": float(f_stat),
        "num_df": int(num_df),
        "den_df": float(den_df),
        "p_val": float(p_val),
        "method": method,
        "lr_stat": float(lr_stat),
        "df": int(num_df),
        "llf_full": float(llf_full),
        "llf_reduced": float(llf_reduced),
    }
    return pd.DataFrame([row], columns=list(TEST_COLUMNS), index=[index] if index is not None else None)


# --------------------------------------------------------------------------------------------------------------
# Models of a given fixed part and variance structure, for likelihood-ratio tests


@dataclass(frozen=True)
class ComponentModel:
    """A response, a fixed-effects design and a variance structure (:mod:`._reml`'s model), to fit and simulate."""

    y: np.ndarray
    x: np.ndarray
    column_names: tuple[str, ...]
    components: tuple[Component, ...]
    blocks: tuple[np.ndarray, ...]

    def fit(
        self,
        *,
        reml: bool,
        y: np.ndarray | None = None,
        start: np.ndarray | None = None,
    ) -> RemlFit:
        """(RE)ML fit of this model, to ``y`` (default: the data's response), by ``_reml.fit_components``: from
        two starts, keeping the higher likelihood (on the two-task table of ``ftest_reference.R`` the default
        start alone stops 4.3 log-likelihood units below nlme's optimum)."""
        response = self.y if y is None else y
        return fit_components(response, self.x, list(self.components), list(self.blocks), reml=reml, start=start)

    def simulate(self, fit: RemlFit, rng: np.random.Generator) -> np.ndarray:
        r"""A response drawn from the fitted model: :math:`X\hat\beta` + random intercepts + residuals."""
        y = self.x @ fit.beta
        for component, variance in zip(self.components, fit.theta, strict=True):
            sd = math.sqrt(max(float(variance), 0.0))
            if component.kind == "random":
                y = y + component.z @ rng.normal(0.0, sd, size=component.z.shape[1])
            else:
                y = y + np.where(component.mask, rng.normal(0.0, sd, size=len(y)), 0.0)
        return y


def grouped_model(
    prepared: _Prepared,
    response: str,
    formula: str = "frozen_layers * train_size",
    *,
    variance: str = "per_size",
    random: Sequence[str] | None = None,
) -> ComponentModel:
    """The per-size (or per-cell) model of :mod:`.mixed_grouped` with another fixed part (a patsy formula).

    ``random`` names the random terms to keep (default: all of them, ``seed``, ``seed:train_size`` and the
    subset-draw terms when modelled).
    """
    from freezestats.stats.models.mixed_grouped import _blocks, _floor, _random_terms, _residual_groups

    terms = _random_terms(prepared)
    if random is not None:
        terms = [c for c in terms if c.name in set(random)]
    residuals = _residual_groups(prepared.frame, variance, _floor(prepared.frame))
    x = _design(prepared, formula)
    y = prepared.frame[response].to_numpy(dtype=float)
    blocks = _blocks(prepared, terms)
    return ComponentModel(y, x.to_numpy(dtype=float), tuple(x.columns), (*terms, *residuals), tuple(blocks))


def lrt(full: ComponentModel, reduced: ComponentModel) -> dict[str, float]:
    """Chi-square likelihood-ratio test of two nested ML fits with the same variance structure."""
    fit_full = full.fit(reml=False)
    fit_reduced = reduced.fit(reml=False)
    _check_converged(fit_full, fit_reduced)
    return _lrt_result(fit_full, fit_reduced, full, reduced)


def _check_converged(fit_full: RemlFit, fit_reduced: RemlFit) -> None:
    for label, fit in (("full", fit_full), ("reduced", fit_reduced)):
        if not fit.converged:
            raise ModelFitError(
                f"the likelihood-ratio test needs both ML fits to converge, but the {label} model stopped with a "
                f"gradient of {fit.gradient_norm:.2g}; use the F test (method='F') instead."
            )


def _lrt_result(fit_full: RemlFit, fit_reduced: RemlFit, full: ComponentModel, reduced: ComponentModel) -> dict:
    df = full.x.shape[1] - reduced.x.shape[1]
    lr = max(2.0 * (fit_full.loglik - fit_reduced.loglik), 0.0)
    return {
        "lr_stat": lr,
        "df": df,
        "p_val": float(stats.chi2.sf(lr, df)) if df > 0 else math.nan,
        "llf_full": fit_full.loglik,
        "llf_reduced": fit_reduced.loglik,
        "fit_full": fit_full,
        "fit_reduced": fit_reduced,
    }


def bootstrap_lrt(
    full: ComponentModel,
    reduced: ComponentModel,
    *,
    n_boot: int = 1000,
    rng: int | np.random.Generator | None = 0,
    progress: Progress | None = None,
) -> dict[str, float]:
    r"""Parametric bootstrap of the likelihood-ratio statistic (pbkrtest's ``PBmodcomp``).

    Draws ``n_boot`` responses from the ML fit of the reduced model (fixed effects, random intercepts and
    per-group residuals at their estimates), refits both models by ML to each, and returns the observed
    statistic with :math:`p = (1 + \#\{LR^* \ge LR\}) / (n_{boot} + 1)`. ``progress(done, n_boot)`` is called
    after every draw. Draws whose fits fail are skipped and counted (``n_failed``).
    """
    if n_boot < 1:
        raise ModelFitError(f"`n_boot` must be >= 1, but got n_boot={n_boot}.")
    observed = lrt(full, reduced)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    fit_full, fit_reduced = observed["fit_full"], observed["fit_reduced"]
    draws: list[float] = []
    failed = 0
    for i in range(n_boot):
        y = reduced.simulate(fit_reduced, gen)
        try:
            star_full = full.fit(reml=False, y=y, start=fit_full.theta)
            star_reduced = reduced.fit(reml=False, y=y, start=fit_reduced.theta)
        except (np.linalg.LinAlgError, ValueError):
            failed += 1
        else:
            draws.append(max(2.0 * (star_full.loglik - star_reduced.loglik), 0.0))
        if progress is not None:
            progress(i + 1, n_boot)
    if not draws:
        raise ModelFitError(f"every one of the {n_boot} bootstrap refits failed; use method='F' or 'lrt'.")
    lr_star = np.asarray(draws)
    observed = dict(observed)
    observed["p_val"] = float((1 + np.sum(lr_star >= observed["lr_stat"] - 1e-10)) / (len(lr_star) + 1))
    observed["n_boot"] = len(lr_star)
    observed["n_failed"] = failed
    observed["lr_star"] = lr_star
    return observed


def lrt_method(method: str, n_boot: int | None = None) -> str:
    """The ``method`` label of a likelihood-ratio row."""
    if method == "bootstrap":
        return f"parametric bootstrap LRT (ML, {n_boot} draws)"
    return LRT_METHOD

"""What every per-task model shares: the one check of a results table, the fixed-effects design, the fit report.

Each model (:mod:`.mixed`, :mod:`.ols`, :mod:`.glmm`) validates its input here, so a table that one model
refuses is refused by all of them with the same sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd
import patsy
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.failed_aside import set_failed_aside
from freezestats.stats.design.input_table import normalize_results

RESPONSES: tuple[str, ...] = ("best_dev", "final_dev", "heldout")
"""The per-run responses a model can be fitted to."""

FIXED_FORMULA = "C(frozen_layers) * C(train_size)"
_PATSY_FORMULA = "frozen_layers * train_size"  # the two columns are ordered Categoricals, reference level first
_BOUNDARY_TOL = 1e-4  # lme4's isSingular tolerance on a random-effect SD relative to the residual SD
_FEW_CLUSTERS = 20
_FEW_SEEDS = 5


@dataclass(frozen=True)
class FitDiagnostics:
    """How a fit went: convergence, boundary estimates, the data it saw, and every warning raised on the way.

    Attributes
    ----------
    converged
        Whether the optimizer reported convergence (always ``True`` for OLS, which has a closed form).
    boundary
        A variance component was estimated at (numerically) zero: its SD is below ``1e-4`` times the residual SD,
        the tolerance of lme4's ``isSingular``. The model then reduces to one without that component.
    singular
        statsmodels reported a singular random-effects covariance or a Hessian of the variance parameters that is
        not negative definite: their standard errors (not used for the fixed effects) are unreliable.
    optimizer
        The optimizer whose result is reported (``"closed form"`` for OLS).
    method
        ``"REML"``, ``"ML"``, ``"OLS"``, or the name of the approximation (GLMM).
    warnings
        One explicit sentence per problem: optimizer failures and retries, boundary estimates, few clusters,
        runs dropped, and statsmodels' own warnings (prefixed ``statsmodels``).
    library_warnings
        Every warning statsmodels raised, verbatim, including the ones that :attr:`warnings` replaces by a more
        precise statement (statsmodels flags a "boundary" whenever a variance is below 0.01 on the response scale,
        which every accuracy-scale fit trips; :attr:`boundary` uses the relative criterion above instead).
    n_obs
        Runs used in the fit.
    n_seeds, n_subset_draws
        Distinct seeds and training-subset draws among them.
    n_failed
        Failed runs among the runs used (``0`` when ``include_failed=False``).
    n_excluded
        Runs of the task left out: failed runs when ``include_failed=False``, and runs with a missing response.
    llf, aic, bic
        Log-likelihood (REML or ML, as fitted), and the information criteria where defined (``nan`` for REML fits,
        whose likelihoods are not comparable across fixed effects).
    """

    converged: bool
    boundary: bool
    singular: bool
    optimizer: str
    method: str
    warnings: tuple[str, ...]
    library_warnings: tuple[str, ...]
    n_obs: int
    n_seeds: int
    n_subset_draws: int
    n_failed: int
    n_excluded: int
    llf: float
    aic: float
    bic: float


@runtime_checkable
class FixedEffectsFit(Protocol):
    """What :mod:`freezestats.stats.inference.emm` needs from a fit: the fixed effects, their covariance and a df rule.

    :class:`MixedFit`, :class:`OlsFit` and :class:`GlmmFit` implement it (the GLMM on the logit scale, with a
    normal reference: ``df = inf``).
    """

    @property
    def response(self) -> str: ...

    @property
    def task(self) -> str: ...

    @property
    def design_info(self) -> patsy.DesignInfo: ...

    @property
    def frozen_levels(self) -> tuple[int, ...]: ...

    @property
    def train_sizes(self) -> tuple[int, ...]: ...

    @property
    def params(self) -> np.ndarray: ...

    @property
    def cov_params(self) -> np.ndarray: ...

    @property
    def df_method(self) -> str: ...

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        """Degrees of freedom of the t reference distribution of each row of ``contrasts`` (``inf``: normal)."""
        ...


@dataclass(frozen=True)
class _Prepared:
    frame: pd.DataFrame  # the runs to fit, frozen_layers / train_size as Categoricals (reference first)
    task: str
    frozen_levels: tuple[int, ...]
    train_sizes: tuple[int, ...]
    n_seeds: int
    n_subset_draws: int
    n_failed: int
    n_excluded: int
    notes: tuple[str, ...]


def _prepare(
    data: pd.DataFrame,
    response: str,
    *,
    task: str | None,
    include_failed: bool,
    caller: str,
    need_seeds: int = 2,
    extra_columns: tuple[str, ...] = (),
    min_healthy_runs: int = 1,
) -> _Prepared:
    """Validate a results table and return one task's complete grid runs, ready for patsy.

    Without failed runs, a level (or, for the reference, a size) leaves the fit where some cell keeps fewer than
    ``min_healthy_runs`` healthy runs. The steps: the task's grid runs (:func:`_task_grid_runs`), failed runs set
    aside if asked (:func:`~.failed_aside.set_failed_aside`), runs with the response (:func:`_runs_with_response`),
    and the checks that the interaction model can be fitted (:func:`_check_design`).
    """
    frame, task = _task_grid_runs(data, response, task, caller, extra_columns)
    notes: list[str] = []
    failed = frame["failed"].fillna(False).astype(bool)
    n_task = len(frame)
    if not include_failed:
        frame = set_failed_aside(frame, failed, task, caller, min_healthy_runs, notes)
    frame = _runs_with_response(frame, response, task, extra_columns, notes)
    frozen_sorted = sorted(frame["frozen_layers"].unique())
    reference = 0 if 0 in frozen_sorted else frozen_sorted[0]
    frozen_levels = (reference, *[k for k in frozen_sorted if k != reference])
    train_sizes = tuple(sorted(frame["train_size"].unique()))
    excluded_failed = not include_failed and bool(failed.any())
    n_seeds = _check_design(frame, response, task, frozen_levels, train_sizes, need_seeds, excluded_failed)
    frame["frozen_layers"] = pd.Categorical(frame["frozen_layers"], categories=list(frozen_levels))
    frame["train_size"] = pd.Categorical(frame["train_size"], categories=list(train_sizes))
    return _Prepared(
        frame=frame.reset_index(drop=True),
        task=task,
        frozen_levels=tuple(int(k) for k in frozen_levels),
        train_sizes=tuple(int(n) for n in train_sizes),
        n_seeds=n_seeds,
        n_subset_draws=int(frame["subset_draw"].nunique()),
        n_failed=int(frame["failed"].sum()),
        n_excluded=n_task - len(frame),
        notes=tuple(notes),
    )


def _task_grid_runs(
    data: pd.DataFrame, response: str, task: str | None, caller: str, extra_columns: tuple[str, ...]
) -> tuple[pd.DataFrame, str]:
    """The complete grid runs of one task of one model, and that task: the table's shape is checked first, so a
    wrong table is named as such rather than failing later inside patsy."""
    if not isinstance(data, pd.DataFrame):
        raise ModelFitError(f"{caller} needs the results table as a pandas DataFrame, but got {type(data).__name__}.")
    if len(data) == 0:
        raise ModelFitError(
            f"{caller} needs at least one run, but the results table is empty; run the study first "
            "(`freezestats run`) or check the file you loaded."
        )
    if response not in RESPONSES:
        raise ModelFitError(f"`response` must be one of {list(RESPONSES)}, but got response={response!r}.")
    required = ["task", "frozen_layers", "train_size", "seed", "failed", response, *extra_columns]
    missing = [c for c in required if c not in data.columns]
    if missing:
        raise ModelFitError(
            f"the results table must have the columns {required}, but {missing} are missing "
            f"(columns present: {list(data.columns)}); pass the table from `freezestats results`."
        )
    frame = normalize_results(data)
    if "role" in frame.columns:
        frame = frame[frame["role"] == "grid"]
    if "state" in frame.columns:
        frame = frame[frame["state"] == "complete"]
    if len(frame) == 0:
        raise ModelFitError(
            f"{caller} analyses runs with role='grid' and state='complete', but none of the {len(data)} runs is "
            "one; the learning-rate search runs (role='search') are not part of the design."
        )
    tasks = sorted(frame["task"].astype(str).unique())
    if task is None:
        if len(tasks) > 1:
            raise ModelFitError(
                f"the results table holds several tasks {tasks}; models are fitted one task at a time, so pass "
                f"task=... (one of {tasks})."
            )
        task = tasks[0]
    elif task not in tasks:
        raise ModelFitError(f"`task` must be one of the tasks in the results table {tasks}, but got task={task!r}.")
    frame = frame[frame["task"].astype(str) == task]
    if "model" in frame.columns and frame["model"].nunique() > 1:
        models = sorted(frame["model"].astype(str).unique())
        raise ModelFitError(
            f"the runs of task {task!r} come from several models {models}; a model comparison is not part of "
            "this design, so filter the table to one model first, e.g. data[data['model'] == ...]."
        )
    return frame, task


def _runs_with_response(
    frame: pd.DataFrame, response: str, task: str, extra_columns: tuple[str, ...], notes: list[str]
) -> pd.DataFrame:
    """The runs whose response (and extra columns) are finite numbers, with the design columns typed; a run
    without them is dropped listwise and counted in ``notes``."""
    values = pd.to_numeric(frame[response], errors="coerce")
    for column in extra_columns:
        values = values.where(pd.to_numeric(frame[column], errors="coerce").notna())
    present = values.notna() & np.isfinite(values.astype(float))
    if not present.any():
        raise ModelFitError(
            f"every run of task {task!r} has a missing {response}"
            + (f" or {', '.join(extra_columns)}" if extra_columns else "")
            + "; choose another response."
        )
    if not present.all():
        notes.append(f"dropped {int((~present).sum())} runs with a missing {response} (listwise deletion).")
    frame = frame[present].copy()
    frame[response] = values[present].astype(float)
    for column in extra_columns:
        frame[column] = pd.to_numeric(frame[column]).astype(float)
    frame["frozen_layers"] = frame["frozen_layers"].astype(int)
    frame["train_size"] = frame["train_size"].astype(int)
    frame["seed"] = frame["seed"].astype(int)
    frame["subset_draw"] = frame["subset_draw"].fillna(0).astype(int) if "subset_draw" in frame.columns else 0
    frame["failed"] = frame["failed"].fillna(False).astype(bool)
    return frame


def _check_design(
    frame: pd.DataFrame,
    response: str,
    task: str,
    frozen_levels: tuple,
    train_sizes: tuple,
    need_seeds: int,
    excluded_failed: bool,
) -> int:
    """Refuse, in one line each, a table the interaction model with a seed effect cannot be fitted to: an empty
    cell, too few seeds, a constant response, no more runs than cells. Returns the number of seeds."""
    counts = frame.groupby(["frozen_layers", "train_size"]).size()
    empty = [(k, n) for k in sorted(frozen_levels) for n in train_sizes if (k, n) not in counts.index]
    if empty:
        shown = ", ".join(f"(frozen_layers={k}, train_size={n})" for k, n in empty[:6])
        raise ModelFitError(
            f"every (frozen_layers, train_size) cell needs at least one run for the interaction model, but "
            f"{len(empty)} cells of task {task!r} have none: {shown}"
            + (" ..." if len(empty) > 6 else "")
            + (
                "; failed runs were excluded (include_failed=False), so try include_failed=True,"
                if excluded_failed
                else ";"
            )
            + " finish those cells or drop their frozen level / train size from the table."
        )
    n_seeds = int(frame["seed"].nunique())
    if n_seeds < need_seeds:
        raise ModelFitError(
            f"a seed random effect needs at least 2 seeds, but task {task!r} has {n_seeds} "
            f"(seed={sorted(frame['seed'].unique())}), so the seed variance cannot be estimated; run more seeds, "
            "or use fit_ols(..., cov_type='nonrobust'), which assumes independent runs."
        )
    if frame[response].nunique() == 1:
        raise ModelFitError(
            f"{response} is constant ({float(frame[response].iloc[0])!r}) across all {len(frame)} runs of task "
            f"{task!r}, so there is no variation to model; check the runs (did every run fail?) or choose another "
            "response."
        )
    n_cells = len(frozen_levels) * len(train_sizes)
    if len(frame) <= n_cells:
        raise ModelFitError(
            f"the interaction model has one mean per cell, so it needs more runs than cells, but task {task!r} "
            f"has {len(frame)} runs for {n_cells} cells; run more seeds."
        )
    return n_seeds


def _design(prepared: _Prepared, formula: str = _PATSY_FORMULA) -> pd.DataFrame:
    return patsy.dmatrix(formula, prepared.frame, return_type="dataframe")


def _indicators(values: pd.Series) -> np.ndarray:
    codes, _ = pd.factorize(values, sort=True)
    out = np.zeros((len(values), codes.max() + 1))
    out[np.arange(len(values)), codes] = 1.0
    return out


def standard_errors(variances: np.ndarray) -> np.ndarray:
    """Square roots of estimated variances, NaN where a variance is zero or negative.

    Where every run of the cells behind an estimate scored the same (runs collapsed to the majority class)
    a covariance matrix built from residuals gives that estimate a variance of zero up to rounding, e.g.
    -1e-20, and ``np.sqrt`` then returns NaN with a RuntimeWarning. Such a zero is not a zero-width
    interval either: the data carry no information about its spread. So both become NaN (no interval),
    silently; the caller says why in its notes.
    """
    variances = np.asarray(variances, dtype=float)
    return np.sqrt(variances, where=variances > 0, out=np.full_like(variances, np.nan))


def _coef_table(names: list[str], estimate: np.ndarray, se: np.ndarray, df: float | None) -> pd.DataFrame:
    stat = estimate / se
    if df is None:
        crit = stats.norm.ppf(0.975)
        p = 2 * stats.norm.sf(np.abs(stat))
    else:
        crit = stats.t.ppf(0.975, df)
        p = 2 * stats.t.sf(np.abs(stat), df)
    table = pd.DataFrame(
        {
            "term": names,
            "estimate": estimate,
            "se": se,
            "ci_low": estimate - crit * se,
            "ci_high": estimate + crit * se,
        }
    )
    if df is None:
        table["z"] = stat
    else:
        table["t"] = stat
        table["df"] = float(df)
    table["p_val"] = p
    return table

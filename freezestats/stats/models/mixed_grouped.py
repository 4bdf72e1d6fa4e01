r"""The default mixed model: a residual variance per train size (or per cell), seed and seed-by-size intercepts.

Fine-tuning runs are heteroscedastic: in the blog's appendix the median SST-2 cell SD is 0.071 at 50 examples
and 0.0044 at 1000, a variance ratio of about 250. One pooled residual variance averages the two, so intervals
come out too narrow at small n (65% coverage of a nominal 95% at n = 50 on blog-shaped data) and several times
too wide at large n. This model gives each train size its own residual variance (nlme's
``weights = varIdent(form = ~1 | size)``, glmmTMB's ``dispformula = ~size``), and lets a seed's luck differ
between sizes (``(1 | seed/size)``: the same seed number fixes the head initialisation and data order, but its
effect on a 50-example run need not be its effect on a 1000-example run).

Zero-variance groups. Collapsed runs, deep-frozen cells and deterministic arms give identical scores across
seeds; a variance estimated at zero has no interior REML optimum and would give zero-width intervals. Each
residual variance is therefore floored at the squared resolution of the metric, :math:`(1/n_{eval})^2` (one
evaluation item), or :math:`10^{-8}` when the table has no ``n_eval``. The binomial item variance
:math:`p(1-p)/n_{eval}` is *not* used as the floor: it is the variance between dev sets, while every run is
scored on the same dev set, and it exceeds the real run-to-run variance at n = 1000 (blog SD 0.0044 against
:math:`\sqrt{0.9 \cdot 0.1/872} = 0.010`), so it would widen the large-n intervals it exists to fix.

Random terms estimated at zero are dropped, one at a time, in the order ``subset_draw:train_size``,
``seed:train_size``, ``subset_draw``, ``seed`` (finest first), and the model is refitted without them; the
diagnostics list each one.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import (
    _BOUNDARY_TOL,
    _FEW_SEEDS,
    FIXED_FORMULA,
    FitDiagnostics,
    _coef_table,
    _design,
    _indicators,
    _Prepared,
)
from freezestats.stats.models.mixed_fit import MixedFit
from freezestats.stats.models.reml import Component, RemlFit, fit_components

__all__ = ["GROUPED_VARIANCES", "crossed_orders", "fit_grouped", "randomness_sources"]

GROUPED_VARIANCES = ("per_size", "per_cell")
_DROP_ORDER = (
    "subset_draw:train_size",
    "order_seed:train_size",
    "seed:train_size",
    "subset_draw",
    "order_seed",
    "seed",
)
_DEFAULT_FLOOR = 1e-8


def fit_grouped(prepared: _Prepared, response: str, *, reml: bool, variance: str) -> MixedFit:
    """Fit the grouped-variance model to prepared runs (see the module docstring), dropping zero random terms."""
    frame = prepared.frame
    x = _design(prepared)
    y = frame[response].to_numpy(dtype=float)
    random_terms = _random_terms(prepared)
    residuals = _residual_groups(frame, variance, _floor(frame))
    dropped: list[str] = []
    while True:
        components = [*random_terms, *residuals]
        fit = fit_components(y, x.to_numpy(dtype=float), components, _blocks(prepared, random_terms), reml=reml)
        zero = [
            c.name
            for c, bound in zip(components, fit.at_bound, strict=True)
            if c.kind == "random" and (bound or _negligible(c.name, components, fit))
        ]
        if not zero:
            break
        name = min(zero, key=lambda z: _DROP_ORDER.index(z.split("@")[0]))  # per-size terms: "seed:train_size@50"
        dropped.append(name)
        random_terms = [c for c in random_terms if c.name != name]
    return _to_mixed_fit(prepared, response, reml, variance, x, components, fit, dropped)


def _random_terms(prepared: _Prepared) -> list[Component]:
    frame = prepared.frame
    seed_size = frame["seed"].astype(str) + ":" + frame["train_size"].astype(str)
    terms = [Component("seed", "random", z=_indicators(frame["seed"]))]
    if crossed_orders(frame):
        return terms + _crossed_order_terms(prepared)
    if len(prepared.train_sizes) > 1:
        terms.append(Component("seed:train_size", "random", z=_indicators(seed_size)))
    if prepared.n_subset_draws > 1:
        draw_size = frame["subset_draw"].astype(str) + ":" + frame["train_size"].astype(str)
        terms.append(Component("subset_draw", "random", z=_indicators(frame["subset_draw"])))
        if len(prepared.train_sizes) > 1:
            terms.append(Component("subset_draw:train_size", "random", z=_indicators(draw_size)))
    return terms


def crossed_orders(frame: pd.DataFrame) -> bool:
    """Whether the data order was seeded apart from the initialisation and crossed with it (``order_seeds``)."""
    if "order_seed" not in frame.columns or frame["order_seed"].isna().any():
        return False
    return frame[["seed", "order_seed"]].drop_duplicates().shape[0] > frame["seed"].nunique()


def _crossed_order_terms(prepared: _Prepared) -> list[Component]:
    """Init seed and data-order seed crossed (Dodge et al. 2020): an intercept for each, and a by-size intercept
    for each with its own variance per train size, so the report can say which source dominates at each size."""
    frame = prepared.frame
    sizes = frame["train_size"].astype(int).to_numpy()
    terms = [Component("order_seed", "random", z=_indicators(frame["order_seed"]))]
    for source in ("seed", "order_seed"):
        by_size = frame[source].astype(str) + ":" + frame["train_size"].astype(str)
        z = _indicators(by_size)
        for n in prepared.train_sizes:
            rows = sizes == n
            terms.append(Component(f"{source}:train_size@{n}", "random", z=z * rows[:, None]))
    return terms


def _residual_groups(frame: pd.DataFrame, variance: str, floor: float) -> list[Component]:
    sizes = frame["train_size"].astype(int).to_numpy()
    if variance == "per_size":
        return [Component(f"residual:{n}", "residual", mask=sizes == n, lower=floor) for n in sorted(set(sizes))]
    frozen = frame["frozen_layers"].astype(int).to_numpy()
    cells = sorted(set(zip(frozen, sizes, strict=True)), key=lambda c: (c[1], c[0]))
    return [
        Component(f"residual:{k}@{n}", "residual", mask=(frozen == k) & (sizes == n), lower=floor) for k, n in cells
    ]


def _floor(frame: pd.DataFrame) -> float:
    """The squared resolution of the metric: one evaluation item out of ``n_eval`` (see the module docstring)."""
    if "n_eval" in frame.columns:
        n_eval = pd.to_numeric(frame["n_eval"], errors="coerce").dropna()
        if len(n_eval) and float(n_eval.max()) > 0:
            return (1.0 / float(n_eval.max())) ** 2
    return _DEFAULT_FLOOR


def _blocks(prepared: _Prepared, random_terms: list[Component]) -> list[np.ndarray]:
    """Seeds are independent blocks of V unless a subset-draw term crosses them."""
    if any(c.name.startswith(("subset_draw", "order_seed")) for c in random_terms):
        return [np.arange(len(prepared.frame))]
    seeds = prepared.frame["seed"].to_numpy()
    return [np.flatnonzero(seeds == s) for s in np.unique(seeds)]


def _negligible(name: str, components: list[Component], fit: RemlFit) -> bool:
    """lme4's isSingular rule: a random-effect SD below 1e-4 of the smallest residual SD counts as zero."""
    variances = dict(zip([c.name for c in components], fit.theta, strict=True))
    smallest = min(v for c, v in zip(components, fit.theta, strict=True) if c.kind == "residual")
    return math.sqrt(max(variances[name], 0.0) / smallest) < _BOUNDARY_TOL if smallest > 0 else False


def _to_mixed_fit(
    prepared: _Prepared,
    response: str,
    reml: bool,
    variance: str,
    x: pd.DataFrame,
    components: list[Component],
    fit: RemlFit,
    dropped: list[str],
) -> MixedFit:
    table = _variance_table(components, fit, dropped)
    notes = list(prepared.notes)
    notes += [
        f"the {name} variance was estimated at zero, so that random term was dropped and the model refitted "
        "without it (terms are dropped finest first: " + ", ".join(_DROP_ORDER) + ")."
        for name in dropped
    ]
    floored = table[(table["at_floor"]) & table["component"].str.startswith("residual")]
    if len(floored):
        notes.append(
            f"{len(floored)} residual variance(s) ({', '.join(floored['component'])}) sit at the floor of one "
            "evaluation item, (1/n_eval)^2: their runs gave (nearly) identical scores, so their intervals are as "
            "narrow as the metric's resolution."
        )
    if not fit.converged:
        notes.append(
            f"the REML optimiser stopped with a gradient of {fit.gradient_norm:.2g}: treat the fit as unreliable."
        )
    if prepared.n_seeds < _FEW_SEEDS:
        notes.append(
            f"only {prepared.n_seeds} seeds: each per-size variance rests on few degrees of freedom, so intervals "
            "are wide (small Satterthwaite df)."
        )
    n_fixed = x.shape[1]
    k_params = n_fixed + int(np.sum(~fit.at_bound))
    aic = bic = math.nan
    if not reml:
        aic = -2 * fit.loglik + 2 * k_params
        bic = -2 * fit.loglik + math.log(len(prepared.frame)) * k_params
    diagnostics = FitDiagnostics(
        converged=fit.converged,
        boundary=bool(dropped),
        singular=False,
        optimizer="L-BFGS-B + Newton (freezestats._reml)",
        method="REML" if reml else "ML",
        warnings=tuple(notes),
        library_warnings=(),
        n_obs=len(prepared.frame),
        n_seeds=prepared.n_seeds,
        n_subset_draws=prepared.n_subset_draws,
        n_failed=prepared.n_failed,
        n_excluded=prepared.n_excluded,
        llf=fit.loglik,
        aic=aic,
        bic=bic,
    )
    fixed = _coef_table(list(x.columns), fit.beta, np.sqrt(np.diag(fit.cov_beta)), df=None)
    return MixedFit(
        result=None,
        beta=fit.beta,
        variance=variance,
        response=response,
        task=prepared.task,
        formula=_formula(response, components, variance),
        design_info=x.design_info,
        frozen_levels=prepared.frozen_levels,
        train_sizes=prepared.train_sizes,
        fixed_effects=fixed,
        variance_components=table,
        icc_seed=_icc(table),
        diagnostics=diagnostics,
        _variance_model=_FitAdapter(fit),
    )


class _FitAdapter:
    """What MixedFit asks of a variance model: ``cov_beta`` and Satterthwaite's df (from the REML fit)."""

    def __init__(self, fit: RemlFit) -> None:
        self.fit = fit
        self.cov_beta = fit.cov_beta

    def satterthwaite_df(self, contrasts: np.ndarray) -> np.ndarray:
        return self.fit.satterthwaite_df(contrasts)


def _variance_table(components: list[Component], fit: RemlFit, dropped: list[str]) -> pd.DataFrame:
    rows = []
    for c, v, bound in zip(components, fit.theta, fit.at_bound, strict=True):
        size = _size_of(c.name)
        rows.append(
            {"component": c.name, "variance": float(v), "sd": math.sqrt(v), "train_size": size, "at_floor": bool(bound)}
        )
    rows += [
        {"component": name, "variance": 0.0, "sd": 0.0, "train_size": math.nan, "at_floor": True} for name in dropped
    ]
    return pd.DataFrame(rows, columns=["component", "variance", "sd", "train_size", "at_floor"])


def _size_of(name: str) -> float:
    if name.startswith("residual:"):
        return float(name.rsplit("@", 1)[-1].removeprefix("residual:"))
    if ":train_size@" in name:
        return float(name.rsplit("@", 1)[-1])
    return math.nan


def _icc(table: pd.DataFrame) -> float:
    variance = dict(zip(table["component"], table["variance"], strict=True))
    residual = table.loc[table["component"].str.startswith("residual"), "variance"].mean()
    seed = variance.get("seed", 0.0)
    total = seed + variance.get("seed:train_size", 0.0) + variance.get("subset_draw", 0.0) + residual
    total += variance.get("subset_draw:train_size", 0.0)
    return float(seed / total) if total > 0 else math.nan


def _formula(response: str, components: list[Component], variance: str) -> str:
    terms = " + ".join(f"(1 | {c.name})" for c in components if c.kind == "random")
    weights = {"per_size": "varIdent(~1 | train_size)", "per_cell": "varIdent(~1 | frozen_layers:train_size)"}
    return f"{response} ~ {FIXED_FORMULA}" + (f" + {terms}" if terms else "") + f", weights = {weights[variance]}"


def randomness_sources(fit: MixedFit) -> pd.DataFrame:
    """Per train size, how much of a run's variance comes from the initialisation seed, the data-order seed and
    the rest (their interaction and everything else), from a fit of crossed ``seed`` x ``order_seed`` runs.

    Columns ``train_size, init_var, order_var, residual_var, init_share, order_share, residual_share,
    dominant``. The init variance at a size is ``seed + seed:train_size@size``, the order variance likewise.
    """
    table = fit.variance_components.set_index("component")["variance"]
    if "order_seed" not in table.index:
        raise ModelFitError(
            "randomness_sources needs runs whose data order was seeded apart from the initialisation and crossed "
            "with it (`[grid] order_seeds` in the spec); this fit has no order_seed term."
        )
    rows = []
    for n in fit.train_sizes:
        init = float(table.get("seed", 0.0) + table.get(f"seed:train_size@{n}", 0.0))
        order = float(table.get("order_seed", 0.0) + table.get(f"order_seed:train_size@{n}", 0.0))
        resid = float(table.get(f"residual:{n}", np.nan))
        total = init + order + resid
        shares = {"init": init / total, "order": order / total, "residual": resid / total}
        rows.append(
            {
                "train_size": int(n),
                "init_var": init,
                "order_var": order,
                "residual_var": resid,
                **{f"{k}_share": v for k, v in shares.items()},
                "dominant": max(("init", "order"), key=lambda k: shares[k]),
            }
        )
    return pd.DataFrame(rows)

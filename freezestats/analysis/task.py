"""One task's share of ``freezestats analyze``: every table of that task, in the order they depend on each other.

:func:`freezestats.analysis.pipeline.analyze` checks the options and picks the rows; :class:`TaskAnalysis` then runs,
per task, the model-free tables, the model with and without failed runs (and the answer as tests from the one
with all runs), and the tests of the model's assumptions. A table that cannot be computed becomes a warning, not
an error, so one unfit table never hides the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd

from freezestats.analysis.answer import answer_as_tests, answer_contrasts, item_uncertainty, two_part_table
from freezestats.analysis.options import AnalysisOptions
from freezestats.analysis.result import Analysis
from freezestats.exceptions import ModelFitError
from freezestats.stats.descriptive.variance import variance_homogeneity

__all__ = ["CHECKPOINT_OF", "TaskAnalysis", "metric_failures"]


class TaskAnalysis:
    """Adds each task's tables to one :class:`~freezestats.analysis.result.Analysis`."""

    def __init__(self, result: Analysis, options: AnalysisOptions) -> None:
        self.result = result
        self.options = options

    def attempt(self, name: str, task: str, make: Callable[[], pd.DataFrame], **labels: str) -> None:
        """Add the table ``make()`` returns, or the reason it could not be computed as a warning."""
        try:
            self.result.add(name, task, make(), **labels)
        except ModelFitError as err:
            self.result.warnings.append(f"{task}: {name}{' ' + str(labels) if labels else ''} not computed: {err}")

    def run(self, task: str, runs: pd.DataFrame, *, compare_with_blog: bool) -> None:
        """Every table of ``task`` from its grid runs trained alone with the freeze arm, at the task's own
        response where it has one (a task re-scored on another metric: its last checkpoint)."""
        options = self.options
        own = self.result.settings.get("response_of", {}).get(task)
        if own is not None:
            self.options = replace(options, response=own)
        try:
            self._run(task, runs, compare_with_blog=compare_with_blog)
        finally:
            self.options = options

    def _run(self, task: str, runs: pd.DataFrame, *, compare_with_blog: bool) -> None:
        # Failure on the analysed metric's checkpoint, not the runner's final-checkpoint flag: that is what the
        # fits without failed runs leave out and what the failure model and rates describe.
        response = self.options.response
        flags, rule = metric_failures(runs, response)
        runs = runs.assign(failed=flags.to_numpy(), failed_runner=runs["failed"].to_numpy())
        self.result.settings.setdefault("failure_rule", {})[task] = {
            "rule": rule,
            "checkpoint": CHECKPOINT_OF[response],
        }
        self._model_free(task, runs, rule, compare_with_blog)
        two_part = None
        if self.options.model == "mixed":
            self.attempt("two_part_contrasts", task, lambda: two_part_table(runs, response, self.options.reference))
            # the default's answer; an explicit --variance pooled / per_cell answers from that model, to compare
            if self.options.variance == "per_size":
                two_part = answer_contrasts(self.result, runs, task, response)
            else:
                self.result.settings.setdefault("answer_from", {})[task] = "model"
        all_runs_fit = None
        for fit_name, include_failed in (("all_runs", True), ("without_failed", False)):
            fit = self._model(task, runs, fit_name, include_failed, two_part)
            if fit_name == "all_runs":
                all_runs_fit = fit
        self._assumption_tests(task, runs, all_runs_fit)

    def _model_free(self, task: str, runs: pd.DataFrame, rule: str, compare_with_blog: bool) -> None:
        """Cell summaries, seed spread, failures, Lee et al.'s scores, the blog's figures and paired contrasts."""
        from freezestats.stats.descriptive.reference import compare_with_reference
        from freezestats.stats.descriptive.variance import cell_summary, seed_spread, spread_test
        from freezestats.stats.failures.rates import failure_rates
        from freezestats.stats.failures.trend import failure_model
        from freezestats.stats.inference.paired import paired_contrasts
        from freezestats.stats.relative_quality.operating_point import operating_point, relative_scores

        response, reference, n_boot = self.options.response, self.options.reference, self.options.n_boot
        self.attempt("cell_summary", task, lambda: cell_summary(runs, response))
        self.attempt("seed_spread", task, lambda: seed_spread(runs, response))
        self.attempt("spread_test", task, lambda: spread_test(runs, response))
        self.attempt("failure_rates", task, lambda: failure_rates(runs))
        self.attempt("failure_model", task, lambda: failure_model(runs, on_separation="nan"))
        self.attempt("failure_summary", task, lambda: _failure_summary(runs, response, rule))
        self.attempt(
            "relative_scores", task, lambda: relative_scores(runs, response, reference=reference, n_boot=n_boot)
        )
        self.attempt(
            "operating_point", task, lambda: operating_point(runs, response, reference=reference, n_boot=n_boot)
        )
        # The side-by-side with the blog uses the blog's own number, best_dev, whatever the analysed metric. The
        # blog published SST-2 and CoLA only: another task has nothing to stand beside, which is no warning.
        if compare_with_blog:
            self.attempt("reference_comparison", task, lambda: compare_with_reference(runs, response="best_dev"))
        self.attempt("paired_contrasts", task, lambda: paired_contrasts(runs, response, reference=reference))

    def _model(
        self, task: str, runs: pd.DataFrame, fit_name: str, include_failed: bool, two_part: pd.DataFrame | None
    ) -> Any:
        """One fit (all runs, or without failed ones) and its tables; the answer and power from the first."""
        from freezestats import stats
        from freezestats.stats.models.mixed_grouped import crossed_orders, randomness_sources

        o = self.options
        labels = {"fit": fit_name}
        try:
            fit = _fit(o.model, runs, o.response, include_failed, o.variance)
        except ModelFitError as err:
            self.result.warnings.append(f"{task}: {o.model} model ({fit_name}) not fitted: {err}")
            return None
        self.result.add("fixed_effects", task, fit.fixed_effects, **labels)
        self.result.add("diagnostics", task, _diagnostics_table(fit, o.model), **labels)
        self.result.warnings.extend(f"{task}: {o.model} ({fit_name}): {w}" for w in fit.diagnostics.warnings)
        if hasattr(fit, "variance_components"):
            self.result.add("variance_components", task, fit.variance_components, **labels)
        if o.model == "mixed" and fit_name == "all_runs" and crossed_orders(runs):
            self.attempt("randomness_sources", task, lambda: randomness_sources(fit))
        if o.model == "glmm":  # its EMMs are logits; what a reader wants is the marginal accuracy
            self.attempt("marginal_accuracy", task, lambda: stats.marginal_accuracy(fit), **labels)
            return fit
        self.attempt("emmeans", task, lambda: stats.estimated_marginal_means(fit), **labels)
        self.attempt("contrasts", task, lambda: stats.contrasts_vs_reference(fit, o.reference, o.adjust), **labels)
        if o.margin is not None:
            self.attempt("equivalence", task, lambda: stats.equivalence_tests(fit, o.margin, o.reference), **labels)
        if fit_name == "all_runs":
            answer_as_tests(self.result, self.attempt, fit, runs, task, o, two_part)
            if o.items is not None and o.uncertainty == "seeds":
                item_uncertainty(self.result, self.attempt, runs, o.items, task, o.response)
            if o.model == "mixed":
                self._power(task, fit)
        return fit

    def _power(self, task: str, fit: Any) -> None:
        """Power of the design at the analysis' delta, and the seeds per cell that 80% power needs."""
        from freezestats.stats.inference.power import power_by_simulation, seeds_for_power

        settings = self.result.settings
        margin = settings["margins"].get(task)
        self.attempt("power", task, lambda: power_by_simulation(fit, settings["delta"], n_sim=1000, margin=margin))
        if "power" in self.result.tables:
            curve = self.result.tables["power"][self.result.tables["power"]["task"] == task]
            settings.setdefault("seeds_for_80pct_power", {})[task] = seeds_for_power(curve)
            settings.setdefault("seeds_per_size", {})[task] = _seeds_per_size(curve)

    def _assumption_tests(self, task: str, runs: pd.DataFrame, all_runs_fit: Any) -> None:
        """The frozen × size interaction test and the equal-spread checks the fitted model assumes."""
        from freezestats import stats

        o = self.options
        if o.model not in ("mixed", "ols"):
            return
        # The test of the mixed model (the one fitted above when the model is mixed, not refitted).
        kind = o.variance if o.model == "mixed" else "per_size"
        reuse = all_runs_fit if o.model == "mixed" else None
        self.attempt(
            "interaction_test", task, lambda: stats.interaction_test(runs, o.response, variance=kind, fit=reuse)
        )
        if o.bootstrap_tests > 0:
            self.attempt(
                "interaction_test_bootstrap",
                task,
                lambda: stats.interaction_test(
                    runs, o.response, variance=kind, method="bootstrap", n_boot=o.bootstrap_tests, progress=o.progress
                ),
            )
        self.attempt("variance_homogeneity", task, lambda: variance_homogeneity(runs, o.response))
        _warn_unequal_spread(self.result, task, o.model, o.variance)


#: The checkpoint whose predictions each response scores (freezestats.training.predictions.CHECKPOINTS).
CHECKPOINT_OF = {"best_dev": "best", "heldout": "heldout", "final_dev": "final"}


def metric_failures(runs: pd.DataFrame, response: str) -> tuple[pd.Series, str]:
    """Which runs failed, judged on the checkpoint the analysed metric scores, and the rule used.

    Accuracy tasks use the exact binomial test against the majority rate; other metrics (MCC, F1) have no
    majority *accuracy* in the table, so they use the dominant-class rule (one class takes >= 95% of the
    predictions). Runs without stored counts (older studies) keep the runner's final-checkpoint flag.
    """
    from freezestats.stats.failures.rates import flag_failures

    metrics = set(runs["metric"].dropna().astype(str)) if "metric" in runs.columns else {"accuracy"}
    rule = "binomial" if metrics <= {"accuracy"} else "dominant_class"
    try:
        flags = flag_failures(runs, checkpoint=CHECKPOINT_OF[response], rule=rule)  # type: ignore[arg-type]
    except ModelFitError:  # the table predates per-checkpoint counts: only the runner's flag exists
        return runs["failed"].astype(bool), "runner (final checkpoint beats the majority baseline)"
    runner = runs["failed"].astype("boolean")
    return flags.fillna(runner).astype(bool), rule


def _failure_summary(runs: pd.DataFrame, response: str, rule: str) -> pd.DataFrame:
    """Per cell: P(fail) (Wilson), the mean of healthy runs and of all runs; ``runs["failed"]`` is already judged
    on the checkpoint the analysed metric scores, by ``rule`` (:func:`metric_failures`)."""
    from freezestats.stats.failures.summary import failure_summary

    return failure_summary(runs, runs["failed"], response=response).assign(
        rule=rule, checkpoint=CHECKPOINT_OF[response]
    )


def _seeds_per_size(curve: pd.DataFrame) -> dict[str, dict[str, int | None]]:
    """Seeds needed per train size: for 80% power to detect delta (Holm within the size), and for 80% power to
    call a depth with no true cost non-inferior at the margin."""
    from freezestats.stats.inference.power import seeds_for_power

    out = {}
    for size, part in curve.groupby("train_size"):
        entry = {"detect_delta": seeds_for_power(part.drop(columns="train_size"))}
        if "power_noninferior" in part.columns:
            entry["noninferior"] = seeds_for_power(
                part.drop(columns=["train_size", "power"]).rename(columns={"power_noninferior": "power"})
            )
        out[str(int(size))] = entry
    return out


def _warn_unequal_spread(result: Analysis, task: str, model: str, variance: str) -> None:
    """Say where the runs' spread breaks the variance structure the model assumes.

    The per-size model allows every train size its own variance, so what breaks it is a spread that differs
    across frozen levels *within* a size (``spread_test``, Holm over sizes). The pooled and OLS models assume one
    variance for every cell (``variance_homogeneity`` over all cells).
    """
    advice = "compare with paired_contrasts, which use each contrast's own per-seed differences"
    if model == "mixed" and variance == "per_size":
        spread = result.tables.get("spread_test")
        if spread is None:
            return
        rows = spread[(spread["task"] == task) & (spread["p_holm"] < 0.05)]
        for row in rows.itertuples():
            result.warnings.append(
                f"{task}: the spread of runs differs across cells within n = {int(row.train_size)} (Brown–Forsythe "
                f"across frozen levels, Holm p={row.p_holm:.2g}); the model assumes one residual variance per "
                f"train size, so its intervals there are too wide for the stable cells and too narrow for the "
                f"unstable ones: {advice}"
            )
        return
    vh = result.tables.get("variance_homogeneity")
    if vh is None or not (vh["task"] == task).any():
        return
    row = vh[vh["task"] == task].iloc[-1]
    if row["p_val"] < 0.05:
        result.warnings.append(
            f"{task}: the spread of runs differs across cells (Brown–Forsythe p={row['p_val']:.2g}; cell SDs "
            f"{row['min_sd']:.3g}..{row['max_sd']:.3g}); the {model} model assumes one residual variance for all "
            f"runs, so its intervals are too wide for stable cells and too narrow for unstable ones: {advice}"
        )


def _fit(model: str, data: pd.DataFrame, response: str, include_failed: bool, variance: str = "per_size") -> Any:
    from freezestats import stats

    if model == "mixed":
        return stats.fit_mixed(data, response, include_failed=include_failed, variance=variance)
    if model == "ols":
        return stats.fit_ols(data, response, include_failed=include_failed)
    run_variance = "pooled" if variance == "pooled" else "per_size"
    return stats.fit_glmm(data, response, include_failed=include_failed, run_variance=run_variance)


def _diagnostics_table(fit: Any, model: str) -> pd.DataFrame:
    d = fit.diagnostics
    row = {k: getattr(d, k) for k in d.__dataclass_fields__ if k not in ("warnings", "library_warnings")}
    row["warnings"] = " | ".join(d.warnings)
    row["model"] = model
    row["icc_seed"] = getattr(fit, "icc_seed", None)
    if model == "glmm":
        row["approximation"] = fit.approximation
    return pd.DataFrame([row])

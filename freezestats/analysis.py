"""Analyse a results table: every statistic the report needs, per task, as named tidy tables.

This is the stage between the results table and the report: ``analyze`` runs the model the user asked
for (``mixed``, ``glmm`` or ``ols``) with and without failed runs, and the model-free analyses (cell
summaries, seed spread, failure rates, Lee et al.'s operating point, the comparison with the published
figures), and keeps every table plus the warnings that came up. ``write_analysis`` stores them as
parquet + CSV and ``analysis.json``; nothing is rounded here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from freezestats import __version__
from freezestats.exceptions import ModelFitError

__all__ = [
    "MODELS",
    "RESPONSES",
    "Analysis",
    "analyze",
    "load_results",
    "load_study_record",
    "read_analysis",
    "summary_lines",
    "variance_homogeneity",
    "write_analysis",
]

MODELS = ("mixed", "glmm", "ols")
VARIANCES = ("per_size", "per_cell", "pooled")  # the mixed model's residual variance (stats.fit_mixed)
RESULTS_FILE = "results.parquet"
STUDY_FILE = "study.json"
RESPONSES = ("best_dev", "final_dev", "heldout")
RESPONSE_NOTES = {
    "best_dev": "best validation score during training: the blog's number; the same data selects and scores the "
    "checkpoint, so it is biased upwards (more so for noisier, smaller-data cells)",
    "final_dev": "score after the last step: no checkpoint selection, no selection bias",
    "heldout": "checkpoint selected on one fixed half of the validation set and scored on the other: unbiased",
}


@dataclass
class Analysis:
    """Named tables (all tasks stacked, with a ``task`` column), warnings, and the settings used."""

    settings: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, name: str, task: str, table: pd.DataFrame, **labels: str) -> None:
        table = table.copy()
        for column, value in {"task": task, **labels}.items():
            if column not in table.columns:
                table.insert(0, column, value)
        self.tables[name] = pd.concat([self.tables[name], table], ignore_index=True) if name in self.tables else table


def load_results(
    storage: str | None = None, results: str | Path | None = None, study_name: str | None = None
) -> pd.DataFrame:
    """The results table from a study database or an exported .parquet/.csv file (exactly one of them)."""
    if (storage is None) == (results is None):
        raise ModelFitError("Give exactly one of --storage (a study database) or --results (an exported table).")
    if storage is not None:
        from freezestats.results import results_table
        from freezestats.trials import load_study, open_storage

        return results_table(load_study(open_storage(storage, must_exist=True), study_name))
    path = Path(results)
    if not path.is_file():
        raise ModelFitError(f"No results table at {str(path)!r}.")
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as err:  # pyarrow/pandas raise many types for unreadable files
        raise ModelFitError(f"Cannot read {path} as a results table: {err}") from err


def load_study_record(storage: str, study_name: str | None = None) -> dict[str, Any]:
    """The study's name, stored spec (plain data, as kept in the database) and provenance.

    The report's Methods and colophon are written from these, so that they describe what was run, not what a
    spec file says today. The spec is returned as stored (not re-validated), so keys added by newer versions
    of freezestats are kept and older studies still load.
    """
    from freezestats.trials import SPEC_ATTR, load_study, open_storage

    study = load_study(open_storage(storage, must_exist=True), study_name)
    attrs = study.user_attrs
    return {
        "name": study.study_name,
        "spec": attrs.get(SPEC_ATTR, {}),
        "spec_hash": attrs.get("spec_hash"),
        "provenance": attrs.get("provenance", {}),
    }


def analyze(
    data: pd.DataFrame,
    *,
    model: str = "mixed",
    response: str = "heldout",
    variance: str = "per_size",
    tasks: list[str] | None = None,
    reference: int = 0,
    margin: float | None = None,
    adjust: str = "holm",
    delta: float | None = None,
    n_boot: int = 2000,
    pooled: bool = False,
    adjust_across: str = "none",
    bootstrap_tests: int = 0,
    progress: Callable[[int, int], object] | None = None,
    items: pd.DataFrame | None = None,
) -> Analysis:
    """Run every analysis of the study on ``data`` (the results table), one task at a time.

    ``bootstrap_tests > 0`` adds a parametric-bootstrap likelihood-ratio test of the frozen × size interaction
    (``interaction_test_bootstrap``) with that many draws, reporting each draw to ``progress(done, total)``; it is
    not in the default path, which stays within seconds for a 350-run table.

    ``items`` (the per-item predictions, :func:`freezestats.item_predictions.item_predictions`) adds the
    non-inferiority sequence with item uncertainty (``noninferiority_items``) beside the seed-only one; the
    answer stays on the seed-only intervals, the table says where the two differ.
    """
    from freezestats import stats
    from freezestats.stats._checks import normalize_results
    from freezestats.stats.failures import failure_model, failure_rates
    from freezestats.stats.lee import operating_point, relative_scores
    from freezestats.stats.mixed_grouped import crossed_orders, randomness_sources
    from freezestats.stats.paired import paired_contrasts
    from freezestats.stats.power import power_by_simulation, seeds_for_power
    from freezestats.stats.reference import compare_with_reference
    from freezestats.stats.variance import cell_summary, seed_spread, spread_test

    if model not in MODELS:
        raise ModelFitError(f"`--model` must be one of {list(MODELS)}, but got {model!r}.")
    if response not in RESPONSES:
        raise ModelFitError(f"`--metric` must be one of {list(RESPONSES)}, but got {response!r}.")
    if variance not in VARIANCES:
        raise ModelFitError(f"`--variance` must be one of {list(VARIANCES)}, but got {variance!r}.")
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise ModelFitError(f"`--margin` must be > 0, but got {margin}.")
    if adjust_across not in ("none", "sizes"):
        raise ModelFitError(f"`--adjust-across` must be 'none' or 'sizes', but got {adjust_across!r}.")
    if data is None or len(data) == 0:
        raise ModelFitError("The results table is empty: run the study first (freezestats run).")
    missing = [c for c in ("task", "frozen_layers", "train_size", "seed", response, "failed") if c not in data.columns]
    if missing:
        raise ModelFitError(
            f"The results table lacks column(s) {missing}, which every analysis needs; is it a freezestats export "
            "(`freezestats export`), or a table with those columns (one row per run)?"
        )
    _refuse_mixed_arms(data)
    data = normalize_results(data)
    grid = data[data["role"] == "grid"]
    available = sorted(grid["task"].unique())
    tasks = tasks or available
    unknown = [t for t in tasks if t not in available]
    if unknown:
        raise ModelFitError(f"Task(s) {unknown} are not in the results table; it has {available}.")
    result = Analysis(
        settings={
            "model": model,
            "response": response,
            "response_note": RESPONSE_NOTES[response],
            "variance": variance if model == "mixed" else None,
            "reference": reference,
            "margin": margin,
            "adjust": adjust,
            "adjust_across": adjust_across,
            "margins": {},
            "delta": delta or margin or 0.02,
            "tasks": tasks,
            "n_runs": len(grid),
            "pooled": pooled,
            "freezestats_version": __version__,
        }
    )

    def attempt(name: str, task: str, make: Callable[[], pd.DataFrame], **labels: str) -> None:
        try:
            result.add(name, task, make(), **labels)
        except ModelFitError as err:
            result.warnings.append(f"{task}: {name}{' ' + str(labels) if labels else ''} not computed: {err}")

    for task in tasks:
        one = grid[grid["task"] == task]
        # Failure on the analysed metric's checkpoint, not the runner's final-checkpoint flag: that is what the
        # fits without failed runs leave out and what the failure model and rates describe.
        flags, rule = _metric_failures(one, response)
        one = one.assign(failed=flags.to_numpy(), failed_runner=one["failed"].to_numpy())
        result.settings.setdefault("failure_rule", {})[task] = {"rule": rule, "checkpoint": CHECKPOINT_OF[response]}
        attempt("cell_summary", task, lambda one=one: cell_summary(one, response))
        attempt("seed_spread", task, lambda one=one: seed_spread(one, response))
        attempt("spread_test", task, lambda one=one: spread_test(one, response))
        attempt("failure_rates", task, lambda one=one: failure_rates(one))
        attempt("failure_model", task, lambda one=one: failure_model(one, on_separation="nan"))
        attempt("failure_summary", task, lambda one=one, rule=rule: _failure_summary(one, response, rule))
        attempt(
            "relative_scores", task, lambda one=one: relative_scores(one, response, reference=reference, n_boot=n_boot)
        )
        attempt(
            "operating_point", task, lambda one=one: operating_point(one, response, reference=reference, n_boot=n_boot)
        )
        # The side-by-side with the blog uses the blog's own number, best_dev, whatever the analysed metric.
        attempt("reference_comparison", task, lambda one=one: compare_with_reference(one, response="best_dev"))
        attempt("paired_contrasts", task, lambda one=one: paired_contrasts(one, response, reference=reference))
        all_runs_fit = None
        for fit_name, include_failed in (("all_runs", True), ("without_failed", False)):
            labels = {"fit": fit_name}
            try:
                fit = _fit(model, one, response, include_failed, variance)
            except ModelFitError as err:
                result.warnings.append(f"{task}: {model} model ({fit_name}) not fitted: {err}")
                continue
            if fit_name == "all_runs":
                all_runs_fit = fit
            result.add("fixed_effects", task, fit.fixed_effects, **labels)
            result.add("diagnostics", task, _diagnostics_table(fit, model), **labels)
            result.warnings.extend(f"{task}: {model} ({fit_name}): {w}" for w in fit.diagnostics.warnings)
            if hasattr(fit, "variance_components"):
                result.add("variance_components", task, fit.variance_components, **labels)
            if model == "mixed" and fit_name == "without_failed":
                attempt("two_part_contrasts", task, lambda one=one: _two_part(one, response, reference))
            if model == "mixed" and fit_name == "all_runs" and crossed_orders(one):
                attempt("randomness_sources", task, lambda fit=fit: randomness_sources(fit))
            if model == "glmm":  # its EMMs are logits; what a reader wants is the marginal accuracy
                attempt("marginal_accuracy", task, lambda fit=fit: stats.marginal_accuracy(fit), **labels)
                continue
            attempt("emmeans", task, lambda fit=fit: stats.estimated_marginal_means(fit), **labels)
            attempt("contrasts", task, lambda fit=fit: stats.contrasts_vs_reference(fit, reference, adjust), **labels)
            if margin is not None:
                attempt("equivalence", task, lambda fit=fit: stats.equivalence_tests(fit, margin, reference), **labels)
            if fit_name == "all_runs":
                _answer_as_tests(result, attempt, fit, one, task, reference, margin, adjust_across)
                if items is not None:
                    _item_uncertainty(result, attempt, one, items, task, response)
            if model == "mixed" and fit_name == "all_runs":
                task_margin = result.settings["margins"].get(task)
                attempt(
                    "power",
                    task,
                    lambda fit=fit, m=task_margin: power_by_simulation(
                        fit, result.settings["delta"], n_sim=1000, margin=m
                    ),
                )
                if "power" in result.tables:
                    curve = result.tables["power"][result.tables["power"]["task"] == task]
                    result.settings.setdefault("seeds_for_80pct_power", {})[task] = seeds_for_power(curve)
                    result.settings.setdefault("seeds_per_size", {})[task] = _seeds_per_size(curve)
        if model in ("mixed", "ols"):
            # The test of the mixed model (the one fitted above when the model is mixed, not refitted).
            kind = variance if model == "mixed" else "per_size"
            reuse = all_runs_fit if model == "mixed" else None
            attempt(
                "interaction_test",
                task,
                lambda one=one, kind=kind, reuse=reuse: stats.interaction_test(one, response, variance=kind, fit=reuse),
            )
            if bootstrap_tests > 0:
                attempt(
                    "interaction_test_bootstrap",
                    task,
                    lambda one=one, kind=kind: stats.interaction_test(
                        one, response, variance=kind, method="bootstrap", n_boot=bootstrap_tests, progress=progress
                    ),
                )
            attempt("variance_homogeneity", task, lambda one=one: variance_homogeneity(one, response))
            _warn_unequal_spread(result, task, model, variance)
    if pooled:
        from freezestats.stats.pooled import fit_pooled, task_interaction_test

        chosen = grid[grid["task"].isin(tasks)]
        try:
            fit = fit_pooled(chosen, response)
            result.tables["pooled_fixed_effects"] = fit.fixed_effects
            result.tables["pooled_variance_components"] = fit.variance_components
            result.tables["task_interaction_test"] = task_interaction_test(chosen, response, fit=fit)
            result.warnings.extend(f"pooled model: {w}" for w in fit.warnings)
        except ModelFitError as err:
            result.warnings.append(f"pooled model not fitted: {err}")
    if not any(name in result.tables for name in ("fixed_effects",)):
        raise ModelFitError("No model could be fitted: " + " | ".join(result.warnings))
    return result


#: The checkpoint whose predictions each response scores (freezestats.predictions.CHECKPOINTS).
CHECKPOINT_OF = {"best_dev": "best", "heldout": "heldout", "final_dev": "final"}


def _two_part(runs: pd.DataFrame, response: str, reference: int) -> pd.DataFrame:
    """Contrasts of the expected score with failures in two parts (:mod:`freezestats.stats.two_part`). The healthy
    runs get a variance per cell, the structure `bench/coverage.py` validated (scenario b: every contrast >= 0.92;
    with a variance per size, frozen 10 at n = 100 falls to 0.86)."""
    from freezestats.stats.two_part import two_part_contrasts

    return two_part_contrasts(runs, response, reference=reference, variance="per_cell")


def _metric_failures(runs: pd.DataFrame, response: str) -> tuple[pd.Series, str]:
    """Which runs failed, judged on the checkpoint the analysed metric scores, and the rule used.

    Accuracy tasks use the exact binomial test against the majority rate; other metrics (MCC, F1) have no
    majority *accuracy* in the table, so they use the dominant-class rule (one class takes >= 95% of the
    predictions). Runs without stored counts (older studies) keep the runner's final-checkpoint flag.
    """
    from freezestats.stats.failures import flag_failures

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
    on the checkpoint the analysed metric scores, by ``rule`` (:func:`_metric_failures`)."""
    from freezestats.stats.failures import failure_summary

    return failure_summary(runs, runs["failed"], response=response).assign(
        rule=rule, checkpoint=CHECKPOINT_OF[response]
    )


def _seeds_per_size(curve: pd.DataFrame) -> dict[str, dict[str, int | None]]:
    """Seeds needed per train size: for 80% power to detect delta (Holm within the size), and for 80% power to
    call a depth with no true cost non-inferior at the margin."""
    from freezestats.stats.power import seeds_for_power

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


def _answer_as_tests(
    result: Analysis,
    attempt: Callable[..., None],
    fit: Any,
    runs: pd.DataFrame,
    task: str,
    reference: int,
    margin: float | None,
    adjust_across: str,
) -> None:
    """The headline answer as tests: non-inferiority in fixed sequence shallow to deep (after checking that the
    reference beats the majority baseline), and Lee et al.'s 90% criterion as a linear test."""
    from freezestats import stats

    metric = str(runs["metric"].mode().iloc[0]) if "metric" in runs.columns and runs["metric"].notna().any() else ""
    used = margin if margin is not None else stats.default_margin(metric or "accuracy")
    result.settings["margins"][task] = used
    n_sizes = runs["train_size"].nunique()
    alpha = 0.05 / n_sizes if adjust_across == "sizes" else 0.05
    baseline = None
    if "majority_baseline" in runs.columns and runs["majority_baseline"].notna().all():
        baseline = runs.groupby("train_size")["majority_baseline"].mean()
    attempt(
        "noninferiority",
        task,
        lambda: stats.noninferiority_sequence(fit, margin=used, reference=reference, adjust_across=adjust_across),
    )
    check = None
    if baseline is not None:
        attempt(
            "baseline_check", task, lambda: stats.reference_beats_baseline(fit, baseline, alpha, reference=reference)
        )
        table = result.tables.get("baseline_check")
        check = table[table["task"] == task].drop(columns="task") if table is not None else None
    sequence = result.tables.get("noninferiority")
    if sequence is not None and (sequence["task"] == task).any():
        mine = sequence[sequence["task"] == task].drop(columns="task")
        attempt("answer", task, lambda: stats.noninferiority_answer(mine, check))
    attempt("lee_tests", task, lambda: stats.lee_ratio_tests(fit, ratio=0.9, reference=reference))


def _item_uncertainty(
    result: Analysis, attempt: Callable[..., None], runs: pd.DataFrame, items: pd.DataFrame, task: str, response: str
) -> None:
    """The non-inferiority sequence with the items' sampling variance added (:mod:`freezestats.stats.items`)."""
    from freezestats.stats.items import noninferiority_with_items

    sequence = result.tables.get("noninferiority")
    if sequence is None or not (sequence["task"] == task).any():
        return
    mine = sequence[sequence["task"] == task].drop(columns="task")
    metric = str(runs["metric"].mode().iloc[0]) if "metric" in runs.columns else "accuracy"
    task_items = items[items["task"] == task]
    result.settings["answer_uncertainty"] = "seeds"
    attempt("noninferiority_items", task, lambda: noninferiority_with_items(mine, runs, task_items, response, metric))


def variance_homogeneity(data: pd.DataFrame, response: str) -> pd.DataFrame:
    """Brown–Forsythe test that all (frozen_layers, train_size) cells share one residual variance.

    The mixed and OLS models assume they do; fine-tuning runs often break it (collapsed cells have no
    spread, small-data cells a lot). Cells with fewer than 3 runs are left out (with 2 runs both absolute
    deviations from the median are equal, so they carry no information on spread).

    Returns one row: ``statistic, p_val, n_groups, n, min_sd, max_sd``.
    """
    from scipy import stats as scipy_stats

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
    statistic, p_val = scipy_stats.levene(*usable, center="median")
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


def write_analysis(
    analysis: Analysis,
    out_dir: str | Path,
    *,
    results: pd.DataFrame | None = None,
    study: dict[str, Any] | None = None,
) -> Path:
    """Every table as ``<name>.parquet`` and ``<name>.csv``, plus ``analysis.json``; returns the JSON path.

    ``results`` (the analysed runs, as ``results.parquet``) and ``study`` (:func:`load_study_record`, as
    ``study.json``) are kept beside the tables when given, so that ``freezestats report --analysis DIR`` can
    draw one dot per run and describe the protocol without the study database.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in analysis.tables.items():
        table.to_parquet(out / f"{name}.parquet", index=False)
        table.to_csv(out / f"{name}.csv", index=False)
    if results is not None:
        results.to_parquet(out / RESULTS_FILE, index=False)
    if study is not None:
        (out / STUDY_FILE).write_text(json.dumps(study, indent=1, default=str))
    document = {
        "settings": analysis.settings,
        "warnings": analysis.warnings,
        "tables": {name: json.loads(t.to_json(orient="records")) for name, t in analysis.tables.items()},
    }
    path = out / "analysis.json"
    path.write_text(json.dumps(document, indent=1, default=str))
    return path


def read_analysis(in_dir: str | Path) -> Analysis:
    """The :class:`Analysis` that :func:`write_analysis` stored in ``in_dir`` (tables from the parquet files).

    Raises ModelFitError naming the folder when it is missing, has no ``analysis.json``, or holds no table,
    because a report of an empty analysis would be a page of "not computed".
    """
    folder = Path(in_dir)
    if not folder.is_dir():
        raise ModelFitError(f"No analysis folder at {str(folder)!r}; write one with `freezestats analyze -o DIR`.")
    path = folder / "analysis.json"
    if not path.is_file():
        raise ModelFitError(
            f"{folder} holds no analysis.json, so it is not an analysis folder; write one with "
            f"`freezestats analyze -o {folder}`, or give --storage / --results."
        )
    try:
        document = json.loads(path.read_text())
        settings, warnings, names = document["settings"], list(document["warnings"]), list(document["tables"])
    except (ValueError, KeyError, TypeError) as err:
        raise ModelFitError(f"{path} is not an analysis.json written by freezestats analyze: {err}") from err
    tables = {}
    for name in names:
        table_path = folder / f"{name}.parquet"
        if not table_path.is_file():
            raise ModelFitError(f"{path} lists table {name!r}, but {table_path.name} is missing from {folder}.")
        tables[name] = pd.read_parquet(table_path)
    if not tables:
        raise ModelFitError(f"The analysis in {folder} has no tables; run freezestats analyze again.")
    return Analysis(settings=settings, tables=tables, warnings=warnings)


def _test_text(row: Any) -> str:
    """An F test as F(num, den) = f, p; a likelihood-ratio test (no F) as LR = x, df, p."""
    if pd.notna(getattr(row, "f_stat", float("nan"))):
        return f"F({int(row.num_df)}, {row.den_df:.1f}) = {row.f_stat:.2f}, p={row.p_val:.3g} (Satterthwaite df)"
    return f"LR={row.lr_stat:.2f}, df={int(row.df)}, p={row.p_val:.3g}"


def summary_lines(analysis: Analysis) -> list[str]:
    """A short human summary: the contrasts against full fine-tuning and what the study says."""
    s = analysis.settings
    lines = [
        f"freezestats analyze: {s['model']} model of {s['response']} ({s['n_runs']} runs); "
        f"{s['response']}: {s['response_note']}."
    ]
    contrasts = analysis.tables.get("contrasts")
    answers = analysis.tables.get("answer")
    for task in s["tasks"]:
        lines.append(f"[{task}]")
        if answers is not None and (answers["task"] == task).any():
            family = "all train sizes (Bonferroni)" if s.get("adjust_across") == "sizes" else "each train size"
            lines.append(
                f"  answer (non-inferiority, margin {s['margins'].get(task)}, fixed sequence shallow to deep; "
                f"family: {family}):"
            )
            lines.extend(f"    {statement}" for statement in answers.loc[answers["task"] == task, "statement"])
            lines.append(f"  superiority contrasts ({s['adjust']}-adjusted within a size; not shown ≠ no cost):")
        if contrasts is not None:
            c = contrasts[(contrasts["task"] == task) & (contrasts["fit"] == "all_runs")]
            for size, group in c.groupby("train_size"):
                parts = [
                    f"{int(r.frozen_layers)}: {r.estimate:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] p_adj={r.p_adj:.3g}"
                    for r in group.itertuples()
                ]
                lines.append(f"  n={size}: frozen vs {s['reference']} → " + "; ".join(parts))
        inter = analysis.tables.get("interaction_test")
        if inter is not None and (inter["task"] == task).any():
            r = inter[inter["task"] == task].iloc[0]
            lines.append(f"  frozen × size interaction: {_test_text(r)}")
        op = analysis.tables.get("operating_point")
        if op is not None and (op["task"] == task).any():
            parts = [
                f"n={int(r.train_size)}: {r.trainable_layers} trainable [{r.ci_low}, {r.ci_high}]"
                for r in op[op["task"] == task].itertuples()
            ]
            lines.append("  90% of full quality: " + "; ".join(parts))
        per_size = s.get("seeds_per_size", {}).get(task)
        if per_size:
            parts = [
                f"n={size}: Δ {v['detect_delta'] or '>20'}, non-inferior {v.get('noninferior') or '>20'}"
                for size, v in per_size.items()
            ]
            lines.append(
                f"  seeds per cell for 80% power (Δ={s['delta']}, Holm within size; margin "
                f"{s['margins'].get(task)}; SDs taken as known): " + "; ".join(parts)
            )
    pooled = analysis.tables.get("task_interaction_test")
    if pooled is not None:
        r = pooled.iloc[0]
        lines.append(f"[all tasks] does freezing act differently per task? {_test_text(r)}")
    lines.extend(f"warning: {w}" for w in analysis.warnings)
    return lines


def _refuse_mixed_arms(data: pd.DataFrame) -> None:
    """The models here compare freeze depths; a table of other arms (or of several) is not silently pooled."""
    arms = sorted(data["arm"].dropna().unique()) if "arm" in data.columns else []
    if len(arms) > 1 or (arms and data["frozen_layers"].isna().any()):
        raise ModelFitError(
            f"The results table holds arm(s) {arms}, but `analyze` fits the freeze-depth model of one freeze arm; "
            "select one freeze arm's rows (the across-arm comparison is not implemented yet)."
        )

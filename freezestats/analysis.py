"""Analyse a results table: every statistic the report needs, per task, as named tidy tables.

This is the stage between the results table and the report: ``analyze`` runs the model the user asked
for (``mixed``, ``glmm`` or ``ols``) with and without failed runs, and the model-free analyses (cell
summaries, seed spread, failure rates, Lee et al.'s operating point, the comparison with the published
figures), and keeps every table plus the warnings that came up. ``write_analysis`` stores them as
parquet + CSV and ``analysis.json``; nothing is rounded here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from freezestats import __version__
from freezestats.analysis_arms import add_strategy_tables, freeze_rows
from freezestats.analysis_io import (
    RESULTS_FILE,
    SECOND_MODE,
    STUDY_FILE,
    Analysis,
    read_analysis,
    summary_lines,
    write_analysis,
)
from freezestats.exceptions import ModelFitError

__all__ = [
    "MODELS",
    "RESPONSES",
    "RESULTS_FILE",
    "STUDY_FILE",
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
RESPONSES = ("best_dev", "final_dev", "heldout")
RESPONSE_NOTES = {
    "best_dev": "best validation score during training: the blog's number; the same data selects and scores the "
    "checkpoint, so it is biased upwards (more so for noisier, smaller-data cells)",
    "final_dev": "score after the last step: no checkpoint selection, no selection bias",
    "heldout": "checkpoint selected on one fixed half of the validation set and scored on the other: unbiased",
}


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


def _trained_alone(grid: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The runs of tasks trained alone, and how many rows of task groups were left out.

    A group trial gives a row per task; pooled with the single-task runs of that task it would mix two
    experiments (and rows of one trial, which share an encoder, as if independent).
    """
    if "trained_with" not in grid.columns:
        return grid, 0
    alone = grid["trained_with"].isna() | (grid["trained_with"] == grid["task"])
    return grid[alone], int((~alone).sum())


def _cross_encoded(data: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows of cross-encoded trials (every row of a table from before ``pair_encoding``), and how many
    ``bi`` rows were left out: pooled with the cross runs of their cell they would look like extra seeds."""
    if "pair_encoding" not in data.columns:
        return data, 0
    cross = data["pair_encoding"].isna() | (data["pair_encoding"] == "cross")
    return data[cross], int((~cross).sum())


def _pair_encodings(
    attempt: Callable[..., None], grid: pd.DataFrame, tasks: list[str], response: str, adjust: str
) -> None:
    """Per task with bi runs: bi minus cross in each cell where both ran (:mod:`freezestats.stats.pair_encoding`)."""
    from freezestats.stats.pair_encoding import pair_encoding_contrasts

    for task in tasks:
        rows = grid[grid["task"] == task]
        if rows["pair_encoding"].eq("bi").any():
            make = lambda rows=rows, task=task: pair_encoding_contrasts(rows, response, task=task, adjust=adjust)  # noqa: E731
            attempt("pair_encoding", task, make)


def _shared_encoder(attempt: Callable[..., None], grid: pd.DataFrame, tasks: list[str], response: str) -> None:
    """Per task trained both alone and in a group: the shared-encoder contrasts (one model per task)."""
    from freezestats.stats.shared_encoder import shared_encoder_contrasts

    for task in tasks:
        rows = grid[grid["task"] == task]
        if (rows["trained_with"].notna() & (rows["trained_with"] != task)).any():
            make = lambda rows=rows, task=task: shared_encoder_contrasts(rows, response, task=task)  # noqa: E731
            attempt("shared_encoder", task, make)


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
    from freezestats.stats.reference import compare_with_reference, load_reference
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
    every = normalize_results(data)
    data, n_bi = _cross_encoded(every)
    all_grid = data[data["role"] == "grid"]
    arm_grid, n_grouped = _trained_alone(all_grid)
    grid, arm_note = freeze_rows(arm_grid)  # the freeze model sees the freeze arm; every arm: strategy tables
    available = sorted(arm_grid["task"].unique())
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

    if n_bi:
        result.warnings.append(
            f"{n_bi} rows were trained with pair_encoding = 'bi': every analysis but the pair_encoding table (bi "
            "minus cross, paired by seed) uses the cross-encoded runs."
        )
    if n_grouped:
        result.warnings.append(
            f"{n_grouped} rows were trained in task groups (trained_with): each task's freeze analysis uses its runs "
            "trained alone, and the group rows are compared with those in the shared_encoder table."
        )

    def attempt(name: str, task: str, make: Callable[[], pd.DataFrame], **labels: str) -> None:
        try:
            result.add(name, task, make(), **labels)
        except ModelFitError as err:
            result.warnings.append(f"{task}: {name}{' ' + str(labels) if labels else ''} not computed: {err}")

    reference_tasks = set(load_reference()["task"])
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
        # The side-by-side with the blog uses the blog's own number, best_dev, whatever the analysed metric. The
        # blog published SST-2 and CoLA only: another task has nothing to stand beside, which is no warning.
        if task in reference_tasks:
            attempt("reference_comparison", task, lambda one=one: compare_with_reference(one, response="best_dev"))
        attempt("paired_contrasts", task, lambda one=one: paired_contrasts(one, response, reference=reference))
        two_part = None
        if model == "mixed":
            attempt("two_part_contrasts", task, lambda one=one: _two_part(one, response, reference))
            # the default's answer; an explicit --variance pooled / per_cell answers from that model, to compare
            if variance == "per_size":
                two_part = _answer_contrasts(result, one, task, response)
            else:
                result.settings.setdefault("answer_from", {})[task] = "model"
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
                _answer_as_tests(result, attempt, fit, one, task, reference, margin, adjust_across, two_part)
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
    if n_grouped:
        _shared_encoder(attempt, all_grid, tasks, response)
    if arm_note:
        result.warnings.append(arm_note)

        def margin_of(task: str) -> float:
            metric = arm_grid.loc[arm_grid["task"] == task, "metric"] if "metric" in arm_grid else pd.Series()
            return margin or stats.default_margin(str(metric.mode().iloc[0]) if metric.notna().any() else "accuracy")

        add_strategy_tables(attempt, arm_grid, tasks, response, margin_of)
    if n_bi:
        _pair_encodings(attempt, every[every["role"] == "grid"], tasks, response, adjust)
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
    runs get a variance per cell, the structure ``bench/coverage.py`` validated (README, *Coverage*; with a
    variance per size, frozen 10 at n = 100 fell to 0.86 in scenario b)."""
    from freezestats.stats.two_part import two_part_contrasts

    return two_part_contrasts(runs, response, reference=reference, variance="per_cell")


def _answer_contrasts(result: Analysis, runs: pd.DataFrame, task: str, response: str) -> pd.DataFrame | None:
    """The two-part contrasts when the answer is to come from them, else None (the per-size model's).

    Where some cell mixes healthy runs with failed runs far below them (:func:`failures_within_cells`), its
    scores are a healthy spread plus far outliers that no normal model of the cell covers: in scenario b of
    ``bench/coverage.py`` (5% of runs collapse) the per-size model's intervals covered 0.77-0.86 for several
    contrasts, the two-part contrasts at least 0.90 (README, *Coverage*). Where no cell does, the per-size model
    is the one that holds (scenario a) and has the more degrees of freedom. ``settings["answer_from"]`` records
    the choice per task.
    """
    from freezestats.stats.two_part import failures_within_cells

    mixed = failures_within_cells(runs, runs["failed"].fillna(False).astype(bool), response)
    table = result.tables.get("two_part_contrasts")
    mine = None if table is None else table[table["task"] == task].drop(columns="task")
    use = mixed and mine is not None and not mine.empty
    result.settings.setdefault("answer_from", {})[task] = "two_part" if use else "model"
    if mixed and not use:
        result.warnings.append(
            f"{task}: {SECOND_MODE}, but the two-part contrasts could not be computed, so the non-inferiority "
            "answer comes from the mixed model of all runs, whose intervals can be too narrow there "
            "(bench/coverage.py, scenario b)."
        )
    return mine if use else None


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
    two_part: pd.DataFrame | None = None,
) -> None:
    """The headline answer as tests: non-inferiority in fixed sequence shallow to deep (after checking that the
    reference beats the majority baseline), and Lee et al.'s 90% criterion as a linear test. The sequence tests
    ``two_part`` contrasts when given (:func:`_answer_contrasts`), else the fit's."""
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
        lambda: stats.noninferiority_sequence(
            fit if two_part is None else two_part, margin=used, reference=reference, adjust_across=adjust_across
        ),
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
    task_items = items[(items["task"] == task) & items["trial"].isin(runs["trial"])]  # not a group's trials
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

"""The hand-over from the learning-rate search to the grid: choose the rates, record the choice."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from freezestats.spec.study import StudySpec
from freezestats.study.cells import Cell, grid_cells, reusable_search_cell, search_cells
from freezestats.study.lr_search import choose_rates, rate_means, search_score
from freezestats.study.queue import trials_by_cell
from freezestats.study.trials import copy_trial, set_user_attrs

__all__ = ["grid_after_search"]


def grid_after_search(study: optuna.Study, spec: StudySpec, pool_sizes: dict[str, int]) -> list[Cell]:
    """Choose the rates from the finished search trials, record the choice, return the grid cells to run.

    The rate is chosen on the search seeds by ``lr_search.select_metric`` (default: the selection
    half of the validation set); the grid, frozen 0 included, then runs fresh on the grid seeds.
    Only with ``lr_search.reuse`` are grid cells that a search run already ran recorded as copies
    of it (``reused_from_trial``, ``lr_search_reuse``) instead of being run.
    """
    search = spec.lr_search
    by_cell = trials_by_cell(study)
    results = []
    search_trials: dict[Cell, FrozenTrial] = {}
    for cell in search_cells(spec, pool_sizes):
        trial = next((t for t in by_cell.get(cell.key, []) if t.state == TrialState.COMPLETE), None)
        if trial is not None:
            results.append((cell, search_score(trial.user_attrs, search.select_metric)))
            search_trials[cell] = trial
    chosen = choose_rates(results)
    set_user_attrs(
        study,
        {
            "lr_choice": [[*group, rate] for group, rate in sorted(chosen.items())],
            "lr_search_record": {
                "select_metric": search.select_metric,
                "seeds": list(search.seeds),
                "reuse": search.reuse,
                # [task, train_size, subset_draw, frozen_layers, rate, mean, n_runs] per group and rate
                "means": [
                    [*group, rate, mean, n]
                    for group, by_rate in rate_means(results).items()
                    for rate, (mean, n) in by_rate.items()
                ],
            },
        },
    )
    remaining = []
    for cell in grid_cells(spec, pool_sizes, chosen):
        reusable = reusable_search_cell(spec, cell)
        source = search_trials.get(reusable) if reusable is not None else None
        already = any(t.state == TrialState.COMPLETE for t in by_cell.get(cell.key, []))
        if source is not None and not already:
            copy_trial(study, source, cell, spec)
        elif source is None:
            remaining.append(cell)
    return remaining

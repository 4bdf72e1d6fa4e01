"""What a simulated grid is (:class:`Scenario`, what real runs do at each train size and depth) and the checks it
must pass before anything is drawn from it: a scenario is written by hand (presets, benches, tests), and a missing
cell or a correlation outside [-1, 1] would otherwise surface as a NaN deep inside a study. The simulator that
draws from it is :mod:`freezestats.stats.simulation.realistic`, which re-exports :class:`Scenario`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["Scenario", "check_scenario"]

Cell = tuple[int, int]  # (train_size, frozen_layers)


@dataclass(frozen=True)
class Scenario:
    """One task's simulated grid: what real runs do at each (train size, depth). Accuracies are task-level.

    ``accuracy[(n, k)]`` is a run's expected accuracy over seeds and items, collapsed runs included; the
    healthy runs' skill is solved from it. ``run_sd[n]`` is the reference's healthy run SD at size ``n`` over
    seeds, on the item population (accuracy units, first order: :math:`\\sigma A'(\\mu)`); ``depth_sd[k]``
    scales it per depth. ``rho[k]`` is depth ``k``'s seed correlation with the reference, ``collapse[n]`` the
    reference's collapse probability and ``depth_collapse[k]`` its factor per depth, ``item_sd[k]`` the SD of
    the items' depth deviations :math:`\\gamma_{ki}` (0 for the reference) on the scale where the items'
    difficulty has SD 1, ``noise_sd`` the run-by-item noise :math:`\\sigma_e`, and ``class_bias_sd`` the SD of
    a run's lean towards one class (:math:`\\beta_{ks}`, correlated across depths within a seed like the skill):
    it moves the run's accuracy on each class a lot and its accuracy little. ``collapse_rho[k]``, where given, is
    the seed-by-seed correlation of depth ``k``'s collapse draw with the reference's (a Gaussian copula: the
    rates stay ``collapse_rate``, and a seed that collapses at one depth tends to at the others, as real seeds
    do: ``bench/results/failure_concordance.txt``); ``None`` draws every run's collapse independently.
    """

    @property
    def item_scale(self) -> float:
        """The SD of what moves one item's answer between runs of the same skill (noise and class lean)."""
        return float(np.hypot(self.noise_sd, self.class_bias_sd))

    train_sizes: tuple[int, ...]
    depths: tuple[int, ...]
    accuracy: Mapping[Cell, float]
    run_sd: Mapping[int, float]
    depth_sd: Mapping[int, float]
    rho: Mapping[int, float]
    collapse: Mapping[int, float]
    depth_collapse: Mapping[int, float]
    item_sd: Mapping[int, float]
    noise_sd: float = 0.3
    class_bias_sd: float = 0.0
    seeds: int = 5
    n_items: int = 872
    population: int = 20_000
    majority_share: float = 0.51
    population_seed: int = 2020
    reference: int = 0
    task: str = "sst2"
    collapse_rho: Mapping[int, float] | None = None

    def collapse_rate(self, size: int, depth: int) -> float:
        """The probability that a run of depth ``depth`` at ``size`` collapses to the majority class."""
        return min(0.95, self.collapse[size] * self.depth_collapse[depth])


def check_scenario(scenario: Scenario) -> None:
    """Refuse a scenario that leaves a cell or a depth undefined, or whose numbers cannot be probabilities."""
    if scenario.reference not in scenario.depths:
        raise ValueError(f"the reference depth must be one of `depths`, but got {scenario.reference=}.")
    cells = [(n, k) for n in scenario.train_sizes for k in scenario.depths]
    missing = [c for c in cells if c not in scenario.accuracy]
    if missing:
        raise ValueError(f"every (train_size, depth) needs an accuracy, but {missing[:5]} have none.")
    for name in ("depth_sd", "rho", "depth_collapse", "item_sd"):
        lacking = [k for k in scenario.depths if k not in getattr(scenario, name)]
        if lacking:
            raise ValueError(f"`{name}` must give every depth a value, but lacks depths {lacking}.")
    for name in ("run_sd", "collapse"):
        lacking = [n for n in scenario.train_sizes if n not in getattr(scenario, name)]
        if lacking:
            raise ValueError(f"`{name}` must give every train size a value, but lacks sizes {lacking}.")
    for name in ("rho", "collapse_rho"):
        values = getattr(scenario, name)
        if values is None:
            continue
        if (
            any(k not in values for k in scenario.depths)
            or any(abs(r) > 1 for r in values.values())
            or values[scenario.reference] != 1
        ):
            raise ValueError(
                f"`{name}` must give every depth a value in [-1, 1], 1 for the reference, but got {dict(values)}."
            )
    if any(not 0 <= c < 1 for c in scenario.collapse.values()) or any(v < 0 for v in scenario.run_sd.values()):
        raise ValueError(
            f"need 0 <= collapse < 1 and run_sd >= 0, but got {dict(scenario.collapse)}, {dict(scenario.run_sd)}."
        )
    if scenario.seeds < 2 or scenario.n_items < 4 or scenario.n_items > scenario.population:
        raise ValueError(
            f"need seeds >= 2 and 4 <= n_items <= population, but got seeds={scenario.seeds}, "
            f"n_items={scenario.n_items}, population={scenario.population}."
        )

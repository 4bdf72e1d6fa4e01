"""The checks a simulated scenario must pass before anything is drawn from it, apart from the simulator itself:
a scenario is written by hand (presets, benches, tests), and a missing cell or a correlation outside [-1, 1]
would otherwise surface as a NaN deep inside a study."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from freezestats.stats.simulation.realistic import Scenario

__all__ = ["check_scenario"]


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

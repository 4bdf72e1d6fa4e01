"""Grid expansion (crossed data-order seeds included), learning-rate choice, and the simulated crossed table."""

from __future__ import annotations

import numpy as np
import pytest
from _factories import simple_spec

from freezestats.spec import parse_spec
from freezestats.study.cells import Cell, CellRole, grid_cells, reusable_search_cell, search_cells
from freezestats.study.lr_search import choose_rates, rate_means, search_score, select_half_best

POOLS = {"sst2": 67349, "cola": 8551}


def test_grid_is_the_full_product_with_unique_keys() -> None:
    spec = parse_spec(
        simple_spec(
            tasks=["sst2", "cola"],
            grid={"frozen_layers": [-1, 0, 3], "train_sizes": [50, 100], "seeds": [1, 2], "subset_draws": 2},
        )
    )
    cells = grid_cells(spec, POOLS)
    assert len(cells) == 2 * 3 * 2 * 2 * 2
    assert len({c.key for c in cells}) == len(cells)
    assert {c.learning_rate for c in cells} == {spec.training.learning_rate}
    assert {(c.task, c.frozen_layers, c.train_size, c.subset_draw, c.seed) for c in cells} == {
        (t, k, n, d, s) for t in ("sst2", "cola") for k in (-1, 0, 3) for n in (50, 100) for d in (0, 1) for s in (1, 2)
    }
    assert search_cells(spec, POOLS) == []


def test_full_resolves_to_the_pool_size() -> None:
    spec = parse_spec(simple_spec(tasks=["sst2", "cola"], grid={"train_sizes": ["full"]}))
    assert {(c.task, c.train_size) for c in grid_cells(spec, POOLS)} == {("sst2", 67349), ("cola", 8551)}


def test_full_model_search_runs_on_frozen_zero_and_waits_for_rates() -> None:
    spec = parse_spec(
        simple_spec(
            grid={"frozen_layers": [0, 2, 4], "train_sizes": [50], "seeds": [1, 2]},
            lr_search={"mode": "full-model", "rates": [1e-5, 3e-5]},
        )
    )
    search = search_cells(spec, POOLS)
    assert {c.frozen_layers for c in search} == {0} and len(search) == 2 * 2
    assert all(c.role is CellRole.SEARCH and c.key.startswith("search|") for c in search)
    assert grid_cells(spec, POOLS) == []  # nothing can run before the search decides
    cells = grid_cells(spec, POOLS, {("sst2", 50, 0, 0): 3e-5})
    assert len(cells) == 3 * 2 and {c.learning_rate for c in cells} == {3e-5}


def test_per_cell_search_searches_every_freeze_level() -> None:
    spec = parse_spec(
        simple_spec(
            grid={"frozen_layers": [0, 2], "train_sizes": [50], "seeds": [1]},
            lr_search={"mode": "per-cell", "rates": [1e-5, 3e-5]},
        )
    )
    assert {(c.frozen_layers, c.learning_rate) for c in search_cells(spec, POOLS)} == {
        (0, 1e-5),
        (0, 3e-5),
        (2, 1e-5),
        (2, 3e-5),
    }
    cells = grid_cells(spec, POOLS, {("sst2", 50, 0, 0): 1e-5, ("sst2", 50, 0, 2): 3e-5})
    assert {(c.frozen_layers, c.learning_rate) for c in cells} == {(0, 1e-5), (2, 3e-5)}


def _search(rate: float, seed: int, frozen: int = 0) -> Cell:
    return Cell("sst2", frozen, 50, 0, seed, rate, CellRole.SEARCH)


def test_choose_rates_takes_the_best_mean_over_seeds() -> None:
    results = [
        (_search(1e-5, 1), 0.80),
        (_search(1e-5, 2), 0.90),  # mean 0.85
        (_search(3e-5, 1), 0.95),
        (_search(3e-5, 2), 0.70),  # mean 0.825, best single run
        (_search(5e-5, 1), float("nan")),
        (_search(5e-5, 2), 0.99),
    ]  # nan mean: never chosen
    assert choose_rates(results) == {("sst2", 50, 0, 0): 1e-5}


def test_choose_rates_breaks_ties_to_the_smaller_rate_and_keeps_groups_apart() -> None:
    results = [
        (_search(3e-5, 1), 0.8),
        (_search(1e-5, 1), 0.8),
        (_search(1e-5, 1, frozen=2), 0.5),
        (_search(2e-5, 1, frozen=2), 0.6),
    ]
    assert choose_rates(results) == {("sst2", 50, 0, 0): 1e-5, ("sst2", 50, 0, 2): 2e-5}


@pytest.mark.parametrize("rate", [1e-5, 2.5e-5])
def test_search_key_includes_the_rate(rate: float) -> None:
    assert _search(rate, 1).key.endswith(f"lr={rate:g}")
    assert _search(rate, 1).group == ("sst2", 50, 0, 0)


def test_search_runs_on_the_search_seeds_and_the_grid_on_the_grid_seeds() -> None:
    spec = parse_spec(
        simple_spec(
            grid={"frozen_layers": [0, 2], "train_sizes": [50], "seeds": [1, 2]},
            lr_search={"mode": "full-model", "rates": [1e-5, 3e-5]},
        )
    )
    search = search_cells(spec, POOLS)
    assert {c.seed for c in search} == {1001, 1002}  # the default: 1001..1000+len(grid.seeds)
    grid = grid_cells(spec, POOLS, {("sst2", 50, 0, 0): 3e-5})
    assert {c.seed for c in grid} == {1, 2} and {c.frozen_layers for c in grid} == {0, 2}
    assert {c.seed for c in grid if c.frozen_layers == 0} == {c.seed for c in grid if c.frozen_layers == 2}
    assert all(reusable_search_cell(spec, c) is None for c in grid)  # nothing is copied from the search
    assert not {c.key for c in search} & {c.key for c in grid}
    explicit = parse_spec(
        simple_spec(
            grid={"frozen_layers": [0, 2], "train_sizes": [50], "seeds": [1, 2]},
            lr_search={"mode": "per-cell", "rates": [1e-5], "seeds": [7, 8, 9]},
        )
    )
    assert {(c.frozen_layers, c.seed) for c in search_cells(explicit, POOLS)} == {
        (k, s) for k in (0, 2) for s in (7, 8, 9)
    }


@pytest.mark.parametrize(("mode", "copied_levels"), [("full-model", {0}), ("per-cell", {0, 2})])
def test_only_reuse_copies_search_runs_into_the_grid(mode: str, copied_levels: set[int]) -> None:
    spec = parse_spec(
        simple_spec(
            grid={"frozen_layers": [0, 2], "train_sizes": [50], "seeds": [1, 2]},
            lr_search={"mode": mode, "rates": [1e-5, 3e-5], "reuse": True},
        )
    )
    search = set(search_cells(spec, POOLS))
    assert {c.seed for c in search} == {1, 2}  # reuse searches on the grid seeds
    chosen = {("sst2", 50, 0, k): 3e-5 for k in (0, 2)}
    copies = {c: reusable_search_cell(spec, c) for c in grid_cells(spec, POOLS, chosen)}
    assert {c.frozen_layers for c, source in copies.items() if source is not None} == copied_levels
    for cell, source in copies.items():
        if source is not None:
            assert source in search and source.role is CellRole.SEARCH
            assert (source.frozen_layers, source.seed, source.learning_rate) == (cell.frozen_layers, cell.seed, 3e-5)


def test_the_selection_half_score_of_a_run() -> None:
    curve = [{"select": 0.6, "score": 0.9}, {"select": float("nan"), "score": 1.0}, {"select": 0.7, "score": 0.1}]
    assert select_half_best(curve) == 0.7  # never the scoring half, and NaN counts as the worst
    assert np.isnan(select_half_best([{"select": float("nan")}]))
    assert search_score({"select_best": 0.8, "curve": curve, "heldout": 0.5}, "select") == 0.8
    assert search_score({"curve": curve, "heldout": 0.5}, "select") == 0.7  # trials stored before select_best
    assert search_score({"select_best": 0.8, "heldout": 0.5}, "heldout") == 0.5


def test_rate_means_are_what_choose_rates_compares() -> None:
    results = [(_search(1e-5, 1001), 0.6), (_search(1e-5, 1002), 0.8), (_search(3e-5, 1001), 0.65)]
    means = rate_means(results)[("sst2", 50, 0, 0)]
    assert means[1e-5] == pytest.approx((0.7, 2)) and means[3e-5] == (0.65, 1)
    assert choose_rates(results) == {("sst2", 50, 0, 0): 1e-5}


def test_an_uncrossed_cell_keeps_the_key_and_params_it_had_before_order_seeds() -> None:
    """Studies created before `grid.order_seeds` recognise their cells by these exact keys and params."""
    spec = parse_spec(simple_spec(grid={"frozen_layers": [2], "train_sizes": [50], "seeds": [3]}))
    (cell,) = grid_cells(spec, POOLS)
    assert cell.order_seed is None and cell.data_order_seed == 3
    assert cell.key == "sst2|frozen=2|n=50|draw=0|seed=3"
    assert cell.params() == {
        "task": "sst2",
        "frozen_layers": 2,
        "train_size": 50,
        "subset_draw": 0,
        "seed": 3,
        "learning_rate": 5e-5,
    }
    assert _search(1e-5, 1001).key == "search|sst2|frozen=0|n=50|draw=0|seed=1001|lr=1e-05"


def test_order_seeds_cross_every_seed_in_every_cell() -> None:
    spec = parse_spec(
        simple_spec(grid={"frozen_layers": [0, 2], "train_sizes": [50, 100], "seeds": [1, 2, 3], "order_seeds": [1, 9]})
    )
    cells = grid_cells(spec, POOLS)
    assert len(cells) == 2 * 2 * 3 * 2 and len({c.key for c in cells}) == len(cells)
    assert {(c.frozen_layers, c.train_size, c.seed, c.order_seed) for c in cells} == {
        (k, n, s, o) for k in (0, 2) for n in (50, 100) for s in (1, 2, 3) for o in (1, 9)
    }
    cell = next(c for c in cells if (c.frozen_layers, c.train_size, c.seed, c.order_seed) == (2, 50, 3, 9))
    assert cell.key == "sst2|frozen=2|n=50|draw=0|seed=3|order_seed=9" and cell.data_order_seed == 9
    assert cell.params()["order_seed"] == 9 and cell.params()["seed"] == 3
    # The pair (s, s) is a crossed cell too: its key names the order seed, unlike an uncrossed cell's.
    same = next(c for c in cells if (c.frozen_layers, c.train_size, c.seed, c.order_seed) == (0, 50, 1, 1))
    assert same.key.endswith("|seed=1|order_seed=1")


def test_search_cells_are_not_crossed_and_never_copied_into_a_crossed_grid() -> None:
    spec = parse_spec(
        simple_spec(
            grid={"frozen_layers": [0, 2], "train_sizes": [50], "seeds": [1, 2], "order_seeds": [5, 6]},
            lr_search={"mode": "full-model", "rates": [1e-5, 3e-5]},
        )
    )
    search = search_cells(spec, POOLS)
    assert len(search) == 2 * 2 and all(c.order_seed is None for c in search)  # each in its own seed's order
    assert {c.data_order_seed for c in search} == {1001, 1002}
    grid = grid_cells(spec, POOLS, {("sst2", 50, 0, 0): 3e-5})
    assert len(grid) == 2 * 2 * 2 and {c.order_seed for c in grid} == {5, 6}
    crossed_cell = Cell("sst2", 0, 50, 0, 1, 3e-5, order_seed=1)
    reusing = parse_spec(simple_spec(lr_search={"mode": "full-model", "rates": [3e-5], "reuse": True}))
    assert reusable_search_cell(reusing, crossed_cell) is None  # a crossed run is not the search's run


def test_simulated_crossed_table_has_every_seed_and_order_seed_pair() -> None:
    from freezestats.results.export import RESULT_COLUMNS
    from freezestats.stats.simulation.results import simulate_results

    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), seeds=3, order_seeds=2, rng=4)
    assert list(table.columns) == RESULT_COLUMNS
    assert RESULT_COLUMNS[-11:-6] == ["order_seed", "trained_with", "pair_encoding", "arm", "arm_level"]
    assert table["trained_with"].eq(table["task"]).all()
    assert len(table) == 2 * 2 * 3 * 2
    pairs = table.groupby(["frozen_layers", "train_size"])[["seed", "order_seed"]].apply(
        lambda g: sorted(map(tuple, g.to_numpy().tolist()))
    )
    assert all(p == [(s, o) for s in (1, 2, 3) for o in (1, 2)] for p in pairs)  # the runner's crossed grid
    assert table["trial"].tolist() == list(range(len(table)))
    spec = parse_spec(
        simple_spec(grid={"frozen_layers": [0, 2], "train_sizes": [50, 200], "seeds": [1, 2, 3], "order_seeds": [1, 2]})
    )
    assert {(c.frozen_layers, c.train_size, c.seed, c.order_seed) for c in grid_cells(spec, POOLS)} == set(
        zip(table.frozen_layers, table.train_size, table.seed, table.order_seed, strict=True)
    )


def test_simulated_order_seed_effects_are_the_ones_asked_for() -> None:
    from freezestats.stats.simulation.results import simulate_results

    only_order = simulate_results(
        0.7,
        frozen_levels=(0, 2),
        train_sizes=(50, 200),
        seeds=3,
        order_seeds=4,
        seed_sd=0.0,
        resid_sd=0.0,
        order_sd=0.05,
        rng=1,
    )
    shift = only_order["best_dev"] - 0.7
    assert shift.groupby(only_order["order_seed"]).nunique().eq(1).all()  # one intercept per order seed
    assert shift.groupby(only_order["order_seed"]).first().nunique() == 4
    assert shift.groupby(only_order["seed"]).nunique().eq(4).all()  # within a seed, the order seeds differ
    by_size = simulate_results(
        0.7,
        frozen_levels=(0, 2),
        train_sizes=(50, 200),
        seeds=2,
        order_seeds=3,
        seed_sd=0.0,
        resid_sd=0.0,
        order_size_sd=0.05,
        rng=1,
    )
    shift = by_size["best_dev"] - 0.7
    assert shift.groupby([by_size["order_seed"], by_size["train_size"]]).nunique().eq(1).all()
    assert shift.groupby(by_size["order_seed"]).nunique().eq(2).all()  # differs between the two sizes
    none = simulate_results(0.7, frozen_levels=(0,), train_sizes=(50,), order_seeds=2, seed_sd=0, resid_sd=0, rng=1)
    assert none["best_dev"].eq(0.7).all()  # order seeds with no SD cross the design and add nothing


def test_simulated_tables_without_order_seeds_are_unchanged() -> None:
    """Nothing extra is drawn without `order_seeds`: these values were recorded before the option existed."""
    from freezestats.stats.simulation.results import simulate_results

    table = simulate_results(rng=5, seed_size_sd=0.01, fail_rate=0.1, subset_draws=2, tasks=("sst2", "cola"))
    assert len(table) == 700 and int(table["failed"].sum()) == 67
    assert table["best_dev"].iloc[:3].tolist() == [0.6689769957101661, 0.6488000355043214, 0.6459627126700401]
    assert table["heldout"].iloc[-1] == 0.4820217317149794
    assert table["best_dev"].sum() == pytest.approx(523.2762557082846, abs=1e-9)
    assert table["order_seed"].eq(table["seed"]).all()  # not crossed: the order followed the seed
    assert simulate_results(rng=1)["best_dev"].iloc[:2].tolist() == [0.6028030867804871, 0.6458659059959138]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"order_sd": 0.01}, "`order_sd` and `order_size_sd` need `order_seeds`"),
        ({"order_size_sd": 0.01}, "`order_sd` and `order_size_sd` need `order_seeds`"),
        ({"order_seeds": 0}, "`order_seeds` must be None or an integer >= 1, but got order_seeds=0"),
        ({"order_seeds": 2, "order_sd": -0.1}, "standard deviations must be >= 0"),
    ],
)
def test_simulated_order_seed_arguments_are_checked(kwargs: dict, message: str) -> None:
    from freezestats.stats.simulation.results import simulate_results

    with pytest.raises(ValueError, match=message):
        simulate_results(frozen_levels=(0,), train_sizes=(50,), **kwargs)

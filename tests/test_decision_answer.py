"""The answer: collapse read off the select half only, exact McNemar, and the fixed sequence's dependence rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from freezestats.analysis.decision import decide
from freezestats.stats.decision.crossed import CrossedCost, VarianceParts
from freezestats.stats.decision.excess import excess_collapse_p
from freezestats.stats.decision.verdicts import DepthEvidence, Verdict, fixed_sequence

PARTS = VarianceParts(0.1, 1.0, 1.0)


def _evidence(depth: int, low: float, high: float, p: float = 1.0) -> DepthEvidence:
    cost = CrossedCost((low + high) / 2, 0.1, 9.0, low, high, 10, 100, PARTS)
    return DepthEvidence(depth, 10, 10, 0, 0, 0, 0, cost, p)


def test_exact_mcnemar_is_the_binomial_tail_of_the_discordant_pairs() -> None:
    assert excess_collapse_p(5, 0) == pytest.approx(1 / 32)
    assert excess_collapse_p(6, 1) == pytest.approx(8 / 128)
    assert excess_collapse_p(0, 0) == 1.0 and excess_collapse_p(0, 4) == 1.0


def test_within_runs_shallow_to_deep_and_stops_at_the_first_depth_not_shown() -> None:
    rows = fixed_sequence([_evidence(4, -0.5, 0.1), _evidence(-1, -0.2, 0.2), _evidence(1, -1.5, 0.1)], margin=1.0)
    assert [r.evidence.depth for r in rows] == [-1, 1, 4]
    assert [r.verdict for r in rows] == [Verdict.WITHIN, Verdict.NOT_KNOWN, Verdict.NOT_KNOWN]
    assert [r.reached for r in rows] == [True, True, False]  # depth 4's interval clears -1 but was never tested


def test_deeper_depths_never_change_a_shallower_within_verdict() -> None:
    shallow = [_evidence(-1, -0.2, 0.2), _evidence(1, -0.9, 0.1)]
    alone = [r.verdict for r in fixed_sequence(shallow, 1.0)]
    deeper = fixed_sequence([*shallow, _evidence(2, -3.0, -2.0), _evidence(6, -9.0, -5.0, p=0.001)], 1.0)
    assert [r.verdict for r in deeper[:2]] == alone == [Verdict.WITHIN, Verdict.WITHIN]
    assert [r.verdict for r in deeper[2:]] == [Verdict.BEYOND, Verdict.BEYOND]


def test_excess_collapse_stops_the_within_sequence_and_is_its_own_verdict() -> None:
    rows = fixed_sequence([_evidence(-1, -0.2, 0.2, p=0.01), _evidence(1, -0.2, 0.2, p=0.02)], 1.0)
    assert [r.verdict for r in rows] == [Verdict.EXCESS, Verdict.EXCESS]
    rows = fixed_sequence([_evidence(-1, -0.2, 0.2, p=0.01), _evidence(1, -0.2, 0.2)], 1.0)
    # excess runs deep to shallow and stops at depth 1, so -1's excess is not shown and does not stop within
    assert [r.verdict for r in rows] == [Verdict.WITHIN, Verdict.WITHIN]


def test_beyond_runs_deep_to_shallow() -> None:
    rows = fixed_sequence([_evidence(1, -2.0, -1.5), _evidence(2, -1.5, -0.5), _evidence(6, -5.0, -3.0)], 1.0)
    assert [r.verdict for r in rows] == [Verdict.NOT_KNOWN, Verdict.NOT_KNOWN, Verdict.BEYOND]


def _study(
    sizes: dict[int, float], costs: dict[int, float], seeds: int = 8, items: int = 400
) -> tuple[pd.DataFrame, ...]:
    """Runs, validation items and pool items. A run at size n collapses (always answers 1 on the select half)
    with probability ``sizes[n]``; a healthy run is right on a pool item with 0.85 + its depth's cost."""
    rng = np.random.default_rng(7)
    runs, val, pool = [], [], []
    labels = rng.integers(0, 2, items)
    trial = 0
    for n, collapse in sizes.items():
        for seed in range(1, seeds + 1):
            skill = rng.normal(0, 0.01)
            for depth, cost in costs.items():
                gone = rng.random() < collapse
                runs.append(dict(task="sst2", trial=trial, frozen_layers=depth, train_size=n, seed=seed,
                                 subset_draw=seed, metric="accuracy", wall_seconds=100.0 - 10 * depth,
                                 peak_mem_bytes=1e9, arm="freeze"))  # fmt: skip
                select = np.ones(100, int) if gone else rng.integers(0, 2, 100)
                val.append(pd.DataFrame(dict(task="sst2", trial=trial, idx=range(100), half="select",
                                             label=rng.integers(0, 2, 100), prediction_heldout=select)))  # fmt: skip
                right = rng.random(items) < 0.85 + cost / 100 + skill
                pool.append(pd.DataFrame(dict(task="sst2", trial=trial, idx=range(items), label=labels,
                                              prediction=np.where(right, labels, 1 - labels))))  # fmt: skip
                trial += 1
    return pd.DataFrame(runs), pd.concat(val), pd.concat(pool)


def test_other_sizes_never_change_a_sizes_verdicts() -> None:
    costs = {0: 0.0, 1: 0.0, 2: -0.3, 6: -12.0}
    runs, val, pool = _study({1000: 0.0}, costs)
    more, more_val, more_pool = _study({50: 0.7, 1000: 0.0}, costs)
    at_1000 = [d.table() for d in (decide(runs, val, pool)[0], decide(more, more_val, more_pool)[0])]
    alone, beside = (t[t["train_size"] == 1000].reset_index(drop=True) for t in at_1000)
    assert alone["verdict"].tolist() == beside["verdict"].tolist()
    assert beside["population"].iloc[0] == "sst2 evaluation pool" and (beside["items"] == 400).all()
    small = at_1000[1][at_1000[1]["train_size"] == 50]
    assert (small["depth_collapsed"] + small["full_collapsed"]).sum() > 0  # the 50-size did collapse


def test_collapse_reads_the_select_half_and_pairs_with_a_collapsed_run_leave_the_cost() -> None:
    runs, val, pool = _study({200: 0.5}, {0: 0.0, 1: 0.0})
    (row,) = decide(runs, val, pool)[0].table().itertuples()
    gone = val.groupby("trial")["prediction_heldout"].mean() == 1.0
    by = runs.set_index("trial")
    paired = [gone[by.index[(by.seed == s) & (by.frozen_layers == d)][0]] for s in range(1, 9) for d in (0, 1)]
    neither = sum(not (a or b) for a, b in zip(paired[::2], paired[1::2], strict=True))
    assert row.both_trained == neither and row.depth_collapsed + row.full_collapsed == sum(paired)
    assert row.subsets == "a training subset per seed" and row.seconds == 90.0 and row.full_seconds == 100.0


def test_the_decision_figures_draw_any_number_of_depths_with_their_colours() -> None:
    from freezestats.report.sections.cost_decision import decision_figure, price_figure

    costs = {0: 0.0, -1: 0.0, 1: -0.2, 2: -12.0}  # three depths: a colour list of length 3 once read as RGB
    runs, items, pool = _study({1000: 0.0}, costs)
    table = decide(runs, items, pool)[0].table()
    assert len(table) == 3
    for figure in (decision_figure(table), price_figure(table)):
        figure.canvas.draw()  # raised "RGBA sequence should have length 3 or 4" with one errorbar call per size

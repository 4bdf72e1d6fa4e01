"""The adaptive design's statistics (freezestats.stats.sequential): boundaries against published tables, the
decisions' contract (deterministic, blind to a seed beyond the look, decided on the history), error control
under optional stopping by a small Monte Carlo, and early decisions where the answer is clear."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats import SequentialPlan, next_seeds, replay, replay_summary, sequential_decisions
from freezestats.stats.sequential import SEQUENTIAL_COLUMNS, boundaries, crossing_probability, spent
from freezestats.stats.sequential.bounds import LookContrast, fractions_of, lower_bound, sequential_p
from freezestats.stats.sequential.history import SequentialHistory

EQUAL_5 = (0.2, 0.4, 0.6, 0.8, 1.0)


def test_obrien_fleming_type_boundaries_match_the_published_values():
    # Lan-DeMets O'Brien-Fleming-type spending, K = 5 equally spaced looks, one-sided alpha = 0.025: the classic
    # boundaries (Jennison & Turnbull 2000, sec. 7.2; R gsDesign(k=5, test.type=1, sfu=sfLDOF)$upper$bound)
    published = [4.877, 3.357, 2.680, 2.290, 2.031]
    assert np.round(boundaries(EQUAL_5, 0.025, "obrien_fleming"), 3).tolist() == published


def test_hwang_shih_decani_boundaries_match_gsdesigns_default_and_span_the_two_named_ones():
    # gsDesign's default one-sided design, gsDesign(k=5, test.type=1, alpha=0.025, sfu=sfHSD, sfupar=-4), as its
    # vignette prints the upper bounds (two decimals); rpact's asHSD with gammaA = -4 gives 3.25267 ... 2.02532
    published = [3.25, 2.99, 2.69, 2.37, 2.03]
    assert np.round(boundaries(EQUAL_5, 0.025, "hwang_shih_decani(-4)"), 2).tolist() == published
    # γ = 0 spends linearly; the first look's level rises with γ, from O'Brien-Fleming's towards Pocock's
    assert spent(0.3, 0.05, "hwang_shih_decani(0)") == pytest.approx(0.015)
    first = [spent(0.2, 0.025, k) for k in ("obrien_fleming", "hwang_shih_decani(-2)", "hwang_shih_decani(1)")]
    assert first[0] < first[1] < first[2] == pytest.approx(spent(0.2, 0.025, "pocock"), rel=0.05)


@pytest.mark.parametrize(
    ("name", "k", "constant"),
    [
        # Jennison & Turnbull (2000) Table 2.1, Pocock's constant C_P(K, alpha=0.05 two-sided)
        ("pocock", 2, 2.178),
        ("pocock", 5, 2.413),
        # Jennison & Turnbull (2000) Table 2.3, O'Brien & Fleming's constant C_B(K, 0.05): c_k = C_B sqrt(K/k)
        ("obrien_fleming", 2, 1.977),
        ("obrien_fleming", 5, 2.040),
    ],
)
def test_crossing_probability_of_the_published_constant_boundaries(name, k, constant):
    # a two-sided 0.05 design crosses each side with probability 0.025 (crossing both is below 1e-6)
    looks = np.arange(1, k + 1)
    bounds = np.full(k, constant) if name == "pocock" else constant * np.sqrt(k / looks)
    assert crossing_probability(bounds, tuple(looks / k)) == pytest.approx(0.025, abs=2e-4)


@pytest.mark.parametrize("kind", ["obrien_fleming", "pocock", "hwang_shih_decani(-1.5)", "hwang_shih_decani(2)"])
@pytest.mark.parametrize("fractions", [EQUAL_5, (0.35, 0.5, 0.9, 1.0), (0.8, 0.95, 1.0)])
def test_boundaries_spend_exactly_the_level(kind, fractions):
    for alpha in (0.001, 0.0125, 0.05):
        bounds = boundaries(fractions, alpha, kind)
        assert crossing_probability(bounds, fractions) == pytest.approx(alpha, rel=1e-3)
        assert spent(1.0, alpha, kind) == pytest.approx(alpha)
    levels = spent(np.linspace(0, 1, 11), 0.05, kind)
    assert levels[0] == 0 and np.all(np.diff(levels) > 0)


def test_pocock_type_boundaries_are_nearly_flat_and_obrien_fleming_falls():
    pocock = boundaries(EQUAL_5, 0.025, "pocock")
    assert np.ptp(pocock) < 0.06 and pocock[-1] > stats.norm.isf(0.025)
    assert np.all(np.diff(boundaries(EQUAL_5, 0.025)) < 0)


def test_a_look_with_no_new_information_spends_nothing():
    bounds = boundaries((0.5, 0.5000001, 1.0), 0.025)
    assert bounds[1] == bounds[0]
    assert crossing_probability(bounds[[0, 2]], (0.5, 1.0)) <= 0.025 + 1e-6


def test_information_fractions_stop_growing_where_the_items_dominate():
    seeds_only = fractions_of(0.02, 0.0, (2, 4, 6), 8)
    assert seeds_only == pytest.approx((0.25, 0.5, 0.75))
    items_heavy = fractions_of(0.02, 0.019, (2, 4, 6), 8)
    assert items_heavy[0] > 0.8 and items_heavy == tuple(sorted(items_heavy))


def test_a_look_reads_the_failure_parts_lower_side_at_its_own_level():
    # The ladder says the lower side at 0.1% is twice the 95% side scaled (a failure rate's long upper tail): the
    # look's bound at a local level of 0.001 must read it there, not extrapolate the 95% side.
    fractions = (1.0,)
    plain = LookContrast(0.01, 0.01, float("inf"), fractions)
    ladder = ((0.001, 0.02, float("inf")), (0.025, 0.01, float("inf")))
    skewed = replace(plain, ladder=ladder)
    assert lower_bound(plain, 0.001, "obrien_fleming") == pytest.approx(0.01 - stats.norm.isf(0.001) * 0.01)
    assert lower_bound(skewed, 0.001, "obrien_fleming") == pytest.approx(0.01 - stats.norm.isf(0.001) * 0.02)
    assert lower_bound(skewed, 0.025, "obrien_fleming") == pytest.approx(lower_bound(plain, 0.025, "obrien_fleming"))
    # margin 3 points: the plain look rejects at 0.001 (bound -0.021), the skewed one does not (-0.052)
    assert (
        sequential_p(plain, 0.03, 0.05, "obrien_fleming") < 0.001 < sequential_p(skewed, 0.03, 0.05, "obrien_fleming")
    )


def test_a_looks_decision_reads_the_contrasts_ladder():
    # One comparison, one look with the whole level (one-sided 0.05) there: the plain side's bound is
    # 0.01 - 1.645 * 0.01 > -0.03, a claim; the ladder's side at 0.05 is three times as long, no claim.
    plan = SequentialPlan(margin=0.03, alpha=0.05, min_seeds=4, max_seeds=4, seeds_per_round=2)
    row = {"train_size": 100, "frozen_layers": 4, "estimate": 0.01, "se": 0.01, "df": 1e6, "se_item": 0.0,
           "se_lower": 0.01, "df_lower": 1e6, "se_upper": 0.01, "df_upper": 1e6}  # fmt: skip
    long_tail = tuple((a, 0.03, 1e6) for a in (0.001, 0.005, 0.01, 0.025, 0.05))
    decisions = []
    for ladder in (None, long_tail):
        history = SequentialHistory([(100, 4)], plan, 0, "task")
        history.step(plan.look_of(4), pd.DataFrame([{**row, "lower_tail": ladder}]))
        decisions.append(history.table()["decision"].iloc[0])
    assert decisions == ["noninferior", "exhausted"]


def _study(rng: int, effects: dict[tuple[int, int], float], seeds: int = 9, sd: float = 0.01) -> pd.DataFrame:
    """Runs of depths 0, 1, 2 at two sizes: a seed effect shared with the reference plus the depth's own noise."""
    gen = np.random.default_rng(rng)
    rows = []
    for size in (100, 1000):
        shared = gen.normal(0, sd, seeds)
        for depth in (0, 1, 2):
            own = 0.0 if depth == 0 else gen.normal(0, sd, seeds)
            score = 0.8 + effects.get((size, depth), 0.0) + shared + own
            rows += [{"train_size": size, "frozen_layers": depth, "seed": s + 1, "heldout": score[s], "failed": False}
                     for s in range(seeds)]  # fmt: skip
    return pd.DataFrame(rows).assign(trial=lambda d: np.arange(len(d)))


PLAN = SequentialPlan(margin=0.01, alpha=0.05, min_seeds=3, max_seeds=9, seeds_per_round=3)
EFFECTS = {(100, 1): 0.0, (100, 2): -0.2, (1000, 1): -0.01, (1000, 2): -0.005}


def test_plan_looks_and_checks():
    assert PLAN.looks() == (3, 6, 9)
    assert SequentialPlan(margin=0.01, min_seeds=2, max_seeds=7, seeds_per_round=2).looks() == (2, 4, 6, 7)
    with pytest.raises(ModelFitError, match="min_seeds"):
        SequentialPlan(margin=0.01, min_seeds=1)
    with pytest.raises(ModelFitError, match="spending"):
        SequentialPlan(margin=0.01, spending="haybittle")
    with pytest.raises(ModelFitError, match=r"hwang_shih_decani\(γ\)' with γ a number"):
        SequentialPlan(margin=0.01, spending="hwang_shih_decani()")


def test_decisions_are_deterministic_and_have_the_contract_columns():
    runs = _study(1, EFFECTS)
    first = sequential_decisions(runs, None, PLAN)
    assert list(first.columns) == SEQUENTIAL_COLUMNS
    assert set(first["decision"]) <= {"noninferior", "inferior", "open", "exhausted"}
    pd.testing.assert_frame_equal(first, sequential_decisions(runs.sample(frac=1.0, random_state=3), None, PLAN))


def test_a_seed_beyond_the_look_changes_nothing():
    runs = _study(2, EFFECTS)
    at_six = runs[runs["seed"] <= 6]
    one_more = runs[(runs["seed"] <= 6) | ((runs["seed"] == 7) & (runs["train_size"] == 100))]
    pd.testing.assert_frame_equal(sequential_decisions(at_six, None, PLAN), sequential_decisions(one_more, None, PLAN))


def test_a_cell_decided_early_keeps_its_decision_and_clear_answers_come_early():
    runs = _study(3, EFFECTS, sd=0.004)
    full = sequential_decisions(runs, None, PLAN).set_index(["train_size", "frozen_layers"])
    early = sequential_decisions(runs[runs["seed"] <= 6], None, PLAN).set_index(["train_size", "frozen_layers"])
    # no true cost: shown non-inferior before the last look; a cost of 20 points: shown inferior as early
    assert full.loc[(100, 1), "decision"] == "noninferior" and full.loc[(100, 1), "look"] < len(PLAN.looks())
    assert full.loc[(100, 2), "decision"] == "inferior" and full.loc[(100, 2), "look"] < len(PLAN.looks())
    decided = early[early["decision"] != "open"].index
    assert len(decided) >= 2
    pd.testing.assert_frame_equal(full.loc[decided], early.loc[decided])


def test_next_seeds_names_the_open_cells_and_their_reference():
    decisions = pd.DataFrame({"train_size": [100, 100, 1000], "frozen_layers": [1, 2, 1], "reference": 0,
                              "look": [1, 2, 1], "decision": ["open", "open", "noninferior"]})  # fmt: skip
    wanted = next_seeds(decisions, PLAN)
    assert wanted.to_dict("records") == [
        {"train_size": 100, "frozen_layers": 0, "seeds_target": 9},
        {"train_size": 100, "frozen_layers": 1, "seeds_target": 6},
        {"train_size": 100, "frozen_layers": 2, "seeds_target": 9},
    ]
    assert next_seeds(decisions.assign(decision="inferior"), PLAN).empty


def _first_look(
    se_item: float, futility: float | None = None, spending: str = "obrien_fleming", power: str = "conditional"
) -> pd.DataFrame:
    """One comparison's decision at the first look (4 of at most 10 seeds): estimate -0.008 (margin 0.01), SE
    0.004, of which ``se_item`` is the items' part (it does not shrink with seeds); ``power`` is the plan's
    ``futility_power``."""
    plan = SequentialPlan(margin=0.01, alpha=0.05, min_seeds=4, max_seeds=10, seeds_per_round=2, futility=futility,
                          spending=spending, futility_power=power)  # fmt: skip
    history = SequentialHistory([(100, 1)], plan, reference=0, population="task")
    contrast = pd.DataFrame({"train_size": [100], "frozen_layers": [1], "estimate": [-0.008], "se": [0.004],
                             "df": [30.0], "se_item": [se_item]})  # fmt: skip
    history.step(1, contrast)
    return history.table()


def test_the_label_names_the_spending_function_and_its_bound_lies_between_the_named_two():
    tables = {kind: _first_look(0.0, spending=kind) for kind in ("obrien_fleming", "hwang_shih_decani(-1)", "pocock")}
    assert "Lan-DeMets O'Brien-Fleming-type spending" in tables["obrien_fleming"].loc[0, "procedure"]
    assert "Lan-DeMets Hwang-Shih-DeCani (γ = -1) spending" in tables["hwang_shih_decani(-1)"].loc[0, "procedure"]
    assert "Lan-DeMets Pocock-type spending" in tables["pocock"].loc[0, "procedure"]
    # at the first look (fraction 0.4) γ = -1 spends more than O'Brien-Fleming and less than Pocock
    lower = [tables[kind].loc[0, "lower"] for kind in tables]
    assert lower[0] < lower[1] < lower[2]


def test_a_cell_that_cannot_close_within_max_seeds_stops_and_gets_no_more_seeds():
    # The "open and can still close within the maximum". The same estimate and SE, and neither bound
    # excludes -0.01 yet. Where the SE is all seeds, 10 seeds would shrink it to 0.004 * sqrt(4/10) = 0.0025, and
    # an estimate one SE better (-0.004) would then clear the margin: open, and it gets seeds. Where the items
    # make up 0.0039 of it, 10 seeds leave the SE at 0.0039: even -0.004 - 1.645 * 0.0039 < -0.01, and -0.012 +
    # 1.645 * 0.0039 > -0.01: neither side can close, so it stops (exhausted) and next_seeds asks for nothing.
    plan = SequentialPlan(margin=0.01, alpha=0.05, min_seeds=4, max_seeds=10, seeds_per_round=2)
    seeds_only, items_heavy = _first_look(0.0), _first_look(0.0039)
    for table in (seeds_only, items_heavy):
        assert table.loc[0, "lower"] < -0.01 < table.loc[0, "upper"]  # not decided by the bounds
    assert seeds_only.loc[0, "decision"] == "open"
    assert next_seeds(seeds_only, plan)["seeds_target"].tolist() == [6, 6]  # the depth and its reference
    assert items_heavy.loc[0, "decision"] == "exhausted" and items_heavy.loc[0, "look"] == 1
    assert next_seeds(items_heavy, plan).empty
    # the stop's conditional power under the current estimate: the estimate at 10 seeds given the current one
    # has SD sqrt(a * 6) / 10, a = (0.004^2 - 0.0039^2) * 4; the chance its lower bound clears -0.01 is tiny
    a = (0.004**2 - 0.0039**2) * 4
    se_max = np.sqrt(a / 10 + 0.0039**2)
    power = stats.norm.sf((-0.01 + 1.645 * se_max + 0.008) / (np.sqrt(a * 6) / 10))
    assert power < stats.norm.cdf(-2)


def test_a_futility_threshold_stops_a_cell_whose_conditional_power_is_below_it():
    # The same first look, all seeds. Were the truth -0.008, the estimate at 10 seeds has SD sqrt(a * 6) / 10
    # around it and its SE is sqrt(a / 10): the chance that its lower bound clears -0.01 is about 0.135, that
    # its upper bound falls below -0.01 about 0.001. The lenient default keeps it; so does a 10% futility
    # threshold; a 20% one stops it.
    a = 0.004**2 * 4
    se_max, spread = np.sqrt(a / 10), np.sqrt(a * 6) / 10
    power = stats.norm.cdf((-0.008 + 0.01 - stats.norm.ppf(0.95) * se_max) / spread)
    assert 0.1 < power < 0.2
    assert _first_look(0.0).loc[0, "decision"] == "open"
    assert _first_look(0.0, futility=0.1).loc[0, "decision"] == "open"
    assert _first_look(0.0, futility=0.2).loc[0, "decision"] == "exhausted"
    # the label names the stop the study used
    assert "below 0.2)" in _first_look(0.0, futility=0.2).loc[0, "procedure"]
    assert "conditional power <= 2.3%" in _first_look(0.0).loc[0, "procedure"]
    # where the items make up the whole SE, more seeds cannot move it: power 0 either way, stopped at any threshold
    assert _first_look(0.004, futility=0.01).loc[0, "decision"] == "exhausted"
    with pytest.raises(ModelFitError, match="futility"):
        SequentialPlan(margin=0.01, futility=0.5)


def test_predictive_power_keeps_a_cell_that_its_current_estimate_would_stop():
    # The same first look (4 of 10 seeds, all seeds). Conditional power takes the estimate -0.008 as the truth:
    # about 0.135, so a 20% threshold stops the cell. Predictive power also lets the 4 seeds' own error move the
    # projection, SD sqrt(a / 4) of which (10 - 4) / 10 carries on: the projection's SD is sqrt(a * 6 / (10 * 4)),
    # the conditional one's times sqrt(10 / 4), and the power about 0.243, so it stays open at 20% and stops at 25%.
    a = 0.004**2 * 4
    se_max, spread = np.sqrt(a / 10), np.sqrt(a * 6) / 10
    distance = -0.008 + 0.01 - stats.norm.ppf(0.95) * se_max
    conditional = stats.norm.cdf(distance / spread)
    predictive = stats.norm.cdf(distance / np.sqrt(a * 6 / (10 * 4)))
    assert 0.1 < conditional < 0.2 < predictive < 0.25
    assert _first_look(0.0, futility=0.2).loc[0, "decision"] == "exhausted"
    assert _first_look(0.0, futility=0.2, power="predictive").loc[0, "decision"] == "open"
    assert _first_look(0.0, futility=0.25, power="predictive").loc[0, "decision"] == "exhausted"
    assert (
        "predictive power to close by then below 0.25" in _first_look(0.0, 0.25, power="predictive").loc[0, "procedure"]
    )
    # the items' error is common to now and to max_seeds: where it is the whole SE nothing moves, power 0
    assert _first_look(0.004, futility=0.01, power="predictive").loc[0, "decision"] == "exhausted"
    with pytest.raises(ModelFitError, match="futility_power"):
        SequentialPlan(margin=0.01, futility=0.1, futility_power="bayesian")


@pytest.mark.parametrize("power", ["conditional", "predictive"])
def test_the_stops_power_is_the_chance_its_model_gives_by_monte_carlo(power: str):
    # The model the stop projects, simulated instead of derived: the estimate is mu (truth plus the items' error,
    # which more seeds do not move) plus the current seeds' error; the estimate at max_seeds adds the next seeds'
    # mean. Conditional power fixes mu at the estimate; predictive power draws it from its flat-prior posterior,
    # N(estimate, a / s). The share of draws whose bound at max_seeds clears -margin is the power.
    from freezestats.stats.sequential.bounds import LookContrast
    from freezestats.stats.sequential.history import _conditional_power

    seeds, most, estimate, se, se_item, margin, level = 4, 10, -0.008, 0.004, 0.002, 0.01, 0.05
    plan = SequentialPlan(margin=margin, min_seeds=4, max_seeds=most, futility=0.1, futility_power=power)
    look = LookContrast(estimate, se, 30.0, (1.0,))
    shown, _ = _conditional_power({"se_item": se_item}, (look, look), level, plan, seeds)
    a = (se**2 - se_item**2) * seeds
    rng = np.random.default_rng(7)
    draws = 400_000
    mu = rng.normal(estimate, np.sqrt(a / seeds), draws) if power == "predictive" else np.full(draws, estimate)
    current = estimate - mu  # the current seeds' mean error, given the estimate
    at_max = mu + (seeds * current + (most - seeds) * rng.normal(0.0, np.sqrt(a / (most - seeds)), draws)) / most
    simulated = np.mean(at_max - stats.norm.ppf(1 - level) * np.sqrt(a / most + se_item**2) > -margin)
    assert abs(shown - simulated) < 0.003 and 0.02 < shown < 0.3


def test_holding_the_failure_part_stops_a_cell_whose_room_is_its_failure_rates():
    # The same first look (estimate -0.008, SE 0.004, 4 of 10 seeds), but the healthy runs' seed part is only
    # 0.002: the rest, 0.004^2 - 0.002^2, is the failure part (no items' part). Projected to shrink with seeds
    # (the default) the conditional power is about 0.135 and a 10% stop keeps the cell. Held, only a = 0.002^2 * 4
    # shrinks: the SE at 10 seeds is sqrt(a / 10 + 1.2e-5) = 0.0037, the lower bound cannot clear -0.01 (power
    # about 2e-5), and the cell stops.
    def first_look(failures: str, se_seed: float | None) -> pd.Series:
        plan = SequentialPlan(margin=0.01, min_seeds=4, max_seeds=10, seeds_per_round=2, futility=0.1,
                              futility_failures=failures)  # fmt: skip
        history = SequentialHistory([(100, 1)], plan, reference=0, population="task")
        contrast = {"train_size": [100], "frozen_layers": [1], "estimate": [-0.008], "se": [0.004], "df": [30.0],
                    "se_item": [0.0]}  # fmt: skip
        if se_seed is not None:
            contrast["se_seed"] = [se_seed]
        history.step(1, pd.DataFrame(contrast))
        return history.table().iloc[0]

    a, held = 0.002**2 * 4, 0.004**2 - 0.002**2
    se_max, spread = np.sqrt(a / 10 + held), np.sqrt(a * 6) / 10
    assert stats.norm.cdf((-0.008 + 0.01 - stats.norm.ppf(0.95) * se_max) / spread) < 1e-4
    assert first_look("shrink", 0.002)["decision"] == "open"
    stopped = first_look("hold", 0.002)
    assert stopped["decision"] == "exhausted" and "failure part's variance held" in stopped["procedure"]
    # a contrast that gives no seed part (or one that is the whole SE) is projected as before
    assert first_look("hold", None)["decision"] == "open" and first_look("hold", 0.004)["decision"] == "open"
    with pytest.raises(ModelFitError, match="futility_failures"):
        SequentialPlan(margin=0.01, futility_failures="keep")


@pytest.mark.parametrize("futility", [None, 0.1])
def test_seeking_noninferiority_only_stops_a_cell_that_could_only_be_shown_inferior(futility):
    # Estimate -0.02 (margin 0.01), SE 0.004, all seeds, at the first of the looks 4, 6, 8, 10: the upper bound
    # at the O'Brien-Fleming boundary is still above -0.01 (not yet inferior), at 10 seeds it would very likely
    # fall below it (conditional power ~0.9), while non-inferiority is out of reach (power ~0).
    def first_look(seek: str) -> pd.Series:
        plan = SequentialPlan(margin=0.01, min_seeds=4, max_seeds=10, seeds_per_round=2, futility=futility, seek=seek)
        history = SequentialHistory([(100, 1)], plan, reference=0, population="task")
        history.step(1, pd.DataFrame({"train_size": [100], "frozen_layers": [1], "estimate": [-0.02], "se": [0.004],
                                      "df": [30.0], "se_item": [0.0]}))  # fmt: skip
        return history.table().iloc[0]

    either, sought = first_look("either"), first_look("noninferiority")
    assert either["upper"] > -0.01 and either["decision"] == "open"
    assert sought["decision"] == "exhausted" and "be shown non-inferior" in sought["procedure"]
    with pytest.raises(ModelFitError, match="seek"):
        SequentialPlan(margin=0.01, seek="inferior")


def test_a_screening_look_stops_hopeless_cells_and_tests_nothing():
    # A futility-only look at 2 seeds before the first test at 4 (looks 2, 4, 6, 8, 10). Estimate -0.05 with SE
    # 0.004 has no chance to be shown non-inferior at margin 0.01 (exhausted); estimate +0.05 would be shown
    # non-inferior at any test, but nothing is tested at the screening look: it stays open with no bounds.
    plan = SequentialPlan(margin=0.01, min_seeds=4, max_seeds=10, seeds_per_round=2, futility=0.1,
                          seek="noninferiority", futility_seeds=2)  # fmt: skip
    assert plan.looks() == (2, 4, 6, 8, 10) and plan.efficacy_counts(3) == (4, 6)
    history = SequentialHistory([(100, 1), (100, 2)], plan, reference=0, population="task")
    history.step(1, pd.DataFrame({"train_size": [100, 100], "frozen_layers": [1, 2], "estimate": [0.05, -0.05],
                                  "se": [0.004, 0.004], "df": [1.0, 1.0], "se_item": [0.0, 0.0]}))  # fmt: skip
    table = history.table().set_index("frozen_layers")
    assert table.loc[2, "decision"] == "exhausted" and table.loc[1, "decision"] == "open"
    assert table[["lower", "upper", "p_seq", "fraction"]].isna().all().all()
    assert (table["seeds"] == 2).all() and (table["look"] == 1).all()
    assert next_seeds(history.table(), plan)["seeds_target"].tolist() == [4, 4]  # depth 1 and its reference
    with pytest.raises(ModelFitError, match="futility_seeds"):
        SequentialPlan(margin=0.01, min_seeds=4, futility_seeds=4)


def test_a_screening_look_spends_no_level():
    # The first test after a screening look has the bounds of the same plan without it: the spending function's
    # fractions leave the screening look out, so a cell that passes it is tested exactly as before.
    runs = _study(5, EFFECTS, seeds=9, sd=0.01)
    screened = replace(PLAN, futility=0.01, futility_seeds=2)
    with_screen = sequential_decisions(runs[runs["seed"] <= 3], None, screened).set_index(
        ["train_size", "frozen_layers"]
    )
    without = sequential_decisions(runs[runs["seed"] <= 3], None, replace(PLAN, futility=0.01))
    without = without.set_index(["train_size", "frozen_layers"])
    passed = with_screen.index[with_screen["look"] == 2]
    assert len(passed) >= 2
    pd.testing.assert_frame_equal(with_screen.loc[passed].drop(columns=["look", "procedure"]),
                                  without.loc[passed].drop(columns=["look", "procedure"]))  # fmt: skip
    assert with_screen["procedure"].str.endswith("below 0.01 (checked from 2 seeds))").all()  # the label says so


def test_replay_uses_only_the_runs_an_adaptive_study_would_have_run():
    runs = _study(3, EFFECTS, sd=0.004)
    played = replay(runs, None, PLAN)
    last = played.sort_values("round").groupby(["train_size", "frozen_layers"]).last()
    final = sequential_decisions(runs, None, PLAN).set_index(["train_size", "frozen_layers"])
    assert (last.loc[final.index, "decision"] == final["decision"]).all()
    decided = last[last["decided_round"].notna()]
    assert (decided["seeds"] == [PLAN.looks()[int(r) - 1] for r in decided["decided_round"]]).all()
    summary = replay_summary(played, PLAN).set_index("train_size")
    assert summary.loc[-1, "runs_adaptive"] == last["seeds"].sum() < summary.loc[-1, "runs_fixed"] == 6 * 9


def _null_studies(n: int) -> tuple[float, float]:
    """The share of studies at the margin (one hypothesis, true cost exactly -0.01) shown non-inferior by the
    sequential design, and by testing at the fixed level at every look and stopping at the first success.

    The looks' contrasts are the paired t (what ``task_level_contrasts`` gives without items) computed here, so
    that a thousand studies take a second: the statistics under test are the history's (graph, spending,
    information fractions, t scale), the plumbing from runs to contrasts is tested above."""
    plan = SequentialPlan(margin=0.01, alpha=0.05, min_seeds=3, max_seeds=9, seeds_per_round=3)
    gen = np.random.default_rng(20261125)
    sequential = naive = 0
    for _ in range(n):
        diff = -0.01 + gen.normal(0, 0.01, plan.max_seeds)
        history = SequentialHistory([(100, 1)], plan, reference=0, population="evaluation_set")
        shown = []
        for look, s in enumerate(plan.looks(), start=1):
            d = diff[:s]
            se = d.std(ddof=1) / np.sqrt(s)
            contrast = pd.DataFrame({"train_size": [100], "frozen_layers": [1], "estimate": [d.mean()], "se": [se],
                                     "df": [s - 1.0], "se_item": [0.0]})  # fmt: skip
            history.step(look, contrast)
            shown.append(d.mean() - stats.t.isf(0.05, s - 1) * se > -0.01)
        sequential += bool(history.rows[(100, 1)]["decision"] == "noninferior")
        naive += any(shown)
    return sequential / n, naive / n


def test_error_at_the_margin_is_controlled_under_optional_stopping():
    n = 600
    sequential, naive = _null_studies(n)
    # one-sided: alpha plus 2.33 Monte Carlo SEs of a rate of 0.05 (a 1% false alarm at a true 0.05; the
    # generator's seed is fixed, so the test is deterministic)
    bound = 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / n)
    assert sequential <= bound
    # and the test can fail: testing at the fixed level at each of the 3 looks goes past that bound
    assert naive > bound

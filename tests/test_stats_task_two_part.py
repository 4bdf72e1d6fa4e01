"""The task-level contrast with failed runs modelled apart (freezestats.stats.items.task_two_part).

The pieces are recomputed here from their definitions (the pooled failure GLMM, the cells' healthy and failed
means, the healthy pairs' crossed contrast) and compared with what ``task_level_contrasts`` returns.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.stats.failures.pooled_rates import pooled_failure_probabilities
from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.items.partial_pairs import partially_paired_contrast
from freezestats.stats.items.task_level import crossed_contrast, task_level_contrasts
from freezestats.stats.items.task_two_part import PAIR_LEVEL_SD
from freezestats.stats.items.uncertainty import run_pseudo_values
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic


@cache
def _study(rng: int = 7) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One simulated blog-shaped SST-2 study with collapsed runs (the simulator's flags), sizes 100..1000."""
    study = simulate_realistic(realistic_task(blog_shaped()), rng=rng)
    keep = study.results["train_size"] >= 100
    runs = study.results[keep].reset_index(drop=True)
    return runs, study.items[study.items["trial"].isin(runs["trial"])]


def _contrasts(runs: pd.DataFrame, items: pd.DataFrame | None, population: str = "task") -> pd.DataFrame:
    table = task_level_contrasts(runs, items, response="heldout", metric="accuracy", population=population)
    return table.set_index(["train_size", "frozen_layers"])


def _rates(runs: pd.DataFrame, depth: int) -> dict:
    """P(fail) per cell from the pooled GLMM of ``depth``'s and the reference's runs (every size), the two levels'
    SD given."""
    own = runs[runs["frozen_layers"].isin([0, depth])]
    return pooled_failure_probabilities(own, own["failed"].to_numpy(), level_sd=PAIR_LEVEL_SD)[0]


def test_without_failed_runs_every_contrast_is_paired_and_symmetric() -> None:
    runs, items = _study()
    table = _contrasts(runs.assign(failed=False), items)
    assert (table["method"] == "paired").all() and (table["p_fail"] == 0).all()
    assert np.array_equal(table["se_lower"], table["se"]) and np.array_equal(table["se_upper"], table["se"])


def test_the_estimate_is_the_healthy_runs_plus_the_failure_part() -> None:
    """Each cell's own healthy mean, not the mean over the seeds where both runs are healthy (a selection when the
    flag follows the seed's skill); the seed part pairs the seeds where both are healthy."""
    runs, items = _study()
    assert runs["failed"].any()
    table = _contrasts(runs, items)
    phi = run_pseudo_values(items, "heldout", "accuracy")
    checked = partial = 0
    for (size, depth), row in table[table["method"] == "two-part"].iterrows():
        p = _rates(runs, depth)
        at = runs[(runs["train_size"] == size) & runs["frozen_layers"].isin([0, depth])]  # the pair's runs only
        k, ref = (at[at["frozen_layers"] == d].set_index("seed") for d in (depth, 0))
        ok_k, ok_0 = k.index[~k["failed"]], ref.index[~ref["failed"]]
        both = ok_k.intersection(ok_0)
        healthy = partially_paired_contrast(
            k.loc[ok_k, "heldout"].to_numpy(),
            ref.loc[ok_0, "heldout"].to_numpy(),
            [(list(ok_k).index(s), list(ok_0).index(s)) for s in both],
            np.vstack([phi[t].to_numpy() for t in k.loc[ok_k, "trial"]]),
            np.vstack([phi[t].to_numpy() for t in ref.loc[ok_0, "trial"]]),
        )
        if len(both) == len(ok_k) == len(ok_0):  # every healthy run paired: the crossed contrast of the pairs
            paired = crossed_contrast(
                np.vstack([phi[k.at[s, "trial"]].to_numpy() - phi[ref.at[s, "trial"]].to_numpy() for s in both]),
                per_seed=(k.loc[both, "heldout"] - ref.loc[both, "heldout"]).to_numpy(),
            )
            if len(both) >= 3:
                assert paired["se"] == pytest.approx(healthy["se"], rel=1e-9)
            healthy = paired
        else:
            partial += 1
        failed_at = at.loc[at["failed"], "heldout"]
        if failed_at.empty:  # no failed run of the pair at this size: the pair's failed runs at every size
            pair = runs[runs["frozen_layers"].isin([0, depth])]
            failed_at = pair.loc[pair["failed"], "heldout"]
        parts = []
        for cell in (k, ref):
            b = cell.loc[cell["failed"], "heldout"].mean() if cell["failed"].any() else failed_at.mean()
            parts.append(
                p[(int(cell["frozen_layers"].iloc[0]), int(size))] * (b - cell.loc[~cell["failed"], "heldout"].mean())
            )
        assert row["estimate"] == pytest.approx(healthy["estimate"] + parts[0] - parts[1], abs=1e-12)
        assert row["se_seed"] == pytest.approx(healthy["se_seed"], rel=1e-9)
        assert row["n_pairs"] == len(both)
        t = stats.t.ppf(0.975, row["df_lower"])
        assert row["ci_low"] == pytest.approx(row["estimate"] - t * row["se_lower"], rel=1e-12)
        checked += 1
    assert checked >= 10 and partial >= 3


def test_a_reference_that_showed_no_failure_still_carries_its_failure_rate() -> None:
    """Five healthy reference runs do not show that its rate is 0: the pooled rate is above 0, and the contrast's
    upper side (a higher reference rate raises the contrast) is wider than its healthy part's, weighted by the
    share of the score the healthy part carries."""
    runs, items = _study()
    table = _contrasts(runs, items)
    clean = runs.groupby("train_size").apply(lambda at: not at.loc[at["frozen_layers"] == 0, "failed"].any())
    sizes = clean[clean].index
    assert len(sizes) > 0
    rows = table[table.index.get_level_values("train_size").isin(sizes) & (table["method"] == "two-part")]
    assert len(rows) and (rows["p_fail_reference"] > 0).all()
    weight = 1 - (rows["p_fail"] + rows["p_fail_reference"]) / 2
    assert (rows["se_upper"] > weight * np.hypot(rows["se_seed"], rows["se_item"])).all()


def test_a_depth_whose_runs_all_failed_enters_whole_against_the_healthy_reference() -> None:
    runs, items = _study()
    size = 500
    here = (runs["train_size"] == size) & (runs["frozen_layers"] == 6)
    runs = runs.assign(failed=runs["failed"] | here)
    row = _contrasts(runs, items, population="evaluation_set").loc[(size, 6)]
    assert row["method"] == "two-part, depth whole" and row["p_fail"] == 0.0
    at = runs[(runs["train_size"] == size) & runs["frozen_layers"].isin([0, 6])]  # the pair's runs only
    k, ref = (at[at["frozen_layers"] == d].set_index("seed") for d in (6, 0))
    healthy_ref = ref.index[~ref["failed"]]
    p = _rates(runs, 6)  # the pair's runs at every size, the depth's at this size included
    assert row["p_fail_reference"] == pytest.approx(p[(0, size)], rel=1e-9)
    b_0 = ref.loc[ref["failed"], "heldout"].mean() if ref["failed"].any() else at.loc[at["failed"], "heldout"].mean()
    gap = ref.loc[healthy_ref, "heldout"].mean() - b_0
    # all the depth's runs, not only those whose reference partner is healthy (a selection of good seeds)
    expected = k["heldout"].mean() - ref.loc[healthy_ref, "heldout"].mean() + p[(0, size)] * gap
    assert row["estimate"] == pytest.approx(expected, abs=1e-12)


def test_the_noninferiority_test_reads_the_lower_side() -> None:
    base = pd.DataFrame({"train_size": [100], "frozen_layers": [2], "reference": [0], "estimate": [0.0],
                         "se": [0.01], "df": [10.0], "se_seed": [0.01], "se_item": [0.0], "ci_low": [-0.02],
                         "ci_high": [0.02], "population": ["task"]})  # fmt: skip
    symmetric = task_noninferiority(base, margin=0.02)
    lopsided = task_noninferiority(base.assign(se_lower=0.03, df_lower=10.0, se_upper=0.01, df_upper=10.0), margin=0.02)
    assert symmetric["noninferior"].item() and not lopsided["noninferior"].item()
    assert lopsided["lower"].item() == pytest.approx(-stats.t.ppf(0.95, 10) * 0.03, rel=1e-12)


def test_a_depths_contrast_with_failures_does_not_move_with_the_other_depths() -> None:
    """Issue 28 with failed runs: each depth's failure rates come from its and the reference's runs only."""
    runs, items = _study()
    full = _contrasts(runs, items).xs(5, level="frozen_layers")
    keep = runs["frozen_layers"].isin([0, 5])
    alone = _contrasts(runs[keep], items[items["trial"].isin(runs.loc[keep, "trial"])]).xs(5, level="frozen_layers")
    assert (full["p_fail_reference"] > 0).all()
    pd.testing.assert_frame_equal(alone, full, check_exact=True)


def test_a_contrast_without_spread_is_not_shown_and_has_no_bound() -> None:
    """CoLA at 50 examples: every run of both cells at MCC 0, so the difference is 0 with SE 0. That is no
    evidence of non-inferiority (it was once reported as shown, p < 0.001)."""
    base = pd.DataFrame({"train_size": [50, 50], "frozen_layers": [1, 2], "reference": [0, 0], "estimate": [0.0, 0.0],
                         "se": [0.0, 0.01], "df": [4.0, 4.0], "se_seed": [0.0, 0.01], "se_item": [0.0, 0.0],
                         "ci_low": [0.0, -0.03], "ci_high": [0.0, 0.03], "population": ["task", "task"]})  # fmt: skip
    table = task_noninferiority(base, margin=0.02).set_index("frozen_layers")
    assert not table.loc[1, "noninferior"] and table.loc[1, "p_val"] == 1.0 and np.isnan(table.loc[1, "lower"])
    assert np.isfinite(table.loc[2, "lower"])


def test_each_contrast_names_how_its_failure_part_got_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """``failure_sides``: "none" without a failure part, the joint draws by default, Wilson-MOVER where asked, and
    Wilson-MOVER again, said so, where the draws are too few to trust."""
    import freezestats.stats.failures.pooled_rates as pooled_rates
    import freezestats.stats.failures.sd_integration as sd_integration

    runs, _ = _study()
    runs = runs[runs["frozen_layers"].isin([0, 6])]
    options = {"response": "heldout", "metric": "accuracy", "population": "evaluation_set"}
    assert set(task_level_contrasts(runs.assign(failed=False), None, **options)["failure_sides"]) == {"none"}
    by_rates = {"pooled": task_level_contrasts(runs, None, failure_rates="pooled", **options),
                "pooled_joint": task_level_contrasts(runs, None, **options)}  # the default  # fmt: skip
    two_part = by_rates["pooled"]["method"].str.startswith("two-part")
    assert two_part.any()
    assert set(by_rates["pooled"].loc[two_part, "failure_sides"]) == {"Wilson-MOVER"}
    assert set(by_rates["pooled_joint"].loc[two_part, "failure_sides"]) == {"joint draws"}
    for module in (pooled_rates, sd_integration):  # no set of draws is trusted: the fallback
        monkeypatch.setattr(module, "MIN_ESS", 1e9)
    fallback = task_level_contrasts(runs, None, failure_rates="pooled_joint", **options)
    assert set(fallback.loc[two_part.to_numpy(), "failure_sides"]) == {"Wilson-MOVER (joint draws failed)"}
    assert np.allclose(fallback["ci_low"], by_rates["pooled"]["ci_low"])

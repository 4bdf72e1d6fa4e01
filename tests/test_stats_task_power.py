"""Seeds needed by the task-level answer (freezestats.stats.inference.task_power), against closed forms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.task_power import seeds_needed, task_power


def _contrast(se_seed: float, df_seed: float, se_item: float = 0.0, df_item: float = np.inf) -> pd.DataFrame:
    return pd.DataFrame({"train_size": [1000], "frozen_layers": [2], "reference": [0], "estimate": [0.0],
                         "se_seed": [se_seed], "df_seed": [df_seed], "se_item": [se_item], "df_item": [df_item],
                         "se": [np.hypot(se_seed, se_item)], "population": ["task"]})  # fmt: skip


def test_with_a_known_sd_and_no_item_part_the_power_is_the_noncentral_t() -> None:
    # df_seed = 1e6: the SD is as good as known, so the one-sided paired t test of "no cost" against -margin at
    # the graph's level (one size, one depth: all of alpha) has power P(T' > t_crit), T' ~ nct(S'-1, m sqrt(S')/sd).
    units, sd, margin = 1_000_001, 0.02, 0.01
    table = task_power(_contrast(sd / np.sqrt(units), units - 1), margin=margin, n_seeds=(3, 8, 20), n_sim=40_000)
    for row in table.itertuples():
        s = row.n_seeds
        exact = stats.nct.sf(stats.t.ppf(0.95, s - 1), s - 1, margin * np.sqrt(s) / sd)
        assert row.alpha == pytest.approx(0.05)
        assert row.power == pytest.approx(exact, abs=4 * row.mc_se + 1e-3)


def test_an_sd_from_five_seeds_costs_power_where_power_is_high() -> None:
    # per-seed SD 0.012: known (1e6 df) it gives ~87% power with 12 seeds; estimated from 5 seeds it gives less
    sd = 0.012
    known = task_power(_contrast(sd / np.sqrt(1e6 + 1), 1e6), margin=0.01, n_seeds=(12,), n_sim=20_000)
    uncertain = task_power(_contrast(sd / np.sqrt(5), 4), margin=0.01, n_seeds=(12,), n_sim=20_000)
    assert known["power"].item() > 0.8 and uncertain["power"].item() < known["power"].item() - 0.05


def test_the_items_part_caps_what_more_seeds_can_buy() -> None:
    # v_item alone puts the bound's SD at 0.008 with margin 0.01 and alpha 0.05: even with the seeds' part at 0
    # the power cannot pass P(Z > 1.645 - 0.01/0.008) = 0.35.
    table = task_power(_contrast(0.001, 1e6, se_item=0.008), margin=0.01, n_seeds=(5, 40), n_sim=20_000)
    cap = stats.norm.sf(stats.norm.ppf(0.95) - 0.01 / 0.008)
    assert (table["power"] <= cap + 0.02).all()
    need = seeds_needed(table)
    assert not need["reached"].item() and np.isnan(need["seeds"].item())


def test_seeds_needed_is_the_first_number_reaching_the_target() -> None:
    power = pd.DataFrame({"train_size": 100, "frozen_layers": 1, "n_seeds": [3, 5, 8], "power": [0.3, 0.81, 0.9]})
    assert seeds_needed(power)["seeds"].item() == 5


def test_bad_input_is_one_line() -> None:
    with pytest.raises(ModelFitError, match="margin > 0"):
        task_power(_contrast(0.01, 4), margin=0.0)
    with pytest.raises(ModelFitError, match=">= 2"):
        task_power(_contrast(0.01, 4), margin=0.01, n_seeds=(1, 5))

"""The one Holm/Bonferroni adjustment of freezestats.stats against statsmodels' multipletests."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from freezestats.stats.inference.multitest import adjust_p, holm


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
def test_equals_multipletests(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # statsmodels' Holm calls gc.collect() on every call: late in the suite, with a large heap, the 200 calls
    # here took nearly two minutes. Collecting garbage changes no p value, so the reference runs without it.
    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 30):
        for _ in range(50):
            p = rng.uniform(0, 1, m) ** 3  # many small p values, so the step-down and the cap at 1 both matter
            np.testing.assert_allclose(adjust_p(p, method), multipletests(p, method=method)[1], rtol=0, atol=1e-15)


def test_ties_nan_and_monotone() -> None:
    p = np.array([0.01, np.nan, 0.01, 0.04, 0.5])
    out = holm(p)
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3, 4]], multipletests(p[[0, 2, 3, 4]], method="holm")[1])
    assert np.isnan(holm(np.array([np.nan]))).all()
    with pytest.raises(ValueError, match="holm"):
        adjust_p(p, "fdr")

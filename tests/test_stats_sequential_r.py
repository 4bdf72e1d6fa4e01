"""The Lan–DeMets boundaries of ``freezestats.stats.sequential.spending`` against R's rpact.

Reference values: ``rpact::getDesignGroupSequential(kMax = K, alpha, sided = 1, typeOfDesign = "asOF" | "asP" |
"asHSD", informationRates[, gammaA])`` (Hwang-Shih-DeCani at gammaA = -2 and 1) for every design of
``tests/data/sequential_designs.json`` (4 spending functions x 6 levels from 0.001 to 0.1 x 9 sets of information
rates, 2 to 8 looks, equal and unequal, including the fractions a contrast with an item part gets,
:math:`V(s) = a/s + b`), written by ``tests/data/sequential_reference.R`` and
committed as ``tests/data/sequential_reference.json`` (R 4.2.2, rpact 3.3.4, Debian's ``r-cran-rpact``).

Why these tolerances: rpact searches each boundary until the level it spends is within 1e-8 of the target
(its ``alphaSpent`` at the last look reads ``alpha - 1e-8``), and our Simpson grid (Jennison & Turnbull's,
r = 18) is accurate to a few 1e-8 in probability; at a level of 0.001 the boundary sits near z = 3.5, where
1e-8 in probability is about 1e-5 in z. The largest differences on these 216 designs are 6.3e-5 and 6.4e-5 in z
(Pocock-type and Hwang-Shih-DeCani at 1, alpha = 0.001, seven looks). Genz's integration of the same multivariate
normal (scipy, abseps 1e-13) puts ours 6.5e-8 below the target in the Pocock design and rpact's 3.2e-8 above it,
so the difference is the two integrations' error, not a different design. The test allows 2e-4 in z.

Where a look spends less than about 1e-14 (O'Brien–Fleming-type at a fraction of 0.1 or 0.15 and a small
level), rpact writes an infinite boundary; ours is the finite z whose tail is that level (7.8 to 10.3 here).
Both reject with probability below 1e-14 there: the test checks that ours does, and compares the later looks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _r_reference import r_reference
from scipy import special

from freezestats.stats.sequential.spending import boundaries, spent

DATA = Path(__file__).parent / "data"
R_PACKAGES = ("rpact", "jsonlite")
Z_TOLERANCE = 2e-4  # in z (module docstring: the two integrations' error is about 1e-5 at alpha = 0.001)
SPENT_TOLERANCE = 1e-7  # relative to alpha, before the last look (the spending functions are closed forms)
NOTHING_SPENT = 1e-14  # a look whose boundary rpact writes as Inf spends less than this in ours


def _committed() -> dict:
    return json.loads((DATA / "sequential_reference.json").read_text())


def _r_available() -> bool:
    """Whether ``Rscript`` with rpact and jsonlite is here (to re-run the script)."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        return False
    names = ", ".join(f'"{p}"' for p in R_PACKAGES)
    check = f"quit(status = !all(sapply(c({names}), requireNamespace, quietly = TRUE)))"
    return subprocess.run([rscript, "-e", check], capture_output=True).returncode == 0


def _critical_values(design: dict) -> np.ndarray:
    """rpact's critical values, its ``Inf`` (a look that spends nothing) as ``inf``."""
    return np.array([np.inf if value in ("Inf", None) else value for value in design["critical_values"]], float)


def _compare(reference: dict) -> float:
    """Check every design of ``reference`` against ours; returns the largest difference in z."""
    designs = reference["designs"]
    spec = json.loads((DATA / "sequential_designs.json").read_text())
    expected = len(spec["kinds"]) * len(spec["alphas"]) * len(spec["information_rates"])
    assert len(designs) == expected == 216  # 4 kinds x 6 levels x 9 rates: a truncated output would pass otherwise
    largest = 0.0
    for design in designs:
        rates = tuple(float(t) for t in design["information_rates"])
        where = f"{design['kind']}, alpha={design['alpha']}, rates={design['rates_name']}"
        ours = boundaries(rates, float(design["alpha"]), design["kind"])
        theirs = _critical_values(design)
        finite = np.isfinite(theirs)
        assert finite[-1], where
        assert np.all(special.ndtr(-ours[~finite]) < NOTHING_SPENT), where
        gap = np.abs(ours[finite] - theirs[finite])
        assert gap.max() <= Z_TOLERANCE, f"{where}: ours {ours.round(6)}, rpact {theirs}"
        largest = max(largest, float(gap.max()))
        levels = spent(np.array(rates), float(design["alpha"]), design["kind"])
        spent_r = np.array(design["alpha_spent"], float)
        np.testing.assert_allclose(levels[:-1], spent_r[:-1], rtol=0, atol=SPENT_TOLERANCE * design["alpha"])
        assert spent_r[-1] == pytest.approx(design["alpha"], abs=2e-8)  # rpact's search stops within 1e-8
    return largest


def test_boundaries_match_the_committed_rpact_values() -> None:
    largest = _compare(_committed())
    assert largest > 0  # the comparison ran on numbers, not on a copy of ours


NO_R = (
    "Rscript with rpact and jsonlite is not installed (Debian: apt-get install r-cran-rpact r-cran-jsonlite); "
    "the committed values are checked by test_boundaries_match_the_committed_rpact_values"
)


@pytest.mark.skipif(not _r_available(), reason=NO_R)
def test_boundaries_match_a_fresh_rpact_run(tmp_path: Path) -> None:
    fresh = r_reference(
        "sequential_reference.R", "sequential_designs.json", "sequential_reference.json", R_PACKAGES, tmp_path
    )
    assert (tmp_path / "fresh.json").exists()  # R ran: not the committed file read back
    _compare(fresh)
    committed = {(d["kind"], d["alpha"], d["rates_name"]): d for d in _committed()["designs"]}
    for design in fresh["designs"]:  # the committed file is what this R writes (up to rpact's 1e-8 search)
        old = committed[(design["kind"], design["alpha"], design["rates_name"])]
        theirs, before = _critical_values(design), _critical_values(old)
        assert np.array_equal(np.isfinite(theirs), np.isfinite(before))
        np.testing.assert_allclose(theirs[np.isfinite(theirs)], before[np.isfinite(before)], atol=Z_TOLERANCE)

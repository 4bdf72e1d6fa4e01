r"""Lan–DeMets error spending and the group-sequential boundaries it implies, one-sided, for any information fractions.

An adaptive study looks at a contrast after every round of seeds and stops a cell once it is decided. Testing
the same contrast at every look at the fixed design's level would reject a true null far more often than
:math:`\alpha` (optional stopping). An *error-spending function* :math:`\alpha(t)`, increasing from 0 at
information fraction :math:`t = 0` to :math:`\alpha` at :math:`t = 1` (Lan & DeMets 1983), fixes how much of
the level may be spent by each look; the boundary :math:`c_k` of look :math:`k` is the one with

.. math:: P_0(Z_1 < c_1, \dots, Z_{k-1} < c_{k-1}, Z_k \ge c_k) = \alpha(t_k) - \alpha(t_{k-1}),

where :math:`(Z_1, \dots, Z_K)` is multivariate normal with the canonical correlation
:math:`\operatorname{Corr}(Z_i, Z_j) = \sqrt{t_i / t_j}` (:math:`i \le j`). The looks need not be equally
spaced nor planned: only the fractions reached so far enter look :math:`k`'s boundary.

The spending functions (one-sided level :math:`\alpha`):

* ``"obrien_fleming"``: :math:`\alpha(t) = 2 - 2\Phi(z_{1-\alpha/2}/\sqrt t)`, the O'Brien–Fleming-type: almost
  nothing is spent early, so the last look's boundary is close to the fixed design's;
* ``"pocock"``: :math:`\alpha(t) = \alpha \ln(1 + (e - 1) t)`, the Pocock-type: nearly equal boundaries;
* ``"hwang_shih_decani(γ)"``: :math:`\alpha(t) = \alpha\,(1 - e^{-\gamma t}) / (1 - e^{-\gamma})` (Hwang, Shih &
  DeCani 1990; :math:`\alpha t` at :math:`\gamma = 0`), the one-parameter family between the two: :math:`\gamma = -4`
  spends about as O'Brien–Fleming does, :math:`\gamma = 1` about as Pocock does. It was added to trade the runs
  an adaptive study saves against its error. Measured (``bench/adaptive_seeds.py``, README), the runs hardly move
  between :math:`\gamma = -3` and Pocock, and the error at the margin did not fall with :math:`\gamma`: it comes
  from the few-seed contrasts themselves (``bench/adaptive_null_claims.py``), which no spending function mends.

The probabilities are computed by the recursive numerical integration of Armitage, McPherson & Rowe (1969), on
the grid and Simpson weights of Jennison & Turnbull (2000, ch. 19; the grid gsDesign uses): the sub-density of
:math:`Z_k` on the continuation region is carried from look to look. It is deterministic (a decision
recomputed from the same runs is the same), which the Monte Carlo integration of
``scipy.stats.multivariate_normal.cdf`` is not.

Why not a package: ``sequential-analysis`` (PyPI 0.4.0) has Lan–DeMets boundaries but is AGPL-3.0, which an MIT
package cannot take; ``gsdesign`` (0.1.5, alpha) ports only gsDesign's integration grid, not the spending
boundaries; ``confseq`` is a C++ build whose confidence sequences are for bounded or sub-Gaussian observations,
not for a Satterthwaite-t contrast. ``tests/test_stats_sequential.py`` checks these boundaries against the
published O'Brien–Fleming-type spending boundaries and Jennison & Turnbull's Pocock and O'Brien–Fleming constants;
``tests/test_stats_sequential_r.py`` against R's rpact (``getDesignGroupSequential``, ``typeOfDesign = "asOF"`` and
``"asP"``, ``"asHSD"`` at γ = -2 and 1) on 216 designs, equal and unequal fractions, levels 0.001 to 0.1: within
6.4e-5 in z.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

from freezestats.exceptions import ModelFitError
from freezestats.spec.adaptive import SPENDING, spending_gamma

__all__ = ["SPENDING_FUNCTIONS", "boundaries", "check_spending", "crossing_probability", "spending_words", "spent"]

#: The spending functions by name, as the plan's ``spending`` names them; the last takes its γ in brackets.
SPENDING_FUNCTIONS = SPENDING

_GRID_R = 18  # Jennison & Turnbull's grid size (6r - 1 points before Simpson's midpoints); gsDesign's default
_MIN_STEP = 1e-3  # a look that adds less than this information fraction adds nothing: it spends nothing more
_NEVER = 40.0  # a boundary no path reaches, for a look that spends nothing


def spent(t: np.ndarray | float, alpha: float, kind: str = "obrien_fleming") -> np.ndarray:
    """The one-sided level spent by information fraction ``t`` (0 at 0, ``alpha`` at 1 and beyond)."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0)
    if kind == "obrien_fleming":
        z = -special.ndtri(alpha / 2.0)  # not ndtri(1 - alpha/2): 1 - alpha/2 rounds away a tiny alpha
        with np.errstate(divide="ignore"):
            return np.where(t > 0, 2.0 * special.ndtr(-z / np.sqrt(np.where(t > 0, t, 1.0))), 0.0)
    if kind == "pocock":
        return alpha * np.log1p((np.e - 1.0) * t)
    gamma = check_spending(kind)
    if gamma == 0:
        return alpha * t
    return alpha * np.expm1(-gamma * t) / np.expm1(-gamma)


def check_spending(kind: str) -> float | None:
    """``kind``'s γ for ``"hwang_shih_decani(γ)"``, ``None`` for the two without one; a one-line error for any other
    name, so that a plan with a misspelt spending fails when it is built, not at its first look."""
    try:
        return spending_gamma(kind)
    except ValueError as error:
        raise ModelFitError(f"spending {error}.") from None


def spending_words(kind: str) -> str:
    """The spending function as a label says it, its γ written out.

    >>> spending_words("obrien_fleming"), spending_words("hwang_shih_decani(-1)")
    ("O'Brien-Fleming-type", 'Hwang-Shih-DeCani (γ = -1)')
    """
    gamma = check_spending(kind)
    if gamma is not None:
        return f"Hwang-Shih-DeCani (γ = {gamma:g})"
    return {"obrien_fleming": "O'Brien-Fleming-type", "pocock": "Pocock-type"}[kind]


def boundaries(fractions: tuple[float, ...], alpha: float, kind: str = "obrien_fleming") -> np.ndarray:
    """One-sided z boundaries :math:`c_1, \\dots, c_K` spending ``alpha`` at information ``fractions``.

    ``fractions`` are the looks' information fractions, increasing, the last at most 1 (a study that stopped
    before its maximum spends only :math:`\\alpha(t_K)`). A look that adds less than 0.001 of the information
    adds nothing and gets the previous look's boundary (nothing new is spent there: conservative).

    >>> np.round(boundaries((0.2, 0.4, 0.6, 0.8, 1.0), 0.025), 3)
    array([4.877, 3.357, 2.68 , 2.29 , 2.031])
    """
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or len(t) == 0 or not (t[0] > 0) or t[-1] > 1 + 1e-9 or np.any(np.diff(t) < -1e-12):
        raise ModelFitError(f"boundaries: need increasing fractions in (0, 1], but got {tuple(fractions)}.")
    if not 0 < alpha < 0.5:
        raise ModelFitError(f"boundaries: need 0 < alpha < 0.5, but got {alpha!r}.")
    rounded = tuple(float(x) for x in np.round(np.minimum(t, 1.0), 10))
    return np.array(_boundaries(rounded, float(alpha), kind))


@lru_cache(maxsize=65_536)
def _boundaries(t: tuple[float, ...], alpha: float, kind: str) -> tuple[float, ...]:
    """The recursion (cached: a study asks for the same fractions and levels at every recomputation)."""
    cumulative = spent(np.asarray(t), alpha, kind)
    bounds: list[float] = []
    grid: _Density | None = None
    used, last_t = 0.0, 0.0
    for k, t_k in enumerate(t):
        if k > 0 and t_k - last_t < _MIN_STEP:
            bounds.append(bounds[-1])
            continue
        target = float(cumulative[k]) - used
        if target <= 0:
            b = _NEVER
        elif grid is None:
            b = float(-special.ndtri(target))
        else:
            b = _solve(grid, t_k, target)
        used += target if target > 0 else 0.0
        bounds.append(b)
        grid = _Density.start(t_k, b) if grid is None else grid.advance(t_k, b)
        last_t = t_k
    return tuple(bounds)


def crossing_probability(bounds: np.ndarray, fractions: tuple[float, ...]) -> float:
    """:math:`P_0`(some :math:`Z_k \\ge c_k`): the one-sided level a boundary sequence holds (for checking tables)."""
    t = np.asarray(fractions, dtype=float)
    total = float(special.ndtr(-bounds[0]))
    grid = _Density.start(float(t[0]), float(bounds[0]))
    for k in range(1, len(t)):
        total += grid.cross(float(t[k]), float(bounds[k]))
        grid = grid.advance(float(t[k]), float(bounds[k]))
    return total


def _solve(grid: _Density, t: float, target: float) -> float:
    """The boundary at fraction ``t`` whose first-crossing probability is ``target``."""
    if grid.cross(t, _NEVER) >= target:
        return _NEVER
    return float(optimize.brentq(lambda b: grid.cross(t, b) - target, -10.0, _NEVER, xtol=1e-10))


class _Density:
    """The sub-density of :math:`Z_k` on :math:`(-\\infty, c_k)` (paths not stopped yet), on Simpson's grid."""

    def __init__(self, t: float, z: np.ndarray, mass: np.ndarray) -> None:
        self.t, self.z, self.mass = t, z, mass  # mass: density times the Simpson weight

    @classmethod
    def start(cls, t: float, bound: float) -> _Density:
        z, w = _grid(bound)
        return cls(t, z, w * stats.norm.pdf(z))

    def cross(self, t: float, bound: float) -> float:
        """P(no crossing so far, and :math:`Z \\ge` ``bound`` at fraction ``t``)."""
        step = np.sqrt(t - self.t)
        tail = special.ndtr((self.z * np.sqrt(self.t) - bound * np.sqrt(t)) / step)
        return float(self.mass @ tail)

    def advance(self, t: float, bound: float) -> _Density:
        """The sub-density at ``t`` of the paths that stay below ``bound`` there."""
        step = np.sqrt(t - self.t)
        z, w = _grid(bound)
        kernel = stats.norm.pdf((z[:, None] * np.sqrt(t) - self.z[None, :] * np.sqrt(self.t)) / step)
        return _Density(t, z, w * (kernel @ self.mass) * np.sqrt(t) / step)


@lru_cache(maxsize=4096)
def _grid_cached(bound: float) -> tuple[np.ndarray, np.ndarray]:
    r = _GRID_R
    i = np.arange(1, 6 * r)
    x = np.where(i < r, -3 - 4 * np.log(r / np.maximum(i, 1)), -3 + 3 * (i - r) / (2 * r))
    x = np.where(i > 5 * r, 3 + 4 * np.log(r / np.maximum(6 * r - i, 1)), x)
    if bound < x[-1]:
        x = np.append(x[x < bound], bound)
    if len(x) < 2:  # a boundary below the grid's lower tail: no path is left below it
        x = np.array([bound - 8.0, bound])
    mid = (x[:-1] + x[1:]) / 2
    d = np.diff(x)
    z = np.empty(2 * len(x) - 1)
    z[0::2], z[1::2] = x, mid
    w = np.zeros_like(z)
    w[0:-1:2] += d / 6
    w[2::2] += d / 6
    w[1::2] += 4 * d / 6
    return z, w


def _grid(bound: float) -> tuple[np.ndarray, np.ndarray]:
    """Jennison & Turnbull's (2000, sec. 19.2) grid on :math:`(-\\infty, c]`: dense within 3 SD of 0, log-spaced
    tails to about :math:`\\pm 14.5`, with Simpson's weights on each interval."""
    return _grid_cached(round(float(min(bound, _NEVER)), 12))

r"""The task's family decided look by look: Maurer & Bretz's graphical group-sequential procedure on the depth graph.

The family is the fixed analysis's (:func:`~freezestats.stats.inference.task_family.task_noninferiority`): every
(train size, depth) hypothesis :math:`H: \mu_k - \mu_0 \le -m` of the task, on the graph of
:func:`~freezestats.stats.inference.graphical.depth_sequence_graph`. Maurer & Bretz (2013, "Multiple testing in
group sequential trials using graphical approaches", Stat Biopharm Res 5:311-320) give each hypothesis its own
group-sequential test at the level the graph currently holds for it, :math:`w_i\alpha`; when one is rejected,
its level passes along the graph as in the fixed procedure, and the others' boundaries are those of the larger
level (for every look, the spending function at the new level). Its familywise error is at most :math:`\alpha`
whatever the tests' correlation, as the fixed graph's.

At look :math:`j` this is the fixed graph run on *sequential p values*: hypothesis :math:`i`'s is the smallest
level at which its look-:math:`j` bound clears the margin (:func:`~freezestats.stats.sequential.bounds.
sequential_p`); one rejected at an earlier look enters with :math:`p = 0` (it stays rejected, and its level
passes on again); one not reached at this look, or stopped, holds its weight untested (``NaN``). Only the current
look is tested with a raised level (Maurer & Bretz also allow re-testing the earlier looks of a hypothesis whose
level rose; not doing so is conservative).

A screening look (the plan's ``futility_seeds``, before ``min_seeds``) tests nothing: every hypothesis holds its
weight untested there, its count is left out of the information fractions, and only the futility stop below is
applied, so the later looks' boundaries are those of the plan without it.

Two further decisions close a cell without a claim of non-inferiority, and neither can raise its error (a
stop without a rejection only removes chances to reject; nothing is passed along the graph):

* ``inferior``: the repeated interval's upper bound, at the same level and boundary, lies below :math:`-m`:
  the depth is shown to cost more than the margin (a non-binding futility stop);
* ``exhausted``: open at ``max_seeds``, or unable to close by then: at ``max_seeds``, with the variance
  projected from its current components, even an estimate one current standard error better on either side
  would leave :math:`-m` inside the interval. This is the issue's "open and can still close within the
  maximum": a conditional-power futility stop whose threshold is at most :math:`\Phi(-2) \approx 2.3\%`
  (``_cannot_close``). With the plan's ``futility`` set, the stop reads the conditional power itself: the
  chance, were the truth the current estimate, that the interval at ``max_seeds`` excludes :math:`-m` on
  either side (``_conditional_power``), and stops below ``futility``. With the plan's ``seek`` set to
  ``"noninferiority"``, both rules read the non-inferior side only: a depth that could still be shown
  inferior, but not non-inferior, gets no more seeds (the user's question, "is it non-inferior?", has its
  answer, no claim, already; the inferior claim it would buy costs seeds and changes no non-inferiority
  decision). It is still claimed inferior at a look where its bound already shows it.

Both are non-binding: the efficacy boundaries are the spending function's alone, computed as if no cell ever
stopped for futility (nothing is relaxed for the paths a futility stop removes), so the familywise error is
that of the procedure without them, and a study that runs a stopped cell on anyway keeps it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special

from freezestats.stats.inference.graphical import depth_sequence_graph, graphical_test
from freezestats.stats.inference.sequence import depth_rank
from freezestats.stats.sequential.bounds import LookContrast, fractions_of, lower_bound, sequential_p, t_bound
from freezestats.stats.sequential.plan import SequentialPlan
from freezestats.stats.sequential.spending import spending_words

__all__ = ["DECISIONS", "PROCEDURE", "SEQUENTIAL_COLUMNS", "SequentialHistory"]

#: The decisions, in the words every table uses.
DECISIONS = ("noninferior", "inferior", "open", "exhausted")

#: The procedure in the words every label uses.
PROCEDURE = (
    "graphical group-sequential procedure over the task (Maurer & Bretz 2013) on the depth-sequence graph "
    "(alpha split evenly over train sizes; within a size half to the shallowest depth, half shared by the deeper "
    "ones, a shown depth passing its level on); Lan-DeMets {spending} spending per hypothesis at its local "
    "level, information from the contrast's variance (the items' part does not shrink with seeds); z boundaries "
    "read on the t scale at the Satterthwaite df; inferior and exhausted are non-binding stops ({futility})"
)

SEQUENTIAL_COLUMNS = [
    "train_size", "frozen_layers", "reference", "seeds", "look", "estimate", "se", "df", "lower", "upper",
    "margin", "alpha", "p_seq", "fraction", "decision", "population", "procedure",
]  # fmt: skip


class SequentialHistory:
    """The decisions of one task's comparisons, taken look after look; a decided cell keeps its first decision.

    ``cells`` are the (train size, depth) comparisons of the family (every one the study runs, reached or not),
    ``population`` what the contrasts speak of (``"task"`` or ``"evaluation_set"``).
    """

    def __init__(self, cells: list[tuple[int, int]], plan: SequentialPlan, reference: int, population: str) -> None:
        order = np.lexsort((depth_rank(np.array([k for _, k in cells])), np.array([n for n, _ in cells])))
        self.cells = [cells[i] for i in order]
        self.plan, self.reference, self.population = plan, int(reference), population
        self.weights, self.transitions = depth_sequence_graph(
            np.array([n for n, _ in self.cells]), depth_rank(np.array([k for _, k in self.cells]))
        )
        self.rows = {cell: _blank(cell, reference) for cell in self.cells}

    def open_cells(self) -> list[tuple[int, int]]:
        """The comparisons not decided yet (``open``)."""
        return [cell for cell in self.cells if self.rows[cell]["decision"] == "open"]

    def note_seeds(self, cell: tuple[int, int], seeds: int) -> None:
        """Record the paired seeds of a cell that has not reached a look yet."""
        if self.rows[cell]["look"] == 0:
            self.rows[cell]["seeds"] = int(seeds)

    def step(self, look: int, contrasts: pd.DataFrame) -> list[tuple[int, int]]:
        """Decide look ``look`` (1-based) from the contrasts of the open cells that reached it (other rows are
        ignored); returns the cells decided at this look."""
        plan = self.plan
        seeds = plan.looks()[look - 1]
        counts = plan.efficacy_counts(look)
        screening = seeds < plan.min_seeds  # futility only: no test, no level spent (plan.futility_seeds)
        given = {(int(r["train_size"]), int(r["frozen_layers"])): r for r in contrasts.to_dict("records")}
        reached = {c: given[c] for c in self.open_cells() if c in given}
        if not reached:
            return []
        p = np.full(len(self.cells), np.nan)
        sides = {}
        for i, cell in enumerate(self.cells):
            if self.rows[cell]["decision"] == "noninferior":
                p[i] = 0.0
            elif cell in reached:
                sides[cell] = _sides(reached[cell], counts or (seeds,), plan.max_seeds)
                if not screening:  # NaN: untested, the hypothesis holds its weight
                    p[i] = sequential_p(sides[cell][0], plan.margin, plan.alpha, plan.spending)
        result = graphical_test(p, self.weights, self.transitions, plan.alpha)
        decided = []
        for i, cell in enumerate(self.cells):
            if cell not in reached:
                continue
            level = float(result.local_alpha[i])
            if screening:
                row = self._screen(reached[cell], sides[cell], level, seeds)
            else:
                row = self._decide(reached[cell], sides[cell], level, bool(result.rejected[i]), seeds)
            self.rows[cell].update(row, look=look, seeds=seeds, p_seq=float(p[i]))
            if row["decision"] != "open":
                decided.append(cell)
        return decided

    def _screen(self, contrast: dict, sides: tuple[LookContrast, LookContrast], level: float, seeds: int) -> dict:
        """A reached cell at the screening look: exhausted where the futility rule stops it, else open; no bounds
        (nothing is tested there)."""
        low = sides[0]
        spread = np.isfinite(low.se) and low.se > 0 and np.isfinite(sides[1].se) and sides[1].se > 0
        stop = spread and _futile(contrast, sides, level, self.plan, seeds)
        return {"estimate": low.estimate, "se": low.se, "df": low.df, "lower": np.nan, "upper": np.nan,
                "alpha": level, "fraction": np.nan, "decision": "exhausted" if stop else "open"}  # fmt: skip

    def _decide(self, contrast: dict, sides: tuple[LookContrast, LookContrast], level: float,
                rejected: bool, seeds: int) -> dict:  # fmt: skip
        """One reached cell's bounds at its local level and its decision."""
        plan = self.plan
        low, high = sides
        spread = np.isfinite(low.se) and low.se > 0 and np.isfinite(high.se) and high.se > 0
        lower = lower_bound(low, level, plan.spending) if spread else np.nan
        upper = high.estimate + t_bound(high, level, plan.spending) * high.se if spread else np.nan
        last = seeds >= plan.max_seeds
        if rejected and spread:
            decision = "noninferior"
        elif spread and upper < -plan.margin:
            decision = "inferior"
        elif last or (spread and _futile(contrast, sides, level, plan, seeds)):
            decision = "exhausted"
        else:
            decision = "open"
        return {"estimate": low.estimate, "se": low.se, "df": low.df, "lower": lower, "upper": upper,
                "alpha": level, "fraction": low.fractions[-1], "decision": decision}  # fmt: skip

    def table(self) -> pd.DataFrame:
        """One row per comparison (:data:`SEQUENTIAL_COLUMNS`), shallow to deep within each size."""
        procedure = PROCEDURE.format(spending=spending_words(self.plan.spending), futility=self.plan.futility_rule())
        frame = pd.DataFrame([self.rows[cell] for cell in self.cells])
        return frame.assign(margin=float(self.plan.margin), population=self.population,
                            procedure=procedure)[SEQUENTIAL_COLUMNS]  # fmt: skip


def _blank(cell: tuple[int, int], reference: int) -> dict:
    """A comparison before its first look."""
    return {"train_size": int(cell[0]), "frozen_layers": int(cell[1]), "reference": int(reference), "seeds": 0,
            "look": 0, "estimate": np.nan, "se": np.nan, "df": np.nan, "lower": np.nan, "upper": np.nan,
            "alpha": np.nan, "p_seq": np.nan, "fraction": np.nan, "decision": "open"}  # fmt: skip


def _sides(contrast: dict, counts: tuple[int, ...], max_seeds: int) -> tuple[LookContrast, LookContrast]:
    """The lower and the upper side of a contrast at a look (a two-part contrast's differ: a failure rate near 0
    has room above it only), each with its information fractions."""
    estimate, item = float(contrast["estimate"]), float(contrast.get("se_item", 0.0))
    out = []
    for side in ("lower", "upper"):
        se = float(contrast.get(f"se_{side}", contrast["se"]))
        df = float(contrast.get(f"df_{side}", contrast["df"]))
        fractions = fractions_of(se, item, counts, max_seeds) if np.isfinite(se) and se > 0 else (1.0,) * len(counts)
        ladder = contrast.get("lower_tail") if side == "lower" else None  # None without a failure part
        out.append(LookContrast(estimate, se, df, fractions, ladder))
    return out[0], out[1]


def _cannot_close(contrast: dict, sides: tuple[LookContrast, LookContrast], level: float,
                  plan: SequentialPlan, seeds: int) -> bool:  # fmt: skip
    r"""Whether, at ``max_seeds``, an estimate one current SE better on either side would still leave the margin
    inside the projected interval (z quantile at the local level: lenient, so a cell is kept rather than stopped).

    Why one SE: with :math:`s_j` seeds now and the variance :math:`V(s) = a/s + b`, the estimate at
    :math:`s_{max}` given the current one :math:`\hat\theta_j` has SD :math:`\sqrt{a (s_{max} - s_j)}/s_{max}`
    (only the new seeds' part is still random; the items' part :math:`b` is common to both), while the current SE
    is at least :math:`\sqrt{a/s_j}`, i.e. at least :math:`s_{max}/\sqrt{s_j (s_{max} - s_j)} \ge 2` of those
    SDs. So a cell stopped here has conditional power under its current estimate (the chance, were the truth
    :math:`\hat\theta_j`, that the interval at ``max_seeds`` excludes :math:`-m`, even with the fixed z
    quantile instead of the larger last boundary) of at most :math:`\Phi(-2) \approx 0.023` on either side; where
    the items dominate (:math:`b \gg a/s`), more seeds cannot move the interval and the cell stops at once.
    The stop is non-binding: it never changes a boundary (module docstring)."""
    q = float(-special.ndtri(level)) if level > 0 else np.inf
    closes = []
    for look, sign in zip(sides, (1.0, -1.0), strict=True):
        se_max, _ = _at_max_seeds(contrast, look, plan, seeds)
        hopeful = look.estimate + sign * look.se
        closes.append(sign * (hopeful + plan.margin) > q * se_max)
    return not any(closes[: _sides_sought(plan)])


def _sides_sought(plan: SequentialPlan) -> int:
    """How many of (non-inferior, inferior) the futility stop keeps a cell open for: both, or the first only."""
    return 1 if plan.seek == "noninferiority" else 2


def _at_max_seeds(contrast: dict, look: LookContrast, plan: SequentialPlan, seeds: int) -> tuple[float, float]:
    r"""The contrast's SE at ``max_seeds``, :math:`\sqrt{a/s_{max} + b}`, and the SD of its estimate there given
    the current one, :math:`\sqrt{a (s_{max} - s_j)}/s_{max}`, from :math:`V(s_j) = a/s_j + b` now (:math:`b` the
    items' part, which more seeds do not shrink), ``seeds`` the paired seeds now.

    With the plan's ``futility_failures`` ``"hold"``, :math:`a/s_j` is the healthy runs' seed part (``se_seed``)
    alone and :math:`b` all the rest of the variance: the items' part and the failure part (the room for the two
    cells' failure rates, pooled over sizes, which this cell's next seeds barely move). ``se_seed`` is not
    weighted by the healthy share :math:`(1 - \bar p)^2` the contrast's SE gives it, so the seeds' part is if
    anything too large and the stop errs towards keeping a cell. A contrast without ``se_seed`` is projected as
    with ``"shrink"``."""
    held = min(float(contrast.get("se_item", 0.0)) ** 2, look.se**2)
    if plan.futility_failures == "hold" and np.isfinite(contrast.get("se_seed", np.nan)):
        held = max(look.se**2 - float(contrast["se_seed"]) ** 2, 0.0)
    per_seed = max(look.se**2 - held, 0.0) * seeds
    se_max = float(np.sqrt(per_seed / plan.max_seeds + held))
    return se_max, float(np.sqrt(per_seed * max(plan.max_seeds - seeds, 0))) / plan.max_seeds


def _futile(contrast: dict, sides: tuple[LookContrast, LookContrast], level: float, plan: SequentialPlan,
            seeds: int) -> bool:  # fmt: skip
    """The plan's futility stop at ``seeds`` paired seeds: the lenient one-SE rule, or the power the plan names
    (``futility_power``: conditional or predictive) below ``plan.futility``."""
    if plan.futility is None:
        return _cannot_close(contrast, sides, level, plan, seeds)
    return max(_conditional_power(contrast, sides, level, plan, seeds)[: _sides_sought(plan)]) < plan.futility


def _conditional_power(contrast: dict, sides: tuple[LookContrast, LookContrast], level: float,
                       plan: SequentialPlan, seeds: int) -> tuple[float, float]:  # fmt: skip
    r"""The chance that the interval at ``max_seeds`` shows the depth non-inferior, and that it shows it inferior
    (z quantile at the local level, as :func:`_cannot_close`): were the truth the current estimate (the plan's
    ``futility_power`` ``"conditional"``), or averaged over the truth's flat-prior posterior (``"predictive"``).

    With :math:`s_j` seeds now and :math:`V(s) = a/s + b` (:math:`b` the items' part), the estimate at
    :math:`s_{max}` given the current one is normal around it with SD :math:`\sqrt{a (s_{max} - s_j)}/s_{max}`
    (the new seeds' share), and its SE is :math:`\sqrt{a/s_{max} + b}`. Predictive power also lets the current
    seeds' error :math:`\bar e_j \sim N(0, a/s_j)` move the projection: the estimate at :math:`s_{max}` is the
    current one plus :math:`(s_{max} - s_j)/s_{max}\,(\bar e_{new} - \bar e_j)`, so its SD is the conditional
    one times :math:`\sqrt{s_{max}/s_j}` (the items' error is common to both estimates and does not move it).
    Where that SD is 0 (the items make up the whole SE) the power is 1 or 0: what the current estimate would show
    at ``max_seeds``."""
    q = float(-special.ndtri(level)) if level > 0 else np.inf
    widen = np.sqrt(plan.max_seeds / seeds) if plan.futility_power == "predictive" else 1.0
    powers = []
    for look, sign in zip(sides, (1.0, -1.0), strict=True):
        se_max, spread = _at_max_seeds(contrast, look, plan, seeds)
        spread *= widen
        distance = sign * (look.estimate + plan.margin) - q * se_max
        powers.append(float(special.ndtr(distance / spread)) if spread > 0 else float(distance > 0))
    return powers[0], powers[1]

r"""Non-inferiority of every depth at every size of a task, as one family under the depth-sequence graph.

The question "how deep can I freeze at n examples" is asked of a task at every train size at once, so the
family whose error rate is controlled is the task: every (train size, depth) hypothesis
:math:`H_{kn}: \mu_{kn} - \mu_{0n} \le -m`, one-sided, on the contrasts of
:func:`freezestats.stats.items.task_level.task_level_contrasts`. They are tested with the graphical procedure of
:func:`freezestats.stats.inference.graphical.depth_sequence_graph` (Bretz et al. 2009): :math:`\alpha` split
evenly over the sizes, within a size half to the shallowest depth and half spread over the deeper ones, each
rejection passing its level to the next deeper depth, and a size that is done passing its level to the others.
Its familywise error is at most :math:`\alpha` over the whole task, whatever the tests' correlation.

Unlike the fixed sequence of :func:`~freezestats.stats.inference.noninferiority.noninferiority_sequence`, a
depth is still tested when a shallower one is not shown (its own share of :math:`\alpha`), so a noisy shallow
depth does not silence the deeper ones; the answer then names every depth shown, and "up to k" only where every
shallower depth is shown too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.graphical import depth_sequence_graph, graphical_test
from freezestats.stats.inference.sequence import NONINFERIORITY_COLUMNS, depth_rank, order_by_depth
from freezestats.stats.inference.tail_matched import matched_lower, matched_p_value, matched_side

__all__ = ["FAMILY_PROCEDURE", "TASK_NONINFERIORITY_COLUMNS", "task_noninferiority"]

#: The procedure in the words every label uses (README, report, tables); a test compares them with this.
FAMILY_PROCEDURE = (
    "graphical procedure over the task (Bretz et al. 2009): alpha split evenly over train sizes; within a size "
    "half to the shallowest depth, half shared by the deeper ones, a shown depth passing its level to the next "
    "deeper one"
)

TASK_NONINFERIORITY_COLUMNS = [
    *NONINFERIORITY_COLUMNS,
    "p_adj",
    "se_seed",
    "se_item",
    "ci_low",
    "ci_high",
    "population",
]
#: Carried from a two-part contrast (failed runs modelled apart) where the contrasts have them.
_FAILURE_COLUMNS = ["se_lower", "p_fail", "p_fail_reference", "failure_sides", "method"]


def task_noninferiority(
    contrasts: pd.DataFrame, *, margin: float, alpha: float = 0.05, first_share: float = 0.5
) -> pd.DataFrame:
    """Which depths lose less than ``margin`` against the reference, with the task's familywise error at ``alpha``.

    Parameters
    ----------
    contrasts
        :func:`~freezestats.stats.items.task_level.task_level_contrasts` of one task.
    margin
        Non-inferiority margin on the metric's scale, > 0 (``0.01`` = one accuracy point).
    alpha
        Familywise error rate over the task's hypotheses (all sizes and depths), one-sided.
    first_share
        The share of a size's level the shallowest depth holds (the rest is split over the deeper depths).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`~freezestats.stats.inference.noninferiority.noninferiority_sequence` (so that
        :func:`~freezestats.stats.inference.answer.noninferiority_answer` reads it) plus ``p_adj`` (the graph's
        adjusted p value: shown exactly when ``p_adj <= alpha``), the seed and item parts of ``se``, the
        per-comparison two-sided interval and the population the numbers speak of. ``alpha`` is each test's
        final local level and ``lower`` the one-sided bound at it, so ``noninferior`` is ``lower > -margin``;
        ``tested`` is always true (no depth is skipped). Two-part contrasts also carry ``se_lower`` (the side the
        bound uses), both cells' ``p_fail`` and their ``method``.
    """
    if not margin > 0 or not 0 < alpha < 0.5:
        raise ModelFitError(f"task_noninferiority: need margin > 0 and 0 < alpha < 0.5, got {margin!r}, {alpha!r}.")
    missing = [c for c in ("train_size", "frozen_layers", "estimate", "se", "df", "population") if c not in contrasts]
    if missing:
        raise ModelFitError(f"task_noninferiority: `contrasts` lacks {missing} (task_level_contrasts' columns).")
    table = order_by_depth(contrasts)
    # a two-part contrast's interval is not symmetric (a failure rate near 0 has room above it only): the test
    # of a lower bound reads the lower side, at the test's own level where the contrast carries its ladder
    lower_side = [c if c in table else plain for c, plain in (("se_lower", "se"), ("df_lower", "df"))]
    estimate, se, df = (table[c].to_numpy(dtype=float) for c in ("estimate", *lower_side))
    ladders = list(table["lower_tail"]) if "lower_tail" in table else [None] * len(table)
    # A contrast with no spread at all (every run of both cells scored the same, e.g. all at the constant
    # predictor) carries no evidence: it is tested with p = 1 and has no bound, never a zero-width one.
    spread = np.isfinite(se) & (se > 0)
    p_val = np.array([matched_p_value(e, margin, s, d, lad) if ok else 1.0
                      for e, s, d, lad, ok in zip(estimate, se, df, ladders, spread, strict=True)])  # fmt: skip
    weights, transitions = depth_sequence_graph(
        table["train_size"].to_numpy(), depth_rank(table["frozen_layers"].to_numpy()), first_share
    )
    result = graphical_test(p_val, weights, transitions, alpha)
    levels = np.maximum(result.local_alpha, 1e-300)
    lower = [matched_lower(e, a, s, d, lad) if ok else np.nan
             for e, a, s, d, lad, ok in zip(estimate, levels, se, df, ladders, spread, strict=True)]  # fmt: skip
    # the t statistic on the side the final local level reads (the 95% side where the contrast has no ladder)
    side = np.array([matched_side(a, s, d, lad)[0] for a, s, d, lad in zip(levels, se, df, ladders, strict=True)])
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = np.where(spread, (estimate + margin) / np.where(spread, side, 1.0), np.nan)
    sizes = int(table["train_size"].nunique())
    family = f"{FAMILY_PROCEDURE}; familywise alpha={alpha:g} over {len(table)} tests at {sizes} sizes"
    return table.assign(
        lower=lower,
        margin=float(margin),
        t=t_stat,
        p_val=p_val,
        tested=True,
        noninferior=result.rejected,
        alpha=result.local_alpha,
        family=family,
        p_adj=result.p_adjusted,
    )[TASK_NONINFERIORITY_COLUMNS + [c for c in _FAILURE_COLUMNS if c in table]]

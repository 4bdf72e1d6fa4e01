r"""Which arm, at which data size: every arm level against full fine-tuning, in one mixed model.

A study with several arms (freeze, probe, LoRA, re-initialised top layers: the ways of adapting the encoder)
compares arm levels that have no common order: LoRA rank 16 is not "deeper" than probe layer 6. So the levels
are not a depth sequence; each (arm, level) is one *arm level*, and the question is each arm level against the
reference (full fine-tuning, ``freeze`` at level 0) at each train size, with a multiplicity adjustment over
the arm levels of a size (Holm by default, Dunnett as the option), never the fixed sequence the freeze answer
uses.

The model is the freeze model with the arm level in place of the frozen depth,

.. math:: y = \text{arm level} \times \text{size} + (1 \mid \text{seed}) + (1 \mid \text{seed:size})
          + \varepsilon, \qquad \varepsilon \sim N(0, \sigma^2_{\text{arm level, size}}),

with **one residual variance per cell** by default. Arms differ in spread far more than sizes do: a linear
probe is deterministic given its features and subset (no seed variance at all), LoRA's seed spread is not
full fine-tuning's. A per-size variance would average a probe's zero with fine-tuning's spread and be wrong
for both; each cell's own variance, floored at one evaluation item's resolution, is right for each (the
floor keeps a deterministic arm's interval from collapsing to zero width: what is left is the reference's
variance). The seed terms are shared across arms because a seed fixes the train subset and the data order for
every arm, so contrasts are paired by seed where the data allow it.

The frozen-depth model is reused as it is: arm levels are coded as integers in its ``frozen_layers`` column
(the reference as 0) and decoded on the way out. Nothing in the fit depends on the codes' order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import unreplicated_cells
from freezestats.stats.inference.emm import contrasts_vs_reference
from freezestats.stats.inference.multitest import adjust_p
from freezestats.stats.models.mixed import fit_mixed

__all__ = [
    "ARM_CONTRAST_COLUMNS",
    "arm_answer",
    "arm_codes",
    "arm_contrasts",
    "arm_noninferiority",
    "require_every_cell",
]

ARM_CONTRAST_COLUMNS = [
    "arm", "arm_level", "train_size", "reference_arm", "reference_level", "estimate", "se", "df",
    "ci_low", "ci_high", "ci_low_adj", "ci_high_adj", "p_val", "p_adj", "adjust",
]  # fmt: skip


def arm_codes(runs: pd.DataFrame, reference: Sequence[object] = ("freeze", 0)) -> pd.DataFrame:
    """The table of arm levels in ``runs``: ``arm, arm_level, code``, the reference coded 0, the others 1..K
    in sorted order. Raises :class:`ModelFitError` when the columns or the reference are missing."""
    missing = [c for c in ("arm", "arm_level") if c not in runs.columns]
    if missing:
        raise ModelFitError(
            f"arm_contrasts: the results table has no column(s) {missing}; a study with [[arms]] exports "
            "`arm` and `arm_level` for every run."
        )
    levels = runs[["arm", "arm_level"]].drop_duplicates()
    levels = levels.assign(arm_level=levels["arm_level"].astype("int64")).sort_values(["arm", "arm_level"])
    ref_arm, ref_level = str(reference[0]), int(reference[1])  # type: ignore[call-overload]
    is_ref = (levels["arm"] == ref_arm) & (levels["arm_level"] == ref_level)
    if not is_ref.any():
        found = ", ".join(f"{a}:{lv}" for a, lv in levels.itertuples(index=False))
        raise ModelFitError(
            f"arm_contrasts: the reference arm level {ref_arm}:{ref_level} has no runs (arm levels: {found})."
        )
    others = levels[~is_ref].reset_index(drop=True)
    return pd.concat(
        [levels[is_ref].assign(code=0), others.assign(code=range(1, len(others) + 1))], ignore_index=True
    ).reset_index(drop=True)


def require_every_cell(
    coded: pd.DataFrame, caller: str, cell: str = "{arm}:{level}", variance: str = "per_cell"
) -> None:
    """Every (arm, arm_level) of ``coded`` has a run at every train size, two or more under a variance per cell,
    else one error naming the cells short of them.

    A residual variance per cell cannot be estimated from one run: the fit puts it near zero, an interval as
    narrow as the seed variance alone allows. A variance per size (or one pooled) lends a lone run its size's, so
    one run is enough there. The mixed model would refuse an empty cell too, but by its integer codes
    (``frozen_layers=3``), which name nothing the user can find in the study; ``cell`` formats an (arm, level)
    pair as the caller's readers know it.
    """
    per_cell = variance == "per_cell"
    short = [
        f"{cell.format(arm=a, level=int(k))} at n = {n} ({runs})"
        for (a, k), n, runs in unreplicated_cells(coded, ["arm", "arm_level"], min_runs=2 if per_cell else 1)
    ]
    if short:
        need = "at least two runs at every train size (each cell has its own residual variance)"
        raise ModelFitError(
            f"{caller}: every cell needs {need if per_cell else 'a run at every train size'}, but {len(short)} "
            f"have fewer (runs in brackets): {', '.join(short)}; run the study on (it resumes) or leave those out."
        )


def arm_contrasts(
    runs: pd.DataFrame,
    response: str,
    *,
    reference: Sequence[object] = ("freeze", 0),
    adjust: str = "holm",
    variance: str = "per_cell",
    task: str | None = None,
) -> pd.DataFrame:
    """Each arm level minus the reference arm level at each train size, from one mixed model of one task.

    ``runs`` is one task's runs (or several, with ``task`` naming one) with ``arm`` and ``arm_level``
    columns; every (arm level, size) cell needs a run. ``adjust`` is over the arm levels of a size (``holm``,
    ``dunnett``, ``bonferroni`` or ``none``). Returns :data:`ARM_CONTRAST_COLUMNS`, one row per
    (arm level other than the reference, size).
    """
    frame = runs if task is None else runs[runs["task"] == task]
    codes = arm_codes(frame, reference)
    coded = frame.assign(arm_level=frame["arm_level"].astype("int64")).merge(codes, on=["arm", "arm_level"])
    coded = coded.assign(frozen_layers=coded["code"])
    require_every_cell(coded, "arm_contrasts", variance=variance)
    fit = fit_mixed(coded, response, variance=variance)
    table = contrasts_vs_reference(fit, reference=0, adjust=adjust)
    back = codes.set_index("code")
    table = table.assign(
        arm=back.loc[table["frozen_layers"], "arm"].to_numpy(),
        arm_level=back.loc[table["frozen_layers"], "arm_level"].to_numpy(),
        reference_arm=str(reference[0]),
        reference_level=int(reference[1]),  # type: ignore[call-overload]
    )
    return table.sort_values(["train_size", "arm", "arm_level"]).reset_index(drop=True)[ARM_CONTRAST_COLUMNS]


def arm_noninferiority(
    contrasts: pd.DataFrame, *, margin: float, alpha: float = 0.05, adjust: str = "holm"
) -> pd.DataFrame:
    """Which arm levels lose less than ``margin`` against the reference, per train size, Holm over the size's
    arm levels (they have no order to test them in sequence, unlike frozen depths).

    ``contrasts`` is :func:`arm_contrasts`' table. Adds ``lower`` (the one-sided (1 - alpha) bound,
    unadjusted), ``p_val`` (one-sided, of H0: difference <= -margin), ``p_adj`` and ``noninferior``
    (``p_adj < alpha``); an arm level without an interval (NaN se) is never claimed.
    """
    if not margin > 0:
        raise ModelFitError(f"arm_noninferiority: `margin` must be > 0, but got {margin!r}.")
    out = contrasts[["arm", "arm_level", "train_size", "reference_arm", "reference_level", "estimate", "se", "df"]]
    out = out.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = (out["estimate"] + margin) / out["se"]
    out["lower"] = out["estimate"] - stats.t.ppf(1 - alpha, out["df"]) * out["se"]
    out["margin"] = float(margin)
    out["p_val"] = stats.t.sf(t_stat, out["df"])
    out["p_adj"] = np.nan
    for _, rows in out.groupby("train_size"):
        out.loc[rows.index, "p_adj"] = adjust_p(rows["p_val"].to_numpy(), adjust)
    out["noninferior"] = out["p_adj"] < alpha  # NaN compares False: no interval, no claim
    out["adjust"] = adjust
    return out.reset_index(drop=True)


def arm_answer(noninferiority: pd.DataFrame, cost: pd.DataFrame | None = None) -> pd.DataFrame:
    """One sentence per train size: the arm levels shown non-inferior and, when ``cost`` (``arm, arm_level,
    trainable_params``) is given, the cheapest of them; or that none was shown, with the best estimate.

    "Not shown non-inferior" is said as such, never as "worse": the sentence names the bound that fell short.
    """
    rows = []
    for size, at in noninferiority.groupby("train_size"):
        margin = float(at["margin"].iloc[0])
        points = f"{100 * margin:g} point{'s' if margin != 0.01 else ''}"
        shown = at[at["noninferior"]]
        if cost is not None and len(shown):
            shown = shown.merge(cost, on=["arm", "arm_level"], how="left").sort_values("trainable_params")
        names = [f"{r.arm} {r.arm_level}" for r in shown.itertuples()]
        if names:
            cheapest = (
                f"; the fewest trainable parameters among them: {names[0]} ({int(shown['trainable_params'].iloc[0]):,})"
                if cost is not None and shown["trainable_params"].notna().iloc[0]
                else ""
            )
            statement = f"non-inferior to full fine-tuning within {points} at n = {size}: {', '.join(names)}{cheapest}"
        else:
            best = at.sort_values(["p_adj", "lower"], ascending=[True, False]).iloc[0]
            statement = (
                f"no arm level was shown non-inferior to full fine-tuning within {points} at n = {size} (the closest, "
                f"{best.arm} {best.arm_level}: estimate {best.estimate:+.4f}, one-sided lower bound {best.lower:+.4f} "
                f"before adjustment against {-margin:+.4f}, {best.adjust}-adjusted p = {best.p_adj:.3g} over the "
                f"{len(at)} arm levels of the size)"
            )
        rows.append({"train_size": int(size), "n_noninferior": len(names), "statement": statement})
    return pd.DataFrame(rows)

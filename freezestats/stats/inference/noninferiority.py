r"""Non-inferiority of frozen depths to full fine-tuning, tested in fixed sequence from shallow to deep.

The question a reviewer asks of a freezing study is not "does freezing change the score?" (a difference test
that a small study fails to reject proves nothing) but "how much can be frozen *without losing more than m*?".
That is a non-inferiority question: for depth :math:`k` at training size :math:`n`,

.. math:: H_0: \mu_{kn} - \mu_{0n} \le -m \quad\text{against}\quad H_1: \mu_{kn} - \mu_{0n} > -m,

one-sided, with the margin :math:`m` fixed before looking at the data (:func:`default_margin`). Freezing more
layers can only be expected to cost more, so the depths form a natural order and are tested *in fixed
sequence* from the shallowest to the deepest freeze, each at the full level :math:`\alpha`, stopping at the
first depth not shown non-inferior (Maurer, Hothorn & Lehmacher 1995; Hsu & Berger 1999). The procedure
controls the familywise error rate at :math:`\alpha` within a training size without any adjustment, and its
answer is a single number per size: the deepest depth shown non-inferior, which every shallower depth
then also is.

Before any cost is stated the full model must be shown to have learned something: :func:`reference_beats_baseline`
tests that the reference cell mean exceeds the majority-class baseline. It is the first hypothesis of the same
fixed sequence (tested at :math:`\alpha`, before the depths), so the familywise error stays at :math:`\alpha`.
:func:`noninferiority_answer` turns both tables into one sentence per training size.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import FixedEffectsFit
from freezestats.stats.inference.answer import noninferiority_answer
from freezestats.stats.inference.emm import _check_fit, contrasts_vs_reference, estimated_marginal_means
from freezestats.stats.inference.sequence import (
    BASELINE_COLUMNS,
    NONINFERIORITY_COLUMNS,
    Baseline,
    baseline_by_size,
    fixed_sequence,
    order_by_depth,
)

__all__ = ["default_margin", "noninferiority_answer", "noninferiority_sequence", "reference_beats_baseline"]

_ACCURACY_LIKE = ("accuracy", "f1", "macro_f1")
_CORRELATION_LIKE = ("mcc", "pearson", "spearman")
_ADJUST_ACROSS = ("none", "sizes")


def default_margin(metric: str) -> float:
    r"""The non-inferiority margin used when none is given: the largest loss still called negligible.

    Parameters
    ----------
    metric
        The task's metric: ``"accuracy"``, ``"f1"``, ``"macro_f1"``, ``"mcc"``, ``"pearson"`` or ``"spearman"``.

    Returns
    -------
    float
        ``0.01`` (one point) for accuracy, F1 and macro-F1; ``0.02`` (two points) for MCC, Pearson and Spearman.

    Raises
    ------
    ModelFitError
        An unknown ``metric``.

    Notes
    -----
    *Why one point for accuracy-like metrics.* One accuracy point is the resolution at which GLUE results are
    reported and compared, and about the item-level sampling SD of one run's accuracy on SST-2's validation set
    (:math:`\sqrt{0.92 \cdot 0.08 / 872} \approx 0.009`): a smaller loss could not be told apart from the
    choice of validation items.

    *Why two points for correlation metrics.* The same item-level noise is about twice as large on a
    correlation scale. For a balanced binary task whose errors are balanced across the two classes,
    :math:`TP = TN = a N/2` and :math:`FP = FN = (1-a) N/2`, so

    .. math:: \mathrm{MCC} = \frac{TP\cdot TN - FP\cdot FN}{\sqrt{(TP+FP)(TP+FN)(TN+FP)(TN+FN)}} = 2a - 1,

    and a loss of one accuracy point is a loss of two MCC points (on SST-2, the sampling SD of 0.009 in
    accuracy is 0.018 in MCC). MCC is the phi coefficient, i.e. Pearson's correlation of the binary prediction
    with the binary label, so the same factor applies to Pearson / Spearman scored on binary outcomes. For a
    continuous task such as STS-B the metric's own sampling SD is smaller
    (:math:`(1 - r^2)/\sqrt{N} \approx (1 - 0.88^2)/\sqrt{1500} \approx 0.006`), so 0.02 is generous there:
    it is a convention (the scale of two points), not a derivation, and a study should state its margin in its
    protocol and pass it explicitly.

    *Unordered factors.* The fixed-sequence procedure of :func:`noninferiority_sequence` relies on the
    depths' natural order. For comparisons without one (optimizers, learning-rate schedules, tasks), use a
    Holm or Dunnett adjustment over the family instead (:func:`freezestats.stats.contrasts_vs_reference`).
    """
    name = str(metric).strip().lower()
    if name in _ACCURACY_LIKE:
        return 0.01
    if name in _CORRELATION_LIKE:
        return 0.02
    raise ModelFitError(
        f"`metric` must be one of {[*_ACCURACY_LIKE, *_CORRELATION_LIKE]} to choose a default margin, but got "
        f"metric={metric!r}; pass margin= explicitly."
    )


def noninferiority_sequence(
    fit: FixedEffectsFit | pd.DataFrame,
    *,
    margin: float,
    reference: int = 0,
    alpha: float = 0.05,
    adjust_across: Literal["none", "sizes"] = "none",
) -> pd.DataFrame:
    r"""Which frozen depths lose less than ``margin`` against the reference, tested shallow to deep, per size.

    Parameters
    ----------
    fit
        A fitted model that :func:`freezestats.stats.contrasts_vs_reference` accepts (a
        :class:`~freezestats.stats.MixedFit` from :func:`~freezestats.stats.fit_mixed`, or an
        :class:`~freezestats.stats.OlsFit`), or a table of its contrasts against the reference from another
        method (``train_size, frozen_layers, reference, estimate, se, df``: the two-part contrasts, when runs
        fail). A table with per-side SEs (``se_lower, df_lower``, as the two-part contrasts' asymmetric intervals
        have) is tested on its lower side, the one a loss bound lies on; those SEs come from the table's 95%
        interval, so at another level the bound is approximate. A contrast without a standard error (NaN) is
        never shown non-inferior, so its sequence stops there.
    margin
        Non-inferiority margin on the response scale, > 0 (``0.01`` = one accuracy point); fix it before looking
        at the data, e.g. with :func:`default_margin`.
    reference
        The depth every other depth is compared with; default 0 (full fine-tuning).
    alpha
        Level of every one-sided test in the sequence, in (0, 0.5).
    adjust_across
        ``"none"`` (default): each training size is its own family, tested at ``alpha``. ``"sizes"``: one claim
        about all sizes at once; each size's sequence is run at ``alpha / n_sizes`` (Bonferroni).

    Returns
    -------
    pandas.DataFrame
        One row per (train_size, depth other than the reference), sorted by ``train_size`` then by the order of
        the sequence (how much is frozen: ``0``, then ``-1`` (embeddings only), then ``1, 2, ...``), with columns

        * ``train_size``, ``frozen_layers``, ``reference`` (int)
        * ``estimate``: :math:`\hat\mu_k - \hat\mu_{ref}` at that size, from the model
        * ``se``, ``df``: its standard error and the t degrees of freedom (``fit.contrast_df``)
        * ``lower``: one-sided :math:`(1 - \alpha')` lower confidence bound ``estimate - t_{1-α', df} se``, with
          :math:`\alpha'` the ``alpha`` column; the depth is non-inferior exactly when ``lower > -margin``
        * ``margin``: :math:`m`
        * ``t``: ``(estimate + margin) / se``
        * ``p_val``: one-sided p value of :math:`H_0: \mu_k - \mu_{ref} \le -m`, upper tail of ``t``
        * ``tested``: the depth was reached in the sequence (every shallower depth was shown non-inferior)
        * ``noninferior``: ``tested`` and ``p_val < alpha``; a depth not reached is never claimed, whatever its
          p value
        * ``alpha``: the level each test of the size ran at (``alpha / n_sizes`` for ``"sizes"``)
        * ``family``: the error-rate family in words

    Raises
    ------
    ModelFitError
        ``margin`` not > 0, ``alpha`` not in (0, 0.5), unknown ``adjust_across``, ``reference`` not a level of
        the fit, or a fit without a fixed-effects covariance (a GLMM).

    Notes
    -----
    Fixed-sequence testing (Maurer et al. 1995; Westfall & Krishen 2001): with hypotheses ordered
    :math:`H_1, H_2, \dots` before seeing the data, test :math:`H_1` at :math:`\alpha`; only if it is rejected
    test :math:`H_2` at :math:`\alpha`, and so on; stop at the first non-rejection. A false rejection needs the
    first true null in the order to be rejected, which happens with probability at most :math:`\alpha`, so the
    familywise error is at most :math:`\alpha` with no adjustment within the sequence. Hsu & Berger (1999)
    show that this stepwise procedure is the closed-testing / intersection-union form of the
    confidence-set statement ":math:`\mu_k - \mu_{ref} > -m` for every depth up to the first failure". Its power
    comes from the order: freezing more layers is expected to cost more, so the depths most likely to pass are
    tested first. A depth deeper than the first failure is never claimed even if its own test would pass (a
    non-monotone curve is then reported as "not shown").

    The sequence orders depths by how much they freeze (:math:`0 < -1 < 1 < 2 < \dots`: freezing the
    embeddings only is the shallowest freeze); depths shallower than ``reference`` (when it is not 0) are
    part of the same sequence. Factors without a natural order need Holm or Dunnett instead
    (:func:`freezestats.stats.contrasts_vs_reference`).

    ``adjust_across="sizes"`` answers "at every training size at once": the sizes' sequences are independent
    families joined by Bonferroni, which is conservative but needs no assumption about how the sizes' tests
    correlate (the seed intercept makes them positively dependent).

    Estimates, standard errors and df are those of :func:`freezestats.stats.contrasts_vs_reference`
    (``adjust="none"``); the test is emmeans' ``test(..., delta = m, side = "noninferiority")``.

    References
    ----------
    Maurer, W., Hothorn, L. A. & Lehmacher, W. (1995). Multiple comparisons in drug clinical trials and
    preclinical assays: a-priori ordered hypotheses. In *Biometrie in der chemisch-pharmazeutischen
    Industrie* 6, 3-18.
    Hsu, J. C. & Berger, R. L. (1999). Stepwise confidence intervals without multiplicity adjustment for
    dose-response and toxicity studies. *JASA* 94(446), 468-482.
    Westfall, P. H. & Krishen, A. (2001). Optimally weighted, fixed sequence and gatekeeper multiple testing
    procedures. *J. Statist. Plann. Inference* 99(1), 25-40.
    """
    _check_margin(margin, "noninferiority_sequence")
    _check_alpha(alpha, "noninferiority_sequence")
    if adjust_across not in _ADJUST_ACROSS:
        raise ModelFitError(
            f"noninferiority_sequence: `adjust_across` must be one of {list(_ADJUST_ACROSS)}, but got "
            f"adjust_across={adjust_across!r}."
        )
    if isinstance(fit, pd.DataFrame):
        table = fit[fit["reference"] == reference] if "reference" in fit.columns else fit.assign(reference=reference)
        if table.empty:
            raise ModelFitError(f"noninferiority_sequence: no contrast against reference={reference} in the table.")
        if "se_lower" in table.columns:  # an asymmetric interval: a lower bound lies on its lower side
            table = table.assign(se=table["se_lower"], df=table["df_lower"])
        table = table[["train_size", "frozen_layers", "reference", "estimate", "se", "df"]]
    else:
        fit = _check_fit(fit, "noninferiority_sequence")
        table = contrasts_vs_reference(fit, reference=reference, adjust="none")
    table = order_by_depth(table)
    n_sizes = int(table["train_size"].nunique())
    level = alpha / n_sizes if adjust_across == "sizes" else alpha
    estimate = table["estimate"].to_numpy(dtype=float)
    se = table["se"].to_numpy(dtype=float)
    df = table["df"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = (estimate + margin) / se
    p_val = stats.t.sf(t_stat, df)
    tested = fixed_sequence(table["train_size"].to_numpy(), p_val < level)
    family = (
        f"fixed sequence within each train size, each test at alpha={alpha:g}"
        if adjust_across == "none"
        else f"fixed sequence within each train size, Bonferroni over {n_sizes} sizes: each test at "
        f"alpha/{n_sizes}={level:g}"
    )
    return table.assign(
        lower=estimate - stats.t.ppf(1.0 - level, df) * se,
        margin=float(margin),
        t=t_stat,
        p_val=p_val,
        tested=tested,
        noninferior=tested & (p_val < level),
        alpha=level,
        family=family,
    )[NONINFERIORITY_COLUMNS]


def reference_beats_baseline(
    fit: FixedEffectsFit, baseline: Baseline, alpha: float = 0.05, *, reference: int = 0
) -> pd.DataFrame:
    r"""Per training size, a one-sided test that the reference depth scores above the majority-class baseline.

    A cost of freezing is only meaningful relative to a model that learned something: if full fine-tuning is
    not shown to beat the constant majority-class predictor at some size, "freezing k layers loses less than
    one point" is true of a model that learned nothing. :func:`noninferiority_answer` states no cost there.

    Parameters
    ----------
    fit
        As for :func:`noninferiority_sequence`.
    baseline
        The majority-class baseline on the response scale: one number for every size, or a mapping / Series
        ``{train_size: baseline}`` (the constant predictor is fitted on the training labels, so it can differ
        by size), e.g. ``table.groupby("train_size")["majority_baseline"].mean()``.
    alpha
        Level of the one-sided test, in (0, 0.5). Use the same level as the sequence that follows (``alpha /
        n_sizes`` when that sequence adjusts across sizes).
    reference
        The depth whose cell mean is tested; default 0 (full fine-tuning).

    Returns
    -------
    pandas.DataFrame
        One row per training size, sorted, with columns

        * ``train_size``, ``reference`` (int)
        * ``estimate``, ``se``, ``df``: the reference cell's model-based mean
          (:func:`freezestats.stats.estimated_marginal_means`)
        * ``baseline``: :math:`b` at that size
        * ``lower``: one-sided :math:`(1-\alpha)` lower confidence bound of the mean
        * ``t``: ``(estimate - baseline) / se``
        * ``p_val``: one-sided p value of :math:`H_0: \mu_{ref} \le b`
        * ``beats_baseline``: ``p_val < alpha``
        * ``alpha``: the level

    Raises
    ------
    ModelFitError
        ``alpha`` not in (0, 0.5), a ``baseline`` that is not finite or misses a training size of the fit,
        ``reference`` not a level of the fit, or a fit without covariance.

    Notes
    -----
    Tested first, before the depths, at the same level: the baseline test is a gatekeeper at the head of the
    fixed sequence (Westfall & Krishen 2001), so the familywise error of "beats the baseline, and depths up to k
    lose less than m" stays at :math:`\alpha`. The standard error of a cell mean includes the seed variance
    (unlike a within-seed difference), so with few seeds this test has fewer degrees of freedom than the
    contrasts.
    """
    fit = _check_fit(fit, "reference_beats_baseline")
    _check_alpha(alpha, "reference_beats_baseline")
    if reference not in fit.frozen_levels:
        raise ModelFitError(
            f"reference_beats_baseline: `reference` must be one of the frozen levels of the fit "
            f"{sorted(fit.frozen_levels)}, but got reference={reference!r}."
        )
    means = estimated_marginal_means(fit)
    means = means[means["frozen_layers"] == reference].sort_values("train_size", ignore_index=True)
    sizes = means["train_size"].to_numpy()
    base = baseline_by_size(baseline, sizes, "reference_beats_baseline")
    estimate = means["emmean"].to_numpy(dtype=float)
    se = means["se"].to_numpy(dtype=float)
    df = means["df"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = (estimate - base) / se
    p_val = stats.t.sf(t_stat, df)
    return pd.DataFrame(
        {
            "train_size": sizes.astype(np.int64),
            "reference": int(reference),
            "estimate": estimate,
            "se": se,
            "df": df,
            "baseline": base,
            "lower": estimate - stats.t.ppf(1.0 - alpha, df) * se,
            "t": t_stat,
            "p_val": p_val,
            "beats_baseline": p_val < alpha,
            "alpha": float(alpha),
        }
    )[BASELINE_COLUMNS]


# --------------------------------------------------------------------------------------------------------------
# Private helpers


def _check_margin(margin: float, caller: str) -> None:
    if (
        isinstance(margin, bool)
        or not isinstance(margin, (int, float, np.integer, np.floating))
        or not (np.isfinite(margin) and margin > 0)
    ):
        raise ModelFitError(
            f"{caller}: `margin` must be a finite number > 0 (the largest loss still called negligible, on the "
            f"response scale), but got margin={margin!r}."
        )


def _check_alpha(alpha: float, caller: str) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or not (0 < alpha < 0.5):
        raise ModelFitError(f"{caller}: `alpha` must be in (0, 0.5), but got alpha={alpha!r}.")

r"""Lee, Tang & Lin's "keeps 90% of the quality" as a test on a fitted model, with a Fieller interval for the ratio.

:func:`lee_ratio_tests` asks, depth by depth in fixed sequence shallow to deep, whether
:math:`\mu_k - b \ge r\,(\mu_0 - b)` is shown (``b`` a baseline the quality is measured above, 0 by default):
the claim of Lee et al. (2019) stated as a one-sided test rather than read off a bootstrap curve
(:func:`freezestats.stats.relative_quality.operating_point.operating_point`, the secondary display).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import FixedEffectsFit
from freezestats.stats.inference.emm import _check_fit, _design_rows
from freezestats.stats.inference.sequence import Baseline, baseline_by_size, fixed_sequence, order_by_depth

__all__ = ["LEE_TEST_COLUMNS", "lee_ratio_tests"]

LEE_TEST_COLUMNS = [
    "train_size",
    "frozen_layers",
    "reference",
    "ratio",
    "baseline",
    "mean",
    "reference_mean",
    "estimate",
    "se",
    "df",
    "lower",
    "t",
    "p_val",
    "tested",
    "reaches",
    "alpha",
    "ratio_estimate",
    "ratio_ci_low",
    "ratio_ci_high",
    "note",
]


def lee_ratio_tests(
    fit: FixedEffectsFit,
    *,
    ratio: float = 0.9,
    reference: int = 0,
    alpha: float = 0.05,
    baseline: Baseline | None = None,
) -> pd.DataFrame:
    r"""Lee et al.'s "keeps 90% of the quality" as a one-sided t test per depth, in fixed sequence, with Fieller.

    Parameters
    ----------
    fit
        A fitted model that :func:`freezestats.stats.contrasts_vs_reference` accepts (a
        :class:`~freezestats.stats.MixedFit` from :func:`~freezestats.stats.fit_mixed`, or an
        :class:`~freezestats.stats.OlsFit`).
    ratio
        The fraction of the reference's quality a depth must keep, in (0, 1]; Lee et al.'s 90% is 0.9.
    reference
        The depth of the full model; default 0.
    alpha
        Level of every one-sided test, in (0, 0.5); the Fieller interval has coverage :math:`1 - 2\alpha`.
    baseline
        None (default): Lee et al.'s ratio with origin 0. A number, or a mapping / Series ``{train_size: b}``
        (e.g. the majority-class baseline): the ratio of improvements over :math:`b` (see Notes).

    Returns
    -------
    pandas.DataFrame
        One row per (train_size, depth other than the reference), sorted by ``train_size`` then from the
        shallowest to the deepest freeze (the order of the sequence), with columns

        * ``train_size``, ``frozen_layers``, ``reference`` (int)
        * ``ratio``: :math:`r`; ``baseline``: :math:`b` (0 when not given)
        * ``mean``, ``reference_mean``: the model's cell means :math:`\hat\mu_k`, :math:`\hat\mu_0`
        * ``estimate``: :math:`\hat\mu_k - b - r(\hat\mu_0 - b)`, positive when the depth keeps more than the
          fraction :math:`r`
        * ``se``: :math:`\sqrt{l' \hat V l}` with :math:`l = x_k - r x_0`
        * ``df``: t degrees of freedom of :math:`l` (``fit.contrast_df``: Satterthwaite for the mixed model)
        * ``lower``: one-sided :math:`(1-\alpha)` lower confidence bound of ``estimate``
        * ``t``: ``estimate / se``
        * ``p_val``: one-sided p value of :math:`H_0: \mu_k - b \le r(\mu_0 - b)`
        * ``tested``: reached in the fixed sequence (every shallower depth reached the fraction)
        * ``reaches``: ``tested`` and ``p_val < alpha``: the depth is shown to keep at least the fraction
        * ``alpha``: the level
        * ``ratio_estimate``: :math:`(\hat\mu_k - b)/(\hat\mu_0 - b)` (NaN when the denominator is 0)
        * ``ratio_ci_low``, ``ratio_ci_high``: Fieller's :math:`(1-2\alpha)` interval for the ratio;
          ``ratio_ci_low`` is also its one-sided :math:`(1-\alpha)` lower bound. ``-inf``/``inf`` when the set is
          unbounded (see ``note``)
        * ``note``: empty, or why the interval is unbounded or the ratio has no "fraction of quality" reading

    Raises
    ------
    ModelFitError
        ``ratio`` not in (0, 1], ``alpha`` not in (0, 0.5), a ``baseline`` that is not finite or misses a train
        size, ``reference`` not a level of the fit, or a fit without a fixed-effects covariance (a GLMM).

    Notes
    -----
    *The test is linear.* "Depth :math:`k` keeps at least a fraction :math:`r` of the quality" is
    :math:`\mu_k - b \ge r(\mu_0 - b)`, i.e. :math:`l'\beta - (1 - r) b \ge 0` with the contrast
    :math:`l = x_k - r\,x_0` built from the rows of the fit's design (:mod:`freezestats.stats.inference.emm`). So no
    ratio of estimates (with its skewed, possibly unbounded sampling distribution) is needed to test it: the
    hypothesis :math:`H_0: l'\beta - (1 - r)b \le 0` gets a one-sided t test with standard error
    :math:`\sqrt{l'\hat V l}` and the df the fit assigns to :math:`l`. With 5 seeds this is the test that
    Lee et al.'s "90% of the quality" needs, which the bootstrap :func:`operating_point` does not provide.

    *Fixed sequence.* Depths are tested from the shallowest to the deepest freeze (``0, -1, 1, 2, ...``), each
    at ``alpha``, stopping at the first depth not shown to reach the fraction, as in
    :func:`freezestats.stats.inference.noninferiority.noninferiority_sequence` (Hsu & Berger 1999): the familywise error
    within a training size is at most ``alpha`` without adjustment, and the deepest depth with ``reaches`` is
    the operating point the data support. Depths after the first failure are never claimed.

    *Origin.* Lee et al. use :math:`b = 0`, which makes 90% of an accuracy an easy bar (the constant
    majority predictor has 57% of a 0.90 SST-2 accuracy); passing the majority baseline as ``baseline`` asks for
    90% of the *improvement* over it (see :func:`relative_scores`).

    *Fieller's interval* (Fieller 1954) is the set of ratios :math:`\rho` that the same t test does not reject
    two-sidedly at level :math:`2\alpha`: with :math:`a = \hat\mu_k - b`, :math:`d = \hat\mu_0 - b`, variances
    :math:`v_{aa}, v_{dd}` and covariance :math:`v_{ad}` from the fit, and :math:`q = t_{1-\alpha,\nu}`,

    .. math:: \{\rho : (a - \rho d)^2 \le q^2 (v_{aa} - 2\rho v_{ad} + \rho^2 v_{dd})\},

    the roots of a quadratic. :math:`\nu` is the df of the contrast at the tested ratio, so for :math:`d > 0` the
    test rejects exactly when ``ratio < ratio_ci_low``. The set is a bounded interval only when the
    denominator is significantly different from 0 (:math:`d^2 > q^2 v_{dd}`); otherwise it is the whole line or
    the union of two half-lines, and both limits are reported as ``-inf``/``inf`` with the reason in ``note``
    (a delta-method interval would hide that the data cannot bound the ratio). The ratio is a single number
    per cell, so the interval is not adjusted for the sequence: it is a description, the test is the claim.

    References
    ----------
    Lee, J., Tang, R. & Lin, J. (2019). What would Elsa do? Freezing layers during transformer fine-tuning.
    *arXiv:1911.03090*.
    Fieller, E. C. (1954). Some problems in interval estimation. *JRSS B* 16(2), 175-185.
    Hsu, J. C. & Berger, R. L. (1999). Stepwise confidence intervals without multiplicity adjustment for
    dose-response and toxicity studies. *JASA* 94(446), 468-482.
    """
    fit = _check_fit(fit, "lee_ratio_tests")
    r = _check_ratio(ratio)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or not 0 < alpha < 0.5:
        raise ModelFitError(f"lee_ratio_tests: `alpha` must be in (0, 0.5), but got alpha={alpha!r}.")
    if reference not in fit.frozen_levels:
        raise ModelFitError(
            f"lee_ratio_tests: `reference` must be one of the frozen levels of the fit {sorted(fit.frozen_levels)}, "
            f"but got reference={reference!r}."
        )
    others = [k for k in fit.frozen_levels if k != reference]
    if not others:
        raise ModelFitError(
            f"lee_ratio_tests compares depths with the reference, but the fit has only frozen_layers={reference}."
        )
    cells = [(int(n), int(k)) for n in fit.train_sizes for k in others]
    table = order_by_depth(pd.DataFrame(cells, columns=["train_size", "frozen_layers"]))
    sizes = table["train_size"].to_numpy()
    rows = _design_rows(fit, table["frozen_layers"].to_numpy(), sizes)
    ref_rows = _design_rows(fit, np.full(len(table), reference), sizes)
    base = baseline_by_size(baseline, sizes, "lee_ratio_tests")
    cov = fit.cov_params
    mean, ref_mean = rows @ fit.params, ref_rows @ fit.params
    v_aa = np.einsum("ij,jk,ik->i", rows, cov, rows)
    v_dd = np.einsum("ij,jk,ik->i", ref_rows, cov, ref_rows)
    v_ad = np.einsum("ij,jk,ik->i", rows, cov, ref_rows)
    contrast = rows - r * ref_rows
    estimate = mean - base - r * (ref_mean - base)
    se = np.sqrt(np.maximum(v_aa - 2 * r * v_ad + r * r * v_dd, 0.0))
    df = np.asarray(fit.contrast_df(contrast), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = estimate / se
    p_val = stats.t.sf(t_stat, df)
    tested = fixed_sequence(sizes, p_val < alpha)
    q = stats.t.ppf(1.0 - alpha, df)
    low, high, notes = _fieller(mean - base, ref_mean - base, v_aa, v_dd, v_ad, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_estimate = np.where(ref_mean != base, (mean - base) / (ref_mean - base), np.nan)
    return table.assign(
        reference=int(reference),
        ratio=r,
        baseline=base,
        mean=mean,
        reference_mean=ref_mean,
        estimate=estimate,
        se=se,
        df=df,
        lower=estimate - q * se,
        t=t_stat,
        p_val=p_val,
        tested=tested,
        reaches=tested & (p_val < alpha),
        alpha=float(alpha),
        ratio_estimate=ratio_estimate,
        ratio_ci_low=low,
        ratio_ci_high=high,
        note=notes,
    )[LEE_TEST_COLUMNS]


def _check_ratio(ratio: float) -> float:
    try:
        r = float(ratio)
    except (TypeError, ValueError):
        r = float("nan")
    if isinstance(ratio, bool) or not 0.0 < r <= 1.0:
        raise ModelFitError(
            f"lee_ratio_tests: `ratio` must be in (0, 1] (a fraction of the full model's quality), but got "
            f"ratio={ratio!r}; Lee et al. use 0.9."
        )
    return r


def _fieller(
    a: np.ndarray, d: np.ndarray, v_aa: np.ndarray, v_dd: np.ndarray, v_ad: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    r"""Fieller's set :math:`\{\rho: (a - \rho d)^2 \le q^2 (v_{aa} - 2\rho v_{ad} + \rho^2 v_{dd})\}`, elementwise.

    Returns the lower and upper limits (``-inf``/``inf`` when the set is unbounded) and a note per element.
    """
    quad = d * d - q * q * v_dd  # coefficient of rho^2; > 0 iff the denominator is significantly non-zero
    half = a * d - q * q * v_ad
    const = a * a - q * q * v_aa
    low = np.full(a.shape, -np.inf)
    high = np.full(a.shape, np.inf)
    notes = []
    for i in range(a.size):
        disc = half[i] ** 2 - quad[i] * const[i]
        if quad[i] > 0:
            root = np.sqrt(max(disc, 0.0))
            low[i], high[i] = (half[i] - root) / quad[i], (half[i] + root) / quad[i]
            notes.append(
                ""
                if d[i] > 0
                else "the reference mean is significantly below the baseline, so the ratio is not a fraction of "
                "any quality"
            )
        elif disc < 0 or quad[i] == 0:
            notes.append(
                "unbounded: the reference mean is not significantly different from the baseline, and the Fieller "
                "set is the whole real line"
            )
        else:
            r1, r2 = sorted(((half[i] - np.sqrt(disc)) / quad[i], (half[i] + np.sqrt(disc)) / quad[i]))
            notes.append(
                "unbounded: the reference mean is not significantly different from the baseline; the Fieller set "
                f"is (-inf, {r1:.4g}] and [{r2:.4g}, inf)"
            )
    return low, high, notes

r"""Equivalence tests (TOST) of each depth against the reference, per train size, from a fitted model.

Kept apart from :mod:`.emm`, which builds the contrasts: this module only tests them against a margin on both
sides, with the contrasts' standard errors and df.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import FixedEffectsFit
from freezestats.stats.inference.emm import _check_fit, _estimate, _reference_rows

__all__ = ["equivalence_tests"]


def equivalence_tests(
    fit: FixedEffectsFit,
    margin: float,
    reference: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    r"""Two one-sided tests (TOST): is each frozen level within ``± margin`` of the reference, per train size?

    Parameters
    ----------
    fit
        A :class:`~freezestats.stats.models.MixedFit` or :class:`~freezestats.stats.models.OlsFit`.
    margin
        Equivalence margin on the response scale (e.g. ``0.01`` = one accuracy point); must be > 0 and chosen
        before looking at the data.
    reference
        The frozen level to compare with; default 0 (full fine-tuning).
    alpha
        Level of each one-sided test.

    Returns
    -------
    pandas.DataFrame
        One row per (train_size, frozen level other than the reference), sorted like
        :func:`~.emm.contrasts_vs_reference`, with columns

        * ``train_size``, ``frozen_layers``, ``reference`` (int)
        * ``estimate``, ``se``, ``df``: the difference ``frozen_layers - reference`` as in
          :func:`~.emm.contrasts_vs_reference`
        * ``lower_p``: p value of :math:`H_0: \Delta \le -m` (upper tail of :math:`(\hat\Delta + m)/se`)
        * ``upper_p``: p value of :math:`H_0: \Delta \ge m` (lower tail of :math:`(\hat\Delta - m)/se`)
        * ``p_val``: ``max(lower_p, upper_p)``, the TOST p value
        * ``equivalent``: ``p_val < alpha``
        * ``margin``: ``m``
        * ``ci90_low``, ``ci90_high``: the :math:`1 - 2\alpha` interval (90% at the default ``alpha``);
          ``equivalent`` holds exactly when it lies inside ``(-m, m)``

    Raises
    ------
    ModelFitError
        ``margin <= 0``, ``alpha`` not in (0, 0.5), ``reference`` not a level, or a fit without covariance.

    Notes
    -----
    Schuirmann's TOST with the model's standard error and df (Satterthwaite for the mixed model). No
    multiplicity adjustment: each row answers its own question at level ``alpha`` (TOST is an
    intersection-union test, so a single equivalence claim needs no adjustment; a claim about *all* depths at
    once would). In the two-group case with classical OLS (``fit_ols(..., cov_type="nonrobust")``) it equals
    ``statsmodels.stats.weightstats.ttost_ind(..., usevar="pooled")``; for the mixed model it equals emmeans'
    ``test(..., delta = m, side = "equivalence")``.

    References
    ----------
    Schuirmann, D. J. (1987). A comparison of the two one-sided tests procedure and the power approach for
    assessing the equivalence of average bioavailability. *J. Pharmacokinet. Biopharm.* 15(6), 657-680.
    Lakens, D. (2017). Equivalence tests: a practical primer for t tests, correlations, and meta-analyses.
    *Social Psychological and Personality Science* 8(4), 355-362.
    """
    fit = _check_fit(fit, "equivalence_tests")
    if not margin > 0:
        raise ModelFitError(
            f"`margin` must be > 0 (the largest difference you would call negligible, on the response scale), "
            f"but got margin={margin!r}."
        )
    if not 0 < alpha < 0.5:
        raise ModelFitError(f"`alpha` must be in (0, 0.5), but got alpha={alpha!r}.")
    table, rows = _reference_rows(fit, reference, "equivalence_tests")
    estimate, se, df = _estimate(fit, rows)
    lower_p = stats.t.sf((estimate + margin) / se, df)
    upper_p = stats.t.cdf((estimate - margin) / se, df)
    p_val = np.maximum(lower_p, upper_p)
    crit = stats.t.ppf(1 - alpha, df)
    return table.assign(
        estimate=estimate,
        se=se,
        df=df,
        lower_p=lower_p,
        upper_p=upper_p,
        p_val=p_val,
        equivalent=p_val < alpha,
        margin=float(margin),
        ci90_low=estimate - crit * se,
        ci90_high=estimate + crit * se,
    )

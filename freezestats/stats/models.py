"""Models of one task's results table: a linear mixed model, OLS with seed-clustered errors, a binomial GLMM.

All three model the same fixed effects, one mean per (frozen_layers, train_size) cell, in treatment coding::

    response ~ C(frozen_layers) * C(train_size)

The reference levels are ``frozen_layers = 0`` (nothing frozen, i.e. full fine-tuning; the smallest level when 0
is not in the data) and the smallest ``train_size``. The intercept is that reference cell's mean, a
``frozen_layers[T.k]`` coefficient is "k frozen layers minus none" at the smallest size, and an interaction
coefficient ``frozen_layers[T.k]:train_size[T.n]`` is how much that difference changes at size ``n``. Treatment
coefficients are rarely the question; :mod:`freezestats.stats.emm` turns any fit into cell means and contrasts
with correct standard errors.

Only runs with ``role == 'grid'`` and ``state == 'complete'`` are analysed (when those columns exist): the
learning-rate search runs are not part of the design.

The models live in :mod:`.mixed`, :mod:`.ols` and :mod:`.glmm`, their shared input check and design in
:mod:`._design`; this module keeps the names importable from where they always were.
"""

from __future__ import annotations

from freezestats.stats._design import RESPONSES, FitDiagnostics, FixedEffectsFit
from freezestats.stats._mixed_fit import MixedFit
from freezestats.stats.glmm import GlmmFit, fit_glmm
from freezestats.stats.mixed import fit_mixed, interaction_test
from freezestats.stats.ols import OlsFit, fit_ols

__all__ = [
    "RESPONSES",
    "FitDiagnostics",
    "FixedEffectsFit",
    "GlmmFit",
    "MixedFit",
    "OlsFit",
    "fit_glmm",
    "fit_mixed",
    "fit_ols",
    "interaction_test",
]

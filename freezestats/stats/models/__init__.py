"""Models of one task's results table: a linear mixed model, OLS with seed-clustered errors, a binomial GLMM.

All three model the same fixed effects, one mean per (frozen_layers, train_size) cell, in treatment coding::

    response ~ C(frozen_layers) * C(train_size)

The reference levels are ``frozen_layers = 0`` (nothing frozen, i.e. full fine-tuning; the smallest level when 0
is not in the data) and the smallest ``train_size``. The intercept is that reference cell's mean, a
``frozen_layers[T.k]`` coefficient is "k frozen layers minus none" at the smallest size, and an interaction
coefficient ``frozen_layers[T.k]:train_size[T.n]`` is how much that difference changes at size ``n``. Treatment
coefficients are rarely the question; :mod:`freezestats.stats.inference.emm` turns any fit into cell means and contrasts
with correct standard errors.

Only runs with ``role == 'grid'`` and ``state == 'complete'`` are analysed (when those columns exist): the
learning-rate search runs are not part of the design.

The models live in ``mixed`` (with its two variance structures, ``mixed_grouped`` and ``mixed_pooled``, the REML
engine ``reml`` and the fit object ``mixed_fit``), ``ols`` and ``glmm`` (the Laplace core ``laplace``,
``laplace_layout``, ``laplace_problem``, and ``marginal``); their shared input check and design are in
:mod:`freezestats.stats.design.model_frame`. This package's names are the models' public surface.
"""

from __future__ import annotations

from freezestats.stats.design.model_frame import RESPONSES, FitDiagnostics, FixedEffectsFit
from freezestats.stats.models.glmm import GlmmFit, fit_glmm
from freezestats.stats.models.mixed import fit_mixed
from freezestats.stats.models.mixed_fit import MixedFit
from freezestats.stats.models.ols import OlsFit, fit_ols

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
]

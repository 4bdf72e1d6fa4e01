"""Statistics of a results table (the "models" stage): one function per analysis, tidy DataFrames out.

Each analysis takes the long results table (one row per run, as ``freezestats export`` writes it) or a
fit, and returns a tidy DataFrame or a frozen fit object; nothing here prints or rounds. Modules: ``models``
(mixed / OLS / GLMM fits, the interaction test), ``emm`` (marginal means, contrasts, equivalence),
``variance`` (cell summaries, seed spread, Brown–Forsythe), ``failures`` (failure rates and flags),
``failure_trend`` (the failure model), ``lee`` (relative quality, the 90% operating point), ``pooled`` (all tasks
in one model), ``paired`` (contrasts by seed), ``noninferiority`` (the answer as a fixed-sequence test),
``laplace`` (the binomial GLMM's maximum-likelihood core), ``power``, ``reference`` (the published figures) and
``simulate`` (blog-shaped tables with known effects).
"""

from __future__ import annotations

from freezestats.stats.emm import contrasts_vs_reference, equivalence_tests, estimated_marginal_means
from freezestats.stats.failure_trend import failure_model
from freezestats.stats.failures import failure_rates, failure_summary, flag_failures
from freezestats.stats.glmm import marginal_accuracy
from freezestats.stats.lee import lee_ratio_tests, operating_point, relative_scores
from freezestats.stats.models import (
    FitDiagnostics,
    FixedEffectsFit,
    GlmmFit,
    MixedFit,
    OlsFit,
    fit_glmm,
    fit_mixed,
    fit_ols,
    interaction_test,
)
from freezestats.stats.noninferiority import (
    default_margin,
    noninferiority_answer,
    noninferiority_sequence,
    reference_beats_baseline,
)
from freezestats.stats.paired import paired_contrasts
from freezestats.stats.pooled import PooledFit, fit_pooled, task_interaction_test
from freezestats.stats.power import power_by_simulation, seeds_for_power
from freezestats.stats.reference import compare_with_reference, load_reference
from freezestats.stats.simulate import simulate_results, true_cell_means
from freezestats.stats.variance import cell_summary, seed_spread, spread_test

__all__ = [
    "FitDiagnostics",
    "FixedEffectsFit",
    "GlmmFit",
    "MixedFit",
    "OlsFit",
    "PooledFit",
    "cell_summary",
    "compare_with_reference",
    "contrasts_vs_reference",
    "default_margin",
    "equivalence_tests",
    "estimated_marginal_means",
    "failure_model",
    "failure_rates",
    "failure_summary",
    "fit_glmm",
    "fit_mixed",
    "fit_ols",
    "fit_pooled",
    "flag_failures",
    "interaction_test",
    "lee_ratio_tests",
    "load_reference",
    "marginal_accuracy",
    "noninferiority_answer",
    "noninferiority_sequence",
    "operating_point",
    "paired_contrasts",
    "power_by_simulation",
    "reference_beats_baseline",
    "relative_scores",
    "seed_spread",
    "seeds_for_power",
    "simulate_results",
    "spread_test",
    "task_interaction_test",
    "true_cell_means",
]

"""Statistics of a results table (the "models" stage): one function per analysis, tidy DataFrames out.

Each analysis takes the long results table (one row per run, as ``freezestats export`` writes it) or a
fit, and returns a tidy DataFrame or a frozen fit object; nothing here prints or rounds. The public functions
are importable from here; the code sits in one folder per job: ``design`` (the input checks and the fixed-effects
design), ``models`` (mixed / OLS / GLMM fits), ``inference`` (marginal means, contrasts, tests, multiplicity, the
non-inferiority answer, power), ``failures`` (collapsed runs), ``items`` (the evaluation items' uncertainty),
``lee`` (Lee et al.'s operating point), ``descriptive`` (cell summaries, the published figures), ``comparisons``
(arms, shared encoder, pair encoding, all tasks in one model), ``sequential`` (an adaptive study's decisions under
optional stopping) and ``simulation`` (tables with known effects).

The arm comparison's functions were called ``strategy_*`` before (``strategy_contrasts``, ...): those names
still work here, with a ``DeprecationWarning`` naming the ``arm_*`` one.
"""

from __future__ import annotations

from typing import Any

from freezestats.stats.comparisons.arm_levels import arm_answer, arm_contrasts, arm_noninferiority
from freezestats.stats.comparisons.pooled_tasks import PooledFit, fit_pooled
from freezestats.stats.comparisons.task_interaction import task_interaction_test
from freezestats.stats.descriptive.reference import compare_with_reference, load_reference
from freezestats.stats.descriptive.variance import cell_summary, seed_spread, spread_test
from freezestats.stats.design.model_frame import FitDiagnostics, FixedEffectsFit
from freezestats.stats.failures.rates import failure_rates, flag_failures
from freezestats.stats.failures.summary import failure_summary
from freezestats.stats.failures.trend import failure_model
from freezestats.stats.inference.answer import noninferiority_answer
from freezestats.stats.inference.emm import contrasts_vs_reference, estimated_marginal_means
from freezestats.stats.inference.equivalence import equivalence_tests
from freezestats.stats.inference.interaction import interaction_test
from freezestats.stats.inference.noninferiority import default_margin, noninferiority_sequence, reference_beats_baseline
from freezestats.stats.inference.paired import paired_contrasts
from freezestats.stats.inference.power import power_by_simulation, seeds_for_power
from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.inference.task_power import seeds_needed, task_power
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.models.glmm import GlmmFit, fit_glmm
from freezestats.stats.models.glmm_accuracy import marginal_accuracy
from freezestats.stats.models.mixed import fit_mixed
from freezestats.stats.models.mixed_fit import MixedFit
from freezestats.stats.models.ols import OlsFit, fit_ols
from freezestats.stats.relative_quality.operating_point import operating_point, relative_scores
from freezestats.stats.relative_quality.ratio_tests import lee_ratio_tests
from freezestats.stats.sequential import SequentialPlan, next_seeds, replay, replay_summary, sequential_decisions
from freezestats.stats.simulation.results import simulate_results, true_cell_means

__all__ = [
    "FitDiagnostics",
    "FixedEffectsFit",
    "GlmmFit",
    "MixedFit",
    "OlsFit",
    "PooledFit",
    "SequentialPlan",
    "arm_answer",
    "arm_contrasts",
    "arm_noninferiority",
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
    "next_seeds",
    "noninferiority_answer",
    "noninferiority_sequence",
    "operating_point",
    "paired_contrasts",
    "power_by_simulation",
    "reference_beats_baseline",
    "relative_scores",
    "replay",
    "replay_summary",
    "seed_spread",
    "seeds_for_power",
    "seeds_needed",
    "sequential_decisions",
    "simulate_results",
    "spread_test",
    "task_interaction_test",
    "task_level_contrasts",
    "task_noninferiority",
    "task_power",
    "true_cell_means",
]


def __getattr__(name: str) -> Any:
    """The arm comparison's old names (``strategy_contrasts``, ...): a ``DeprecationWarning``, then the new one."""
    from freezestats.stats.comparisons import strategies

    if name in strategies.RENAMED:
        return strategies.renamed(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

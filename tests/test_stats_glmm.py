"""freezestats.stats.models.glmm: the binomial GLMM of the correct counts (glmer's Laplace) and its accuracies.

Reference values come from lme4::glmer (tests/data/glmer_reference.R on tests/data/glmer_fixture.csv, stored in
tests/data/glmer_reference.json); the other checks use a binomial simulator written out below (seeds with a logit
seed effect, runs with a per-size logit run effect, binomial evaluation counts).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit, logit

from freezestats.exceptions import ModelFitError
from freezestats.stats import (
    FixedEffectsFit,
    GlmmFit,
    contrasts_vs_reference,
    equivalence_tests,
    estimated_marginal_means,
    fit_glmm,
)
from freezestats.stats.models.glmm import LAPLACE_METHOD
from freezestats.stats.models.glmm_accuracy import marginal_accuracy

DATA = Path(__file__).resolve().parent / "data"

# Against glmer (see tests/test_stats_laplace.py for why): absolute on the logit scale, SEs relative.
BETA_TOL = 1e-4
SD_TOL = 1e-4
SE_RTOL = 1e-3
GLMER_MODELS = {"per_size": "size_run", "pooled": "common_run"}


# ---------------------------------------------------------------------------------------------------------------
# A binomial simulator of results tables


def simulate_counts(
    accuracy: dict[tuple[int, int], float],
    *,
    seed_sd: float,
    run_sd: dict[int, float],
    seeds: int = 5,
    n_eval: int = 872,
    rng: int = 0,
) -> pd.DataFrame:
    """One run per (cell, seed): ``k ~ Binomial(n_eval, expit(logit(accuracy) + seed effect + run effect))``.

    ``accuracy`` maps (frozen_layers, train_size) to the accuracy at zero random effects (the conditional one);
    seed effects are ``N(0, seed_sd^2)``, shared by all cells, run effects ``N(0, run_sd[train_size]^2)``. The
    table has the results-table columns the GLMM reads, for every checkpoint: ``best_dev`` / ``n_correct_best``
    and ``final_dev`` / ``n_correct`` share the run's probability with independent binomial draws, ``heldout``
    scores half the items.
    """
    gen = np.random.default_rng(rng)
    seed_effect = gen.normal(0.0, seed_sd, size=seeds)
    rows = []
    for (frozen, size), acc in accuracy.items():
        for s in range(seeds):
            p = expit(logit(acc) + seed_effect[s] + gen.normal(0.0, run_sd[size]))
            best, final, held = gen.binomial(n_eval, p), gen.binomial(n_eval, p), gen.binomial(n_eval // 2, p)
            rows.append(
                {
                    "task": "sst2",
                    "role": "grid",
                    "state": "complete",
                    "frozen_layers": frozen,
                    "train_size": size,
                    "seed": s + 1,
                    "failed": False,
                    "n_eval": n_eval,
                    "n_correct_best": best,
                    "n_correct": final,
                    "n_eval_heldout": n_eval // 2,
                    "n_correct_heldout": held,
                    "best_dev": best / n_eval,
                    "final_dev": final / n_eval,
                    "heldout": held / (n_eval // 2),
                }
            )
    return pd.DataFrame(rows)


def grid(rows: dict[int, tuple[float, ...]], sizes: tuple[int, ...]) -> dict[tuple[int, int], float]:
    return {(k, n): acc for k, row in rows.items() for n, acc in zip(sizes, row, strict=True)}


SMALL = grid({0: (0.70, 0.90), 4: (0.72, 0.89), 8: (0.66, 0.86)}, (50, 1000))


def small_table(rng: int = 0, **kwargs: object) -> pd.DataFrame:
    return simulate_counts(SMALL, seed_sd=0.2, run_sd={50: 0.5, 1000: 0.12}, rng=rng, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# (1) glmer


@pytest.fixture(scope="module")
def fixture_table() -> pd.DataFrame:
    d = pd.read_csv(DATA / "glmer_fixture.csv")
    return d.assign(
        failed=False,
        role="grid",
        state="complete",
        best_dev=d["n_correct"] / d["n_eval"],
        n_correct_best=d["n_correct"],
    )


@pytest.fixture(scope="module")
def glmer() -> dict:
    return json.loads((DATA / "glmer_reference.json").read_text())["models"]


@pytest.mark.parametrize("run_variance", ["per_size", "pooled"])
def test_fit_glmm_reproduces_glmer(fixture_table: pd.DataFrame, glmer: dict, run_variance: str) -> None:
    fit = fit_glmm(fixture_table, run_variance=run_variance)
    reference = glmer[GLMER_MODELS[run_variance]]
    fixed = pd.DataFrame(reference["fixed_effects"]).set_index("term")
    assert sorted(fixed.index) == sorted(fit.fixed_effects["term"])
    fixed = fixed.loc[fit.fixed_effects["term"]]
    np.testing.assert_allclose(fit.fixed_effects["estimate"], fixed["estimate"], rtol=0, atol=BETA_TOL)
    np.testing.assert_allclose(fit.fixed_effects["se"], fixed["se"], rtol=SE_RTOL)
    sds = pd.DataFrame(reference["random_sd"]).set_index("name")
    components = fit.variance_components
    assert sorted(components["component"]) == sorted(sds.index)
    np.testing.assert_allclose(components["sd"], sds.loc[components["component"], "sd"], rtol=0, atol=SD_TOL)
    np.testing.assert_allclose(components["variance"], components["sd"] ** 2)
    assert fit.diagnostics.llf == pytest.approx(reference["loglik"], abs=1e-4)

    # the protocol the marginal-mean functions use
    assert isinstance(fit, GlmmFit) and isinstance(fit, FixedEffectsFit)
    np.testing.assert_allclose(fit.params, fit.fixed_effects["estimate"])
    np.testing.assert_allclose(np.sqrt(np.diag(fit.cov_params)), fit.fixed_effects["se"])
    assert fit.df_method == "wald-z" and np.all(np.isinf(fit.contrast_df(np.eye(len(fit.params)))))
    # the Wald table
    table = fit.fixed_effects
    assert list(table.columns) == ["term", "estimate", "se", "ci_low", "ci_high", "z", "p_val"]
    np.testing.assert_allclose(table["ci_high"] - table["estimate"], stats.norm.ppf(0.975) * table["se"])
    np.testing.assert_allclose(table["p_val"], 2 * stats.norm.sf(np.abs(table["estimate"] / table["se"])))


def test_glmm_reports_its_model_and_diagnostics(fixture_table: pd.DataFrame) -> None:
    fit = fit_glmm(fixture_table)
    assert fit.approximation == LAPLACE_METHOD == "Laplace (glmer nAGQ=1)"
    assert fit.response == "best_dev" and fit.counts == ("n_correct_best", "n_eval")
    assert fit.formula == (
        "cbind(n_correct_best, n_eval - n_correct_best) ~ C(frozen_layers) * C(train_size) + (1 | seed)"
        ' + (0 + dummy(train_size, "50") | run) + (0 + dummy(train_size, "200") | run)'
        ' + (0 + dummy(train_size, "1000") | run)'
    )
    d = fit.diagnostics
    assert d.method == LAPLACE_METHOD and d.converged and not d.boundary and not d.singular
    assert (d.n_obs, d.n_seeds, d.n_excluded) == (60, 5, 0)
    n_params = 12 + 4
    assert d.aic == pytest.approx(-2 * d.llf + 2 * n_params)
    assert d.bic == pytest.approx(-2 * d.llf + np.log(60) * n_params)
    vc = fit.variance_components
    assert list(vc.columns) == ["component", "variance", "sd", "train_size"]
    assert list(vc["component"]) == ["seed", "run:50", "run:200", "run:1000"]
    assert vc["train_size"].iloc[0] != vc["train_size"].iloc[0]  # NaN for the seed
    assert list(vc["train_size"].iloc[1:]) == [50, 200, 1000]
    pooled = fit_glmm(fixture_table, run_variance="pooled")
    assert pooled.formula.endswith("+ (1 | seed) + (1 | run)")
    assert list(pooled.variance_components["component"]) == ["seed", "run"]


def test_the_response_picks_its_checkpoints_counts() -> None:
    table = small_table(rng=3)
    fits = {response: fit_glmm(table, response) for response in ("best_dev", "final_dev", "heldout")}
    assert fits["final_dev"].counts == ("n_correct", "n_eval")
    assert fits["heldout"].counts == ("n_correct_heldout", "n_eval_heldout")
    assert "cbind(n_correct_heldout, n_eval_heldout - n_correct_heldout)" in fits["heldout"].formula
    assert not np.allclose(fits["best_dev"].params, fits["final_dev"].params)
    # the same counts under another name give the same fit
    swapped = table.assign(n_correct_best=table["n_correct"])
    np.testing.assert_allclose(fit_glmm(swapped, "best_dev").params, fits["final_dev"].params, atol=1e-8)


# ---------------------------------------------------------------------------------------------------------------
# (2) coverage


def test_wald_intervals_of_contrasts_cover_the_true_logit_difference() -> None:
    """40 blog-shaped studies (3 depths x 2 sizes x 5 seeds): 95% Wald z intervals of every frozen-vs-0 contrast.

    Expected a little below 95%: with 5 seeds a within-size contrast rests on the run variance of that size,
    estimated by ML from 15 runs around 3 cell means, and z ignores that uncertainty. Over 300 such studies the
    coverage was 90.7% (the four contrasts 88-93%); batches of 40 studies scatter by several points (85% to 97%
    seen), because the contrasts of a study share its variance estimates.
    """
    hits = []
    for study in range(40):
        contrasts = contrasts_vs_reference(fit_glmm(small_table(rng=1000 + study)), adjust="none")
        truth = [
            logit(SMALL[(k, n)]) - logit(SMALL[(0, n)])
            for k, n in zip(contrasts["frozen_layers"], contrasts["train_size"], strict=True)
        ]
        hits.append((contrasts["ci_low"] <= truth) & (truth <= contrasts["ci_high"]))
    coverage = float(np.mean(hits))
    assert 0.85 <= coverage <= 0.99, coverage


# ---------------------------------------------------------------------------------------------------------------
# (3) marginal vs conditional accuracy


def test_marginal_accuracy_is_pulled_towards_one_half_and_is_the_average_run() -> None:
    accuracy = grid({0: (0.80, 0.90), 6: (0.75, 0.88)}, (50, 1000))
    table = simulate_counts(accuracy, seed_sd=0.3, run_sd={50: 1.5, 1000: 0.2}, seeds=40, rng=1)
    fit = fit_glmm(table)
    result = marginal_accuracy(fit)
    assert list(result.columns) == ["frozen_layers", "train_size", "conditional", "marginal", "se", "ci_low", "ci_high"]
    assert list(zip(result["train_size"], result["frozen_layers"], strict=True)) == [
        (50, 0),
        (50, 6),
        (1000, 0),
        (1000, 6),
    ]
    emm = estimated_marginal_means(fit)
    np.testing.assert_allclose(result["conditional"], expit(emm["emmean"]))

    # a Monte Carlo average of expit(eta + u) at the estimates
    gen = np.random.default_rng(0)
    for row, eta in zip(result.itertuples(), emm["emmean"], strict=True):
        u = gen.normal(0.0, np.sqrt(fit.random_effect_variance(row.train_size)), size=400_000)
        assert row.marginal == pytest.approx(expit(eta + u).mean(), abs=2e-3)
        assert 0 < row.ci_low < row.marginal < row.ci_high < 1
        assert row.se > 0

    # large run SD (50 examples): pulled towards 0.5 by several points; the raw mean accuracy of the runs, which
    # estimates the population average, is close to the marginal accuracy and far from the conditional one
    raw = table.groupby(["train_size", "frozen_layers"])["best_dev"].mean().to_numpy()
    small = result["train_size"] == 50
    shift = (result["conditional"] - result["marginal"])[small]
    assert (shift > 0.04).all()
    np.testing.assert_allclose(result["marginal"][small], raw[small], atol=0.02)
    assert (np.abs(result["conditional"] - raw)[small] > 0.04).all()
    # small run SD (1000 examples): the two nearly agree
    assert (np.abs(result["conditional"] - result["marginal"])[~small] < 0.01).all()

    # the interval is the Wald interval of eta, transformed
    crit = stats.norm.ppf(0.975)
    from freezestats.stats.models.marginal import marginal_probability

    variance = [fit.random_effect_variance(n) for n in result["train_size"]]
    low = marginal_probability(emm["emmean"] - crit * emm["se"], variance, 200)
    np.testing.assert_allclose(result["ci_low"], low, rtol=1e-10)


# ---------------------------------------------------------------------------------------------------------------
# (4) marginal means and contrasts on the logit scale


def test_marginal_means_and_contrasts_run_on_the_logit_scale(fixture_table: pd.DataFrame) -> None:
    fit = fit_glmm(fixture_table)
    emm = estimated_marginal_means(fit)
    assert len(emm) == 12 and np.isinf(emm["df"]).all()
    reference_cell = emm[(emm["frozen_layers"] == 0) & (emm["train_size"] == 50)].iloc[0]
    intercept = fit.fixed_effects.set_index("term").loc["Intercept"]
    assert reference_cell["emmean"] == pytest.approx(intercept["estimate"])
    assert reference_cell["se"] == pytest.approx(intercept["se"])
    assert reference_cell["ci_low"] == pytest.approx(intercept["ci_low"])

    contrasts = contrasts_vs_reference(fit, adjust="none")
    at_50 = contrasts[contrasts["train_size"] == 50].set_index("frozen_layers")
    for k in (2, 4, 6):
        coefficient = fit.fixed_effects.set_index("term").loc[f"frozen_layers[T.{k}]"]
        assert at_50.loc[k, "estimate"] == pytest.approx(coefficient["estimate"])
        assert at_50.loc[k, "se"] == pytest.approx(coefficient["se"])
        assert at_50.loc[k, "p_val"] == pytest.approx(coefficient["p_val"])
    assert len(contrasts_vs_reference(fit, adjust="dunnett")) == 9
    tost = equivalence_tests(fit, margin=0.2)  # a log odds ratio
    assert len(tost) == 9 and np.isinf(tost["df"]).all()


# ---------------------------------------------------------------------------------------------------------------
# (5) input


OLD_TABLE_COLUMNS = ["n_correct_best", "n_correct_heldout", "n_eval_heldout"]


def test_a_table_without_per_checkpoint_counts_only_fits_final_dev() -> None:
    old = small_table().drop(columns=OLD_TABLE_COLUMNS)
    with pytest.raises(ModelFitError, match=r"no values in \['n_correct_best'\] .*response='final_dev'") as error:
        fit_glmm(old)
    message = str(error.value)
    assert message.endswith(".") and ". " not in message and "\n" not in message  # one sentence
    with pytest.raises(ModelFitError, match=r"no values in \['n_correct_heldout', 'n_eval_heldout'\] .*'final_dev'"):
        fit_glmm(old, "heldout")
    assert fit_glmm(old, "final_dev").counts == ("n_correct", "n_eval")
    # results_table writes every column, so an old study has the columns, but empty: the same message
    empty = small_table().assign(**dict.fromkeys(OLD_TABLE_COLUMNS, np.nan))
    with pytest.raises(ModelFitError, match=r"no values in \['n_correct_best'\] .*response='final_dev'"):
        fit_glmm(empty)
    np.testing.assert_allclose(fit_glmm(empty, "final_dev").params, fit_glmm(old, "final_dev").params)
    # without any counts (e.g. a regression task) the usual missing-column message, which does not offer final_dev
    with pytest.raises(ModelFitError, match=r"must have the columns .* \['n_correct'\] are missing"):
        fit_glmm(old.drop(columns=["n_correct"]), "final_dev")
    with pytest.raises(ModelFitError, match=r"must have the columns .* \['n_correct_best'\] are missing") as error:
        fit_glmm(old.drop(columns=["n_correct"]))
    assert "response='final_dev'" not in str(error.value)


def test_bad_counts_and_options_raise_a_model_fit_error() -> None:
    table = small_table()
    with pytest.raises(ModelFitError, match=r"every run of task 'sst2' has a missing final_dev or n_correct, n_eval"):
        fit_glmm(table.assign(n_correct=None), "final_dev")
    with pytest.raises(ModelFitError, match=r"`n_correct_best` must be an integer in 0\.\.n_eval"):
        fit_glmm(table.assign(n_correct_best=900))
    with pytest.raises(
        ModelFitError, match=r"`n_correct` must be an integer in 0\.\.n_eval .* n_correct=10\.5, n_eval=872\)"
    ):
        fit_glmm(table.assign(n_correct=10.5), "final_dev")
    with pytest.raises(ModelFitError, match=r"is correct in every run \(n_correct_best\)"):
        fit_glmm(table.assign(n_correct_best=table["n_eval"]))
    with pytest.raises(ModelFitError, match=r"`run_variance` must be one of \['per_size', 'pooled'\]"):
        fit_glmm(table, run_variance="per_cell")
    with pytest.raises(ModelFitError, match=r"`response` must be one of"):
        fit_glmm(table, "accuracy")
    with pytest.raises(ModelFitError, match=r"needs at least 2 seeds"):
        fit_glmm(table[table["seed"] == 1])
    with pytest.raises(ModelFitError, match=r"needs the results table as a pandas DataFrame"):
        fit_glmm([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(ModelFitError, match=r"marginal_accuracy needs a GlmmFit"):
        marginal_accuracy(table)  # type: ignore[arg-type]
    with pytest.raises(ModelFitError, match=r"`confidence` must be in \(0, 1\)"):
        marginal_accuracy(fit_glmm(table), confidence=95)


def test_dropped_runs_subset_draws_and_metric_are_reported() -> None:
    table = small_table(rng=4)
    table.loc[[0, 7], "n_correct_best"] = np.nan
    table["metric"] = "mcc"
    fit = fit_glmm(table)
    assert fit.diagnostics.n_obs == 28 and fit.diagnostics.n_excluded == 2
    assert "dropped 2 runs with a missing best_dev (listwise deletion)." in fit.diagnostics.warnings
    assert any("metric of task 'sst2' is 'mcc'" in w for w in fit.diagnostics.warnings)
    draws = pd.concat([small_table(rng=5).assign(subset_draw=d) for d in (0, 1)], ignore_index=True)
    crossed = fit_glmm(draws)
    assert "(1 | seed) + (1 | subset_draw) + " in crossed.formula
    assert "subset_draw" in list(crossed.variance_components["component"])


# ---------------------------------------------------------------------------------------------------------------
# (6) speed


def test_a_175_run_table_fits_in_under_5_seconds() -> None:
    accuracy = grid(
        {k: (0.70 - 0.01 * k, 0.78, 0.84, 0.88, 0.91) for k in (0, 2, 4, 6, 8, 10, 12)}, (50, 100, 200, 500, 1000)
    )
    run_sd = {50: 0.6, 100: 0.4, 200: 0.25, 500: 0.15, 1000: 0.08}
    table = simulate_counts(accuracy, seed_sd=0.1, run_sd=run_sd, rng=7)
    assert len(table) == 175
    start = time.perf_counter()
    fit = fit_glmm(table)
    elapsed = time.perf_counter() - start
    assert fit.diagnostics.converged
    assert elapsed < 5.0, elapsed

"""freezestats.stats.models.laplace: the binomial GLMM by glmer's Laplace approximation, and marginal probabilities.

Reference values come from lme4::glmer (tests/data/glmer_reference.R on tests/data/glmer_fixture.csv, stored in
tests/data/glmer_reference.json; the fixture is written by tests/data/make_glmer_fixture.py) and from independent
computations written out in the tests (numerical integration, finite differences).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import patsy
import pytest
from _scripts import load_script
from scipy import integrate
from scipy.special import expit

from freezestats.exceptions import ModelFitError
from freezestats.stats.models import laplace
from freezestats.stats.models.laplace import LaplaceFit, RandomTerm, fit_binomial_laplace
from freezestats.stats.models.marginal import marginal_probability, marginal_probability_derivative

DATA = Path(__file__).resolve().parent / "data"
R_PACKAGES = ("lme4", "jsonlite")

# Tolerances against glmer (absolute on the logit scale unless said otherwise). Both fits are driven to ~1e-6 of
# the optimum (glmer with rhoend = 1e-10, tolPwrss = 1e-12), so these measure the implementations. SEs are looser
# (relative 1e-3): glmer's Hessian is a second difference of the deviance with step 1e-4, ours a first difference
# of the analytic gradient, and the two differ by ~1e-4 relative.
BETA_TOL = 1e-4
SD_TOL = 1e-4
SE_RTOL = 1e-3
DEVIANCE_TOL = 1e-4


# ---------------------------------------------------------------------------------------------------------------
# Building the model the way the package does


def design(table: pd.DataFrame) -> pd.DataFrame:
    """patsy treatment coding with frozen_layers = 0 and the smallest train_size as references, as models.py."""
    frame = table.copy()
    frozen = sorted(frame["frozen_layers"].unique(), key=lambda level: (level != 0, level))
    frame["frozen_layers"] = pd.Categorical(frame["frozen_layers"], categories=frozen)
    frame["train_size"] = pd.Categorical(frame["train_size"], categories=sorted(frame["train_size"].unique()))
    return patsy.dmatrix("frozen_layers * train_size", frame, return_type="dataframe")


def seed_term(table: pd.DataFrame) -> RandomTerm:
    codes = pd.Categorical(table["seed"], categories=sorted(table["seed"].unique())).codes
    return RandomTerm("seed", codes, np.zeros(codes.max() + 1, dtype=int), ("seed",))


def run_term(table: pd.DataFrame, *, by_size: bool) -> RandomTerm:
    codes = np.arange(len(table))
    if not by_size:
        return RandomTerm("run", codes, np.zeros(len(table), dtype=int), ("run",))
    sizes = sorted(table["train_size"].unique())
    index = pd.Categorical(table["train_size"], categories=sizes).codes
    return RandomTerm("run", codes, index, tuple(f"run:{size}" for size in sizes))


def model_terms(table: pd.DataFrame, model: str) -> list[RandomTerm]:
    if model == "common_run":
        return [seed_term(table), run_term(table, by_size=False)]
    if model == "size_run":
        return [seed_term(table), run_term(table, by_size=True)]
    if model == "run_only":
        return [run_term(table, by_size=False)]
    raise AssertionError(model)


def fit_model(table: pd.DataFrame, model: str) -> tuple[LaplaceFit, list[str]]:
    x = design(table)
    fit = fit_binomial_laplace(table["n_correct"], table["n_eval"], x, model_terms(table, model))
    return fit, list(x.columns)


MODELS = ("common_run", "run_only", "size_run")


@pytest.fixture(scope="module")
def fixture_table() -> pd.DataFrame:
    return pd.read_csv(DATA / "glmer_fixture.csv")


@pytest.fixture(scope="module")
def glmer() -> dict:
    return json.loads((DATA / "glmer_reference.json").read_text())


@pytest.fixture(scope="module")
def fits(fixture_table: pd.DataFrame) -> dict[str, tuple[LaplaceFit, list[str]]]:
    return {model: fit_model(fixture_table, model) for model in MODELS}


def assert_matches_glmer(fit: LaplaceFit, columns: list[str], reference: dict) -> None:
    fixed = pd.DataFrame(reference["fixed_effects"]).set_index("term")
    assert sorted(fixed.index) == sorted(columns)
    fixed = fixed.loc[columns]
    np.testing.assert_allclose(fit.beta, fixed["estimate"], rtol=0, atol=BETA_TOL)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.cov_beta)), fixed["se"], rtol=SE_RTOL)
    assert fit.cov_beta_conditional is not None
    np.testing.assert_allclose(np.sqrt(np.diag(fit.cov_beta_conditional)), fixed["se_conditional"], rtol=SE_RTOL)
    sds = pd.DataFrame(reference["random_sd"]).set_index("name")
    assert sorted(sds.index) == sorted(fit.sd_names)
    np.testing.assert_allclose(fit.sd, sds.loc[list(fit.sd_names), "sd"], rtol=0, atol=SD_TOL)
    assert fit.deviance == pytest.approx(reference["deviance"], abs=DEVIANCE_TOL)
    assert fit.loglik == pytest.approx(reference["loglik"], abs=DEVIANCE_TOL / 2)
    if reference.get("seed_modes"):
        # seed is the first term in model_terms, so its modes come first; levels in sorted seed order, as in R
        seeds = len(reference["seed_modes"])
        np.testing.assert_allclose(fit.modes[:seeds], reference["seed_modes"], rtol=0, atol=BETA_TOL)


# ---------------------------------------------------------------------------------------------------------------
# Against glmer


@pytest.mark.parametrize("model", MODELS)
def test_fit_matches_glmer_reference(fits: dict, glmer: dict, model: str) -> None:
    fit, columns = fits[model]
    assert fit.converged, fit.warnings
    assert fit.warnings == ()
    assert fit.boundary == ()
    assert_matches_glmer(fit, columns, glmer["models"][model])


def test_fixture_is_what_the_generator_writes(fixture_table: pd.DataFrame) -> None:
    module = load_script(DATA / "make_glmer_fixture.py")
    pd.testing.assert_frame_equal(module.make_fixture(), fixture_table, check_dtype=False)


def test_run_sd_by_size_is_recovered_and_improves_the_fit(fits: dict) -> None:
    common, _ = fits["common_run"]
    by_size, _ = fits["size_run"]
    sd = dict(zip(by_size.sd_names, by_size.sd, strict=True))
    # simulated with run SDs 0.6 / 0.25 / 0.08 by size: the estimates must keep that order
    assert sd["run:50"] > sd["run:200"] > sd["run:1000"] > 0
    assert by_size.deviance < common.deviance - 10  # two extra parameters, a much better fit


def r_with_packages() -> str | None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        return None
    check = "quit(status = !all(sapply(c({}), requireNamespace, quietly = TRUE)))".format(
        ", ".join(f'"{name}"' for name in R_PACKAGES)
    )
    done = subprocess.run([rscript, "-e", check], capture_output=True, timeout=120)
    return rscript if done.returncode == 0 else None


def test_fit_matches_glmer_run_now(fits: dict, tmp_path: Path) -> None:
    rscript = r_with_packages()
    if rscript is None:
        pytest.skip(f"needs Rscript on PATH with the R packages {', '.join(R_PACKAGES)} (apt: r-cran-lme4)")
    output = tmp_path / "glmer_reference.json"
    subprocess.run(
        [rscript, str(DATA / "glmer_reference.R"), str(DATA / "glmer_fixture.csv"), str(output)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    live = json.loads(output.read_text())
    for model in MODELS:
        fit, columns = fits[model]
        assert_matches_glmer(fit, columns, live["models"][model])


# ---------------------------------------------------------------------------------------------------------------
# Boundary, gradient, other structure


def balanced_seed_table() -> pd.DataFrame:
    """A table whose seeds have no effect at all: within each cell the five seeds' counts are the same five offsets
    from the cell's count, rotated cell by cell (a Latin square), so every seed's offsets sum to zero."""
    offsets = np.array([-24, -12, 0, 12, 24])
    rows = []
    cells = [(frozen, size) for frozen in (0, 2, 4, 6, 8) for size in (50, 200)]
    for cell, (frozen, size) in enumerate(cells):
        base = int(872 * expit(0.5 + 0.4 * (size == 200) - 0.05 * frozen))
        for seed in range(5):
            rows.append(
                {
                    "frozen_layers": frozen,
                    "train_size": size,
                    "seed": seed,
                    "run": len(rows),
                    "n_correct": base + int(offsets[(seed + cell) % 5]),
                    "n_eval": 872,
                }
            )
    return pd.DataFrame(rows)


def test_zero_seed_variance_is_estimated_on_the_boundary() -> None:
    table = balanced_seed_table()
    fit, _ = fit_model(table, "common_run")
    sd = dict(zip(fit.sd_names, fit.sd, strict=True))
    assert sd["seed"] == 0.0
    assert fit.boundary == ("seed",)
    assert fit.converged, fit.warnings
    assert np.all(np.isfinite(fit.cov_beta)) and np.all(np.linalg.eigvalsh(fit.cov_beta) > 0)
    assert np.all(fit.modes[:5] == 0.0)  # a zero SD shrinks the seed modes to exactly zero
    # glmer on the same table (R 4.2.2, lme4 1.1-31, tests/data/glmer_reference.R on this table written to CSV):
    # singular fit, seed SD 0, run SD 0.0457812311184441, -2 logLik 425.175788902574, SE(Intercept) 0.0373465.
    assert sd["run"] == pytest.approx(0.0457812311184441, abs=SD_TOL)
    assert fit.deviance == pytest.approx(425.175788902574, abs=DEVIANCE_TOL)
    assert np.sqrt(fit.cov_beta[0, 0]) == pytest.approx(0.0373465, rel=SE_RTOL)


def test_sd_stuck_at_zero_on_a_saddle_is_freed() -> None:
    """The deviance is even in every SD, so its gradient vanishes at zero; a start there must not stay there."""
    table = pd.read_csv(DATA / "glmer_fixture.csv")
    x = design(table)
    terms = model_terms(table, "common_run")
    k, n, matrix = laplace._validate(table["n_correct"], table["n_eval"], x)
    layout, _ = laplace._layout(terms, len(table))
    problem = laplace._LaplaceProblem(k, n, matrix, layout)
    stuck = np.concatenate([[0.0, 0.39], laplace._glm_start(k, n, matrix)])  # seed SD 0; glmer has 0.197
    result = laplace._minimise(problem, stuck, 1e-6, np.full(2, np.nan))  # no SD given
    assert result.x[0] == 0.0  # L-BFGS-B alone does not move
    params, *_, hessian, _ = laplace._newton_polish(problem, result.x, 1e-6, np.zeros(2, dtype=bool))
    start = laplace._escape_from_zero(problem, params, hessian)
    assert start is not None and start[0] > 0


def test_analytic_gradient_matches_finite_differences(fixture_table: pd.DataFrame) -> None:
    x = design(fixture_table)
    terms = model_terms(fixture_table, "size_run")
    k, n, matrix = laplace._validate(fixture_table["n_correct"], fixture_table["n_eval"], x)
    layout, _ = laplace._layout(terms, len(fixture_table))
    problem = laplace._LaplaceProblem(k, n, matrix, layout)
    rng = np.random.default_rng(3)
    params = np.concatenate([rng.uniform(0.05, 0.8, layout.n_theta), laplace._glm_start(k, n, matrix)])
    params[layout.n_theta :] += rng.normal(0.0, 0.1, matrix.shape[1])
    _, gradient = problem.value_and_gradient(params)
    step = 1e-5
    numeric = [
        (problem.state(params + step * e).deviance - problem.state(params - step * e).deviance) / (2 * step)
        for e in np.eye(params.shape[0])
    ]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-4)


def test_observation_level_deviance_is_a_product_of_one_dimensional_laplace_approximations() -> None:
    """With only a run-level term the joint Laplace approximation factorises over runs; check it by hand."""
    k = np.array([3.0, 10.0, 0.0, 7.0])
    n = np.array([10.0, 12.0, 5.0, 9.0])
    x = np.column_stack([np.ones(4), [0.0, 1.0, 0.0, 1.0]])
    term = RandomTerm("run", np.arange(4), np.zeros(4, dtype=int), ("run",))
    layout, _ = laplace._layout([term], 4)
    problem = laplace._LaplaceProblem(k, n, x, layout)
    theta, beta = 0.7, np.array([-0.2, 0.9])
    expected = 0.0
    for i in range(4):
        eta0 = x[i] @ beta

        def penalised(u: float, i: int = i, eta0: float = eta0) -> float:
            p = expit(eta0 + theta * u)
            return -2 * (k[i] * np.log(p) + (n[i] - k[i]) * np.log1p(-p)) + u * u

        from scipy.optimize import minimize_scalar
        from scipy.special import gammaln

        u_hat = minimize_scalar(penalised, bounds=(-20, 20), method="bounded", options={"xatol": 1e-12}).x
        p = expit(eta0 + theta * u_hat)
        log_choose = gammaln(n[i] + 1) - gammaln(k[i] + 1) - gammaln(n[i] - k[i] + 1)
        expected += penalised(u_hat) - 2 * log_choose + np.log1p(theta**2 * n[i] * p * (1 - p))
    assert problem.state(np.concatenate([[theta], beta])).deviance == pytest.approx(expected, abs=1e-8)


def test_modes_come_back_in_term_order(fits: dict, fixture_table: pd.DataFrame) -> None:
    fit, _ = fits["common_run"]
    seeds = fixture_table["seed"].nunique()
    assert fit.modes.shape == (seeds + len(fixture_table),)
    # the run term is eliminated first internally; publicly it comes after the seeds, one mode per run
    run_modes = fit.modes[seeds:]
    residual = np.log(fixture_table["n_correct"] / (fixture_table["n_eval"] - fixture_table["n_correct"]))
    assert np.corrcoef(run_modes, residual - design(fixture_table).to_numpy() @ fit.beta)[0, 1] > 0.9


def test_cov_beta_is_twice_the_inverse_hessian_of_the_deviance(fits: dict, fixture_table: pd.DataFrame) -> None:
    """cov_beta against a Hessian by second differences of the deviance itself (not of the analytic gradient).

    On the fixture glmer's two covariances differ by only 1e-4..2e-4 (relative, in SE), below the 1e-3 tolerance of
    the comparison with glmer; this check is 10x tighter than that difference, so it tells them apart.
    """
    fit, _ = fits["size_run"]
    terms = model_terms(fixture_table, "size_run")
    k, n, matrix = laplace._validate(fixture_table["n_correct"], fixture_table["n_eval"], design(fixture_table))
    layout, _ = laplace._layout(terms, len(fixture_table))
    problem = laplace._LaplaceProblem(k, n, matrix, layout)
    params = np.concatenate([fit.sd, fit.beta])
    steps = np.eye(params.shape[0]) * 1e-3

    def deviance(point: np.ndarray) -> float:
        return problem.state(point).deviance

    hessian = np.empty((params.shape[0], params.shape[0]))
    for i in range(params.shape[0]):
        for j in range(i, params.shape[0]):
            hessian[i, j] = hessian[j, i] = (
                deviance(params + steps[i] + steps[j])
                - deviance(params + steps[i] - steps[j])
                - deviance(params - steps[i] + steps[j])
                + deviance(params - steps[i] - steps[j])
            ) / (4 * 1e-3**2)
    se = np.sqrt(np.diag(2 * np.linalg.inv(hessian)))[layout.n_theta :]
    np.testing.assert_allclose(np.sqrt(np.diag(fit.cov_beta)), se, rtol=2e-5)
    assert np.max(np.abs(np.sqrt(np.diag(fit.cov_beta_conditional)) / se - 1)) > 1e-4


def test_conditional_covariance_is_smaller_than_the_hessian_one(fits: dict) -> None:
    # inverting the joint Hessian accounts for the estimated SDs, so its beta block dominates the conditional one
    for fit, _ in fits.values():
        assert np.all(np.linalg.eigvalsh(fit.cov_beta - fit.cov_beta_conditional) > -1e-10)


# ---------------------------------------------------------------------------------------------------------------
# Bad input


@pytest.fixture()
def small() -> dict:
    table = pd.read_csv(DATA / "glmer_fixture.csv")
    return {
        "successes": table["n_correct"].to_numpy(),
        "trials": table["n_eval"].to_numpy(),
        "x": design(table).to_numpy(),
        "terms": model_terms(table, "common_run"),
    }


def call(arguments: dict, **changes: object) -> LaplaceFit:
    merged = {**arguments, **changes}
    return fit_binomial_laplace(merged["successes"], merged["trials"], merged["x"], merged["terms"])


def test_successes_above_trials_is_rejected(small: dict) -> None:
    successes = small["successes"].copy()
    successes[3] = 900
    with pytest.raises(ModelFitError, match=r"0\.\.trials.*successes=900"):
        call(small, successes=successes)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"trials": np.full(59, 872)}, "same length"),
        ({"successes": np.zeros(60)}, "must vary"),
        ({"successes": np.full(60, 872)}, "must vary"),
        ({"successes": np.full(60, 500.5)}, "whole numbers"),
        ({"trials": np.zeros(60)}, ">= 1"),
        ({"successes": np.full(60, np.nan)}, "finite"),
        ({"x": np.ones((60, 2))}, "full column rank"),
        ({"x": np.ones(60)}, "2-D"),
        ({"terms": []}, "at least one random term"),
    ],
)
def test_bad_input_is_rejected(small: dict, change: dict, pattern: str) -> None:
    with pytest.raises(ModelFitError, match=pattern):
        call(small, **change)


def test_bad_random_terms_are_rejected(small: dict) -> None:
    seed, run = small["terms"]
    with pytest.raises(ModelFitError, match="one code per observation"):
        call(small, terms=[RandomTerm("seed", seed.codes[:10], seed.variance_index, ("seed",)), run])
    with pytest.raises(ModelFitError, match=r"must lie in 0\.\.4"):
        call(small, terms=[RandomTerm("seed", seed.codes + 1, seed.variance_index, ("seed",)), run])
    with pytest.raises(ModelFitError, match="unique"):
        call(small, terms=[seed, RandomTerm("run", run.codes, run.variance_index, ("seed",))])
    with pytest.raises(ModelFitError, match="needs observations"):
        call(small, terms=[RandomTerm("seed", seed.codes, seed.variance_index, ("seed", "unused")), run])
    with pytest.raises(ModelFitError, match=r"variance_index .* must lie in 0\.\.0"):
        call(small, terms=[RandomTerm("seed", seed.codes, seed.variance_index + 1, ("seed",)), run])


# ---------------------------------------------------------------------------------------------------------------
# Marginal probabilities


@pytest.mark.parametrize(("eta", "variance"), [(0.0, 0.25), (1.5, 0.04), (-2.0, 1.0), (2.2, 4.0), (0.7, 0.0)])
def test_marginal_probability_matches_numerical_integration(eta: float, variance: float) -> None:
    if variance == 0:
        expected = expit(eta)
        derivative = expit(eta) * (1 - expit(eta))
    else:
        sd = np.sqrt(variance)

        def density(u: float) -> float:
            return np.exp(-0.5 * (u / sd) ** 2) / (sd * np.sqrt(2 * np.pi))

        expected = integrate.quad(lambda u: expit(eta + u) * density(u), -np.inf, np.inf, epsabs=1e-13)[0]
        derivative = integrate.quad(
            lambda u: expit(eta + u) * (1 - expit(eta + u)) * density(u), -np.inf, np.inf, epsabs=1e-13
        )[0]
    # 40 nodes: ~1e-12 for SD <= 1; at SD 2 ~2e-9 for the value, ~6e-8 for the derivative (as documented)
    accuracy = 1e-11 if variance <= 1 else 1e-7
    assert float(marginal_probability(eta, variance)) == pytest.approx(expected, abs=accuracy)
    assert float(marginal_probability_derivative(eta, variance)) == pytest.approx(derivative, abs=accuracy)


def test_marginal_probability_is_pulled_towards_one_half() -> None:
    eta = np.array([-2.0, -0.5, 0.5, 2.0])
    marginal = marginal_probability(eta, 1.0)
    assert np.all(np.abs(marginal - 0.5) < np.abs(expit(eta) - 0.5))
    assert marginal_probability(0.0, 3.0) == pytest.approx(0.5, abs=1e-14)


def test_marginal_probability_derivative_matches_finite_differences() -> None:
    eta = np.linspace(-3, 3, 13)
    variance = np.linspace(0.0, 2.0, 13)
    step = 1e-5
    numeric = (marginal_probability(eta + step, variance) - marginal_probability(eta - step, variance)) / (2 * step)
    np.testing.assert_allclose(marginal_probability_derivative(eta, variance), numeric, rtol=1e-7, atol=1e-10)


def test_marginal_probability_broadcasts() -> None:
    eta = np.array([[0.0], [1.0]])
    variance = np.array([0.1, 0.2, 0.3])
    assert marginal_probability(eta, variance).shape == (2, 3)
    assert marginal_probability_derivative(eta, variance).shape == (2, 3)
    assert marginal_probability(eta, variance)[1, 2] == pytest.approx(float(marginal_probability(1.0, 0.3)))


def test_more_nodes_do_not_change_the_marginal_probability() -> None:
    eta, variance = np.array([-1.0, 0.4, 2.5]), np.array([0.5, 1.5, 2.0])
    np.testing.assert_allclose(
        marginal_probability(eta, variance, n_nodes=40), marginal_probability(eta, variance, n_nodes=120), atol=1e-10
    )


@pytest.mark.parametrize(
    ("eta", "variance", "n_nodes", "pattern"),
    [
        (0.0, -0.1, 40, ">= 0"),
        (np.nan, 0.1, 40, "finite"),
        (0.0, np.inf, 40, ">= 0"),
        (0.0, 0.1, 0, "positive integer"),
        (0.0, 0.1, 400, "positive integer <= 300"),
        (np.zeros(3), np.zeros(2), 40, "broadcast"),
    ],
)
def test_marginal_probability_rejects_bad_input(eta: object, variance: object, n_nodes: int, pattern: str) -> None:
    with pytest.raises(ModelFitError, match=pattern):
        marginal_probability(eta, variance, n_nodes=n_nodes)
    with pytest.raises(ModelFitError, match=pattern):
        marginal_probability_derivative(eta, variance, n_nodes=n_nodes)

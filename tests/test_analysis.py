"""`freezestats analyze` end to end: a blog-shaped simulated study and a real exported one, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from freezestats.analysis.pipeline import analyze
from freezestats.cli.main import main
from freezestats.exceptions import ModelFitError
from freezestats.stats.simulation.results import simulate_results


@pytest.fixture(scope="module")
def blog_shaped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = simulate_results(tasks=("sst2", "cola"), fail_rate=0.05, rng=3)
    path = tmp_path_factory.mktemp("sim") / "results.parquet"
    table.to_parquet(path)
    return path


def test_analyze_writes_every_table_and_the_json(
    blog_shaped: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "analysis"
    code = main(
        [
            "analyze",
            "--results",
            str(blog_shaped),
            "--model",
            "mixed",
            "--margin",
            "0.01",
            "--n-boot",
            "200",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "[sst2]" in text and "[cola]" in text and "frozen × size interaction" in text
    for name in (
        "cell_summary",
        "seed_spread",
        "spread_test",
        "failure_rates",
        "fixed_effects",
        "variance_components",
        "emmeans",
        "contrasts",
        "equivalence",
        "interaction_test",
        "variance_homogeneity",
        "paired_contrasts",
        "relative_scores",
        "operating_point",
        "power",
        "reference_comparison",
        "diagnostics",
    ):
        assert (out / f"{name}.parquet").is_file() and (out / f"{name}.csv").is_file(), name
    document = json.loads((out / "analysis.json").read_text())
    assert document["settings"]["model"] == "mixed" and document["settings"]["response"] == "heldout"
    assert document["settings"]["failure_rates"] == "pooled_joint"  # the CLI's default is the library's
    diagnostics = pd.read_parquet(out / "diagnostics.parquet")
    assert diagnostics["icc_seed"].between(0, 1).all() and diagnostics["converged"].all()
    emm = pd.read_parquet(out / "emmeans.parquet")
    assert set(emm["fit"]) == {"all_runs", "without_failed"} and set(emm["task"]) == {"sst2", "cola"}
    assert (emm["fit"] == "all_runs").sum() == 2 * 7 * 5  # tasks x frozen x sizes
    # Failure is judged on heldout's checkpoint (binomial test against the majority rate). Every simulated
    # SST-2 frozen-12 run at n=200 and CoLA frozen -1, 8, 10 run at n=50 is below it, so those levels leave the fit
    # without failed runs, with a note; the other levels stay.
    healthy = emm[emm["fit"] == "without_failed"]
    kept = healthy.groupby("task")["frozen_layers"].unique().map(set)
    assert kept["sst2"] == {-1, 0, 2, 4, 8, 10} and kept["cola"] == {0, 2, 4, 12}
    assert any("sst2" in w and "left out frozen level(s) [12]" in w for w in document["warnings"])
    contrasts = pd.read_parquet(out / "contrasts.parquet")
    assert (contrasts["p_adj"] >= contrasts["p_val"] - 1e-12).all()
    comparison = pd.read_parquet(out / "reference_comparison.parquet")
    assert comparison["in_reference"].all() and len(comparison) == 2 * 7 * 5


def test_bootstrap_interaction_test_on_request(blog_shaped: Path, tmp_path: Path) -> None:
    args = ["analyze", "--results", str(blog_shaped), "--task", "sst2", "--n-boot", "50", "-o", str(tmp_path)]
    assert main([*args, "--bootstrap-tests", "3"]) == 0
    boot = pd.read_parquet(tmp_path / "interaction_test_bootstrap.parquet")
    assert len(boot) == 1 and boot.loc[0, "p_val"] in {k / 4 for k in range(1, 5)}  # (1 + #{LR* >= LR}) / (3 + 1)
    default = pd.read_parquet(tmp_path / "interaction_test.parquet")
    assert default.loc[0, "method"].startswith("F") and default.loc[0, "den_df"] > 0


def test_pooled_model_on_request(blog_shaped: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--results", str(blog_shaped), "--pooled", "--n-boot", "50", "-o", str(tmp_path)]) == 0
    assert "[all tasks] does freezing act differently per task?" in capsys.readouterr().out
    test = pd.read_parquet(tmp_path / "task_interaction_test.parquet")
    assert test.loc[0, "df"] == 30 and test.loc[0, "p_val"] < 1e-6  # the simulated tasks have different effects
    assert (tmp_path / "pooled_fixed_effects.parquet").is_file()


def test_json_flag_prints_the_document(blog_shaped: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "analyze",
            "--results",
            str(blog_shaped),
            "--model",
            "ols",
            "--metric",
            "heldout",
            "--task",
            "sst2",
            "--n-boot",
            "100",
            "--json",
            "-o",
            str(tmp_path / "a"),
        ]
    )
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["settings"]["tasks"] == ["sst2"] and document["settings"]["model"] == "ols"
    assert {r["task"] for r in document["tables"]["fixed_effects"]} == {"sst2"}


def test_glmm_names_its_approximation(blog_shaped: Path) -> None:
    analysis = analyze(pd.read_parquet(blog_shaped), model="glmm", tasks=["sst2"], n_boot=100)
    assert "Laplace (glmer nAGQ=1)" in analysis.tables["diagnostics"]["approximation"].iloc[0]
    marginal = analysis.tables["marginal_accuracy"]
    assert marginal["marginal"].between(0, 1).all() and (marginal["ci_low"] <= marginal["marginal"]).all()


def test_analyze_a_real_exported_study(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from _factories import simple_spec, write_spec

    spec = write_spec(
        tmp_path,
        simple_spec(
            model=str(tiny_model),
            grid={"frozen_layers": [0, 2], "train_sizes": [32, 64], "seeds": [1, 2, 3]},
            training={"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
        ),
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["analyze", "--storage", storage, "--n-boot", "100", "-o", str(tmp_path / "a")]) == 0
    assert "[sst2]" in capsys.readouterr().out
    emm = pd.read_parquet(tmp_path / "a" / "emmeans.parquet")
    assert len(emm[emm.fit == "all_runs"]) == 2 * 2
    document = json.loads((tmp_path / "a" / "analysis.json").read_text())
    runs = pd.read_parquet(tmp_path / "a" / "failure_rates.parquet")
    if runs["n_failed"].sum() == runs["n"].sum():  # a random 2-layer model collapses: nothing left without failures
        assert any("without_failed" in w for w in document["warnings"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "anova"], "`--model` must be one of"),
        (["--metric", "accuracy"], "`--metric` must be one of"),
        (["--task", "rte"], "not in the results table"),
        (["--margin", "-1"], "`--margin` must be > 0"),
        (["--variance", "per_seed"], "`--variance` must be one of"),
        (["--adjust-across", "tasks"], "`--adjust-across` must be one of ['none', 'sizes']"),
        (["--bootstrap-tests", "-1"], "`--bootstrap-tests` must be >= 0"),
    ],
)
def test_bad_options(
    blog_shaped: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["analyze", "--results", str(blog_shaped), "-o", str(tmp_path / "a"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_bad_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.csv"
    pd.DataFrame(columns=["task", "frozen_layers", "train_size", "seed", "best_dev"]).to_csv(empty, index=False)
    assert main(["analyze", "--results", str(empty), "-o", str(tmp_path / "a")]) == 2
    assert "The results table is empty" in capsys.readouterr().err
    assert main(["analyze", "--results", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "a")]) == 2
    assert "No results table at" in capsys.readouterr().err
    with pytest.raises(ModelFitError, match="lacks column"):
        analyze(pd.DataFrame({"task": ["sst2"], "seed": [1]}))
    one_seed = simulate_results(seeds=1, frozen_levels=(0, 2), train_sizes=(50, 100))
    with pytest.raises(ModelFitError, match="one run per cell"):
        analyze(one_seed, n_boot=50)


def test_unequal_cell_variances_are_flagged() -> None:
    from scipy import stats as scipy_stats

    from freezestats.stats.descriptive.variance import variance_homogeneity

    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 100), seeds=12, resid_sd=0.01, rng=5)
    noisy = (table.frozen_layers == 2) & (table.train_size == 50)
    table.loc[noisy, "best_dev"] += np.random.default_rng(0).normal(0, 0.08, noisy.sum())
    result = variance_homogeneity(table, "best_dev")
    groups = [g["best_dev"].to_numpy() for _, g in table.groupby(["frozen_layers", "train_size"])]
    expected = scipy_stats.levene(*groups, center="median")  # scipy: Brown–Forsythe = Levene with medians
    assert result.loc[0, "statistic"] == pytest.approx(expected.statistic)
    assert result.loc[0, "p_val"] == pytest.approx(expected.pvalue) and result.loc[0, "p_val"] < 0.05
    analysis = analyze(table, response="best_dev", n_boot=50)
    assert any("spread of runs differs across cells" in w for w in analysis.warnings)
    calm = analyze(simulate_results(frozen_levels=(0, 2), train_sizes=(50, 100), seeds=12, rng=6), n_boot=50)
    assert not any("spread of runs differs" in w for w in calm.warnings)


def test_a_table_from_elsewhere_without_role_and_with_upper_case_state() -> None:
    from freezestats.stats import simulate_results

    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), rng=4)
    ours = analyze(table, n_boot=50)
    foreign = table.drop(columns=["role"]).assign(state="COMPLETE")
    theirs = analyze(foreign, n_boot=50)
    pd.testing.assert_frame_equal(theirs.tables["contrasts"], ours.tables["contrasts"])
    with pytest.raises(ModelFitError) as err:
        analyze(table.drop(columns=["seed", "failed"]))
    message = str(err.value)
    assert "\n" not in message and message.count("seed") == 1 and "'failed'" in message

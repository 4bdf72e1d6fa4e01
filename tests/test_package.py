"""The installed package: public API, shipped files, entry point, and a real run on the packaged MiniLM."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from _factories import SMALL_VALIDATION_ROWS

import freezestats

REPO = Path(__file__).resolve().parents[1]


def test_public_api_is_pinned() -> None:
    assert dir(freezestats) == [
        "DataError",
        "FreezestatsError",
        "ModelError",
        "ModelFitError",
        "SpecError",
        "StorageError",
        "StudySpec",
        "TrialFailed",
        "__version__",
        "load_spec",
        "parse_spec",
    ]
    assert issubclass(freezestats.SpecError, freezestats.FreezestatsError)


def test_importing_the_package_does_not_load_torch_nor_the_cli_the_statistics() -> None:
    """Every CLI process (``run``, each ``worker``) imports ``freezestats.cli.main``; the statistics and scipy.stats
    (~2.5 s of imports) are loaded by the commands that use them, not to build the parser."""
    code = (
        "import sys, freezestats, freezestats.cli.main, freezestats.results.export; "
        "print([m in sys.modules for m in ('torch', 'freezestats.stats', 'scipy.stats')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[False, False, False]"


def test_wheel_ships_the_studies_and_the_demo_data(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("freezestats-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in (
        "study/quick.toml",
        "study/blog2020.toml",
        "study/blog2020-minilm.toml",
        "study/lee2019.toml",
        "data/demo/agreement/train.parquet",
        "data/demo/agreement/validation.parquet",
        "data/reference/blog2020_roberta_base.csv",
    ):
        assert f"freezestats/_bundled/{shipped}" in names
    assert "freezestats/tasks/sst2.yaml" in names


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "freezestats", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )


def test_default_study_validates_from_any_directory(tmp_path: Path) -> None:
    result = _cli(["validate"], tmp_path, FREEZESTATS_DATA="")
    assert result.returncode == 0, result.stderr
    assert "Study 'quick' is valid" in result.stdout
    assert "task agreement: " in result.stdout and "from bundled:agreement" in result.stdout


@pytest.mark.slow
def test_real_run_on_packaged_minilm_and_glue_sst2(tmp_path: Path, small_glue_dir: Path) -> None:
    """The real thing, small: MiniLM-L6 from its PyPI package, real SST-2 (its dev set cut to 256 rows: scoring
    all 872 at each evaluation was most of this test's time), through the CLI, then export."""
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        'version = 1\nname = "e2e"\ntasks = ["sst2"]\n[model]\nname = "minilm-l6"\n'
        "[grid]\nfrozen_layers = [0, 6]\ntrain_sizes = [32]\nseeds = [1]\n"
        "[training]\nepochs = 1\neval_every_epochs = 1\nmax_length = 64\n"
    )
    run = _cli(
        ["run", "--study", str(spec), "--storage", "sqlite:///e2e.db", "--no-progress"],
        tmp_path,
        FREEZESTATS_DATA=str(small_glue_dir),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2/2 cells complete, 0 failed" in run.stdout
    export = _cli(["export", "--storage", "sqlite:///e2e.db", "-o", "results.parquet"], tmp_path)
    assert export.returncode == 0, export.stderr
    table = pd.read_parquet(tmp_path / "results.parquet")
    assert len(table) == 2 and set(table.model) == {"minilm-l6"} and set(table.n_layers) == {6}
    full, frozen = table.set_index("frozen_layers").loc[0], table.set_index("frozen_layers").loc[6]
    assert full.total_params == 22_713_986 and full.trainable_params == full.total_params
    assert frozen.trainable_params == 384 * 384 + 384 + 384 * 2 + 2  # pooler + classifier only
    assert table.n_eval.eq(SMALL_VALIDATION_ROWS).all() and table.best_dev.between(0.3, 1.0).all()
    assert (tmp_path / "e2e.db.artifacts").is_dir()

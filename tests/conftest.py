"""Shared fixtures: the local GLUE data, a tiny local model, and small valid specs.

Tests never touch the network: the hub is switched off, GLUE comes from ``FREEZESTATS_DATA`` (which
``.ci/run`` sets to ../shared/data/glue), and fast tests use a tiny randomly initialised BERT saved
to a local folder with the packaged MiniLM tokenizer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # conftest stays light: the analysis is imported where a fixture needs it
    from freezestats.analysis.pipeline import Analysis

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `run` defaults to `--workers auto` (a worker process per core); tests monkeypatch this process, so their
# runs stay in it unless a test asks for workers (tests/test_worker_layout.py tests auto itself).
os.environ["FREEZESTATS_WORKERS"] = "1"

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``-n``, on by default in ``pyproject.toml``), one thread a worker. Without it torch and
    BLAS start a thread per core in every worker: two workers on two cores then ran each test ~1.8x slower and
    the suite gained 10% (1183 s against 1310 s); one thread a worker, 622 s against 1033 s in one process
    (``bench/suite_workers.py``, side by side on the 2-core AMD EPYC). Set in the controller before it starts the
    workers, so that they and the processes their tests start inherit it; it overrides a value in the environment,
    since every worker would multiply it."""
    if getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = "1"


@pytest.fixture(scope="module")
def glue_dir(request: pytest.FixtureRequest) -> Path:
    """The GLUE parquet folder; the suite needs it (see README: FREEZESTATS_DATA=../shared/data/glue). A module that
    sets ``SMALL_GLUE = True`` gets ``small_glue_dir`` instead (its runs score 256 dev rows per task)."""
    if getattr(request.module, "SMALL_GLUE", False):
        return request.getfixturevalue("small_glue_dir")
    return _glue_path()


@pytest.fixture(scope="session")
def full_glue_dir() -> Path:
    """The GLUE parquet folder, for a test in a module that sets ``SMALL_GLUE``."""
    return _glue_path()


def _glue_path() -> Path:
    path = Path(os.environ.get("FREEZESTATS_DATA", REPO.parent / "shared" / "data" / "glue")).resolve()
    if not (path / "sst2" / "train.parquet").is_file():
        raise RuntimeError(f"GLUE data not found at {path}; set FREEZESTATS_DATA to ../shared/data/glue.")
    return path


@pytest.fixture(scope="session")
def small_glue_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GLUE with 256 validation rows per task, for tests whose runs need a dev set but not the real one's size
    (``_factories.build_small_glue`` says why)."""
    from _factories import build_small_glue

    return build_small_glue(_glue_path(), tmp_path_factory.mktemp("glue-small"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT with random weights and MiniLM's vocabulary, saved like any local checkpoint."""
    from _factories import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory):
    """A real PostgreSQL server on 127.0.0.1 for this session (skipped, visibly, when not installed)."""
    from _postgres import PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)")
    pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed (pip install -e '.[test]')")
    server = PostgresServer(bin_dir, tmp_path_factory.mktemp("postgres"))
    server.start()
    yield server.url
    server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say where the report tests left their screenshots and PDF page images (test artifacts)."""
    from _browser import WRITTEN, artifacts_dir

    if WRITTEN:
        terminalreporter.write_line(f"report test artifacts (HTML screenshot, PDF pages): {artifacts_dir()}")


@pytest.fixture(scope="session")
def blog2020_analysis() -> Analysis:
    """The blog example's default analysis (its ``findings.run_analysis`` of the committed export), computed once
    for the tests that read it (the README check and the report's decision tests): it takes ~20 s."""
    from _scripts import load_script

    findings = load_script(REPO / "examples" / "blog2020-minilm" / "findings.py")
    return findings.run_analysis(*findings.load_inputs())

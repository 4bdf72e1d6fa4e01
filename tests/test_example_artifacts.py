"""Every prediction artifact that a committed example database references is committed with it.

An example's ``study.db`` is committed so that its numbers can be re-derived and its run resumed elsewhere; the
per-example predictions live beside it in ``study.db.artifacts/``, one file per upload. A file that exists only on
the machine that ran the study passes every test there and fails on a fresh clone, so this reads what git tracks
(``git ls-files``), not what is on disk.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *paths], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def referenced_artifacts(db: Path) -> set[str]:
    """The artifact ids of the database's trials: Optuna's ``upload_artifact`` records each as a trial system
    attribute ``artifacts:<id>``."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        keys = con.execute("select key from trial_system_attributes where key like 'artifacts:%'").fetchall()
    return {key.split(":", 1)[1] for (key,) in keys}


def missing_from_git(db_path: str) -> set[str]:
    """Artifacts the committed database at ``db_path`` (relative to the repo) references and git does not track."""
    folder = f"{db_path}.artifacts"
    tracked = {Path(p).name for p in _tracked(folder)}
    return referenced_artifacts(ROOT / db_path) - tracked


def _committed_databases() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: which files are committed cannot be read")
    return [p for p in _tracked("examples") if p.endswith(".db")]


def test_the_examples_commit_every_artifact_their_databases_reference() -> None:
    databases = _committed_databases()
    assert databases, "no study database is committed under examples/"
    missing = {db: sorted(missing_from_git(db)) for db in databases}
    missing = {db: ids for db, ids in missing.items() if ids}
    shown = {db: (len(ids), ids[:3]) for db, ids in missing.items()}
    assert not missing, f"artifacts referenced but not committed (count, first ids): {shown}"


def test_the_check_sees_an_untracked_artifact(tmp_path: Path) -> None:
    """The check itself: a database referencing one more id than git holds is caught."""
    db = _committed_databases()[0]
    copy = tmp_path / "study.db"
    shutil.copy(ROOT / db, copy)
    with sqlite3.connect(copy) as con:
        trial_id = con.execute("select trial_id from trials limit 1").fetchone()[0]
        con.execute(
            "insert into trial_system_attributes (trial_id, key, value_json) values (?, ?, ?)",
            (trial_id, "artifacts:not-committed", '"{}"'),
        )
    assert referenced_artifacts(copy) - referenced_artifacts(ROOT / db) == {"not-committed"}


def test_the_ignore_rule_keeps_artifacts_at_any_depth() -> None:
    """A study database and its artifacts two folders down under examples/ are not ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["examples/a/b/study.db", "examples/a/b/study.db.artifacts/x", "examples/a/study.db.artifacts/y"]
    out = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "", f"ignored: {out.stdout.split()}"

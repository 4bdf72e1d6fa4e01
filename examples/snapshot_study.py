"""Copy a running study's SQLite database (a consistent backup, safe while the run writes) and its per-example
prediction artifacts into an example's folder, so that a commit carries a long run's progress and another
machine can resume it from there.

    python examples/snapshot_study.py RUN_DB EXAMPLE_DIR

Artifacts are copied only when new (``cp -n``): they are written once per trial and never change. The database
and its artifacts are then staged together (``git add``), so the commit that carries the database carries every
file it references: an artifact left unstaged exists only on this machine, and a fresh clone's tests fail on it
(``tests/test_example_artifacts.py``).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path


def snapshot(run_db: Path, folder: Path) -> dict[str, int]:
    """Back ``run_db`` up to ``folder/study.db``, copy new artifacts, and return the trial states' counts."""
    if not run_db.is_file():
        raise SystemExit(f"snapshot_study: no study database at {run_db}")
    folder.mkdir(parents=True, exist_ok=True)
    source, target = sqlite3.connect(run_db), sqlite3.connect(folder / "study.db")
    with target:
        source.backup(target)
    states = dict(target.execute("select state, count(*) from trials group by state").fetchall())
    source.close()
    target.close()
    artifacts, copies = run_db.parent / f"{run_db.name}.artifacts", folder / "study.db.artifacts"
    copies.mkdir(exist_ok=True)
    for path in artifacts.glob("*") if artifacts.is_dir() else []:
        if not (copies / path.name).exists():
            shutil.copy2(path, copies / path.name)
    return states


def stage(folder: Path) -> None:
    """``git add`` the snapshot's database and its artifacts together (forced: ``*.db`` is ignored elsewhere)."""
    paths = [str(folder / "study.db"), str(folder / "study.db.artifacts")]
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=folder, capture_output=True, text=True)
    if inside.stdout.strip() != "true":
        print(f"{folder} is not in a git work tree: commit study.db and study.db.artifacts/ together yourself")
        return
    subprocess.run(["git", "add", "--force", "--", *paths], cwd=folder, check=True)
    print(f"staged {paths[0]} and {paths[1]}/: commit them together")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python examples/snapshot_study.py RUN_DB EXAMPLE_DIR")
    print(sys.argv[2], snapshot(Path(sys.argv[1]), Path(sys.argv[2])))
    stage(Path(sys.argv[2]).resolve())

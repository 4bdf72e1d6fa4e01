"""Copy a running study's SQLite database (a consistent backup, safe while the run writes) and its per-example
prediction artifacts into an example's folder, so that a commit carries a long run's progress and another
machine can resume it from there.

    python examples/snapshot_study.py RUN_DB EXAMPLE_DIR

Artifacts are copied only when new (``cp -n``): they are written once per trial and never change.
"""

from __future__ import annotations

import shutil
import sqlite3
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


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python examples/snapshot_study.py RUN_DB EXAMPLE_DIR")
    print(sys.argv[2], snapshot(Path(sys.argv[1]), Path(sys.argv[2])))

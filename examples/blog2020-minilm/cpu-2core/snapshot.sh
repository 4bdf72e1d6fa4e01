#!/usr/bin/env bash
# Copy the running worked example's study database (a consistent SQLite backup, safe while the run writes)
# and its per-example prediction artifacts into this folder, so a commit carries the progress and another
# machine can resume it with resume.sh.
#   bash examples/blog2020-minilm/cpu-2core/snapshot.sh [RUN_DIR]      (default /work/runs/blog2020-minilm)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run="${1:-/work/runs/blog2020-minilm}"
python3 - "$run/study.db" "$here/study.db" <<'PY'
import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
with dst:
    src.backup(dst)
print(sys.argv[2], dict(dst.execute("select state, count(*) from trials group by state").fetchall()))
PY
mkdir -p "$here/study.db.artifacts"
cp -n "$run/study.db.artifacts/"* "$here/study.db.artifacts/" 2>/dev/null || true
# The README's hardware comparison pairs these runs with the H100 study: regenerate it with the new progress.
python3 "$here/../findings.py" --write

#!/usr/bin/env bash
# Copy the running worked example's study database and its per-example prediction artifacts into this folder
# (examples/snapshot_study.py), so a commit carries the progress and another machine can resume it with resume.sh.
#   bash examples/blog2020-minilm/cpu-2core/snapshot.sh [RUN_DIR]      (default /work/runs/blog2020-minilm)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 "$here/../../snapshot_study.py" "${1:-/work/runs/blog2020-minilm}/study.db" "$here"
# The README's hardware comparison pairs these runs with the H100 study: regenerate it with the new progress.
python3 "$here/../findings.py" --write

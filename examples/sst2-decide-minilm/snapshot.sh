#!/usr/bin/env bash
# Copy the running study's database and its prediction artifacts into this folder (examples/snapshot_study.py) and
# refresh the export (results.csv, predictions.parquet), so a commit carries the progress and another machine can
# resume it with resume.sh.
#   bash examples/sst2-decide-minilm/snapshot.sh [RUN_DIR]      (default /work/runs/sst2-decide)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 "$here/../snapshot_study.py" "${1:-/work/runs/sst2-decide}/study.db" "$here"
freezestats export --storage "sqlite:///$here/study.db" -o "$here/results.csv" --predictions "$here/predictions.parquet"

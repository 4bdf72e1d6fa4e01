#!/usr/bin/env bash
# Copy the running multi-task study's database and prediction artifacts here, to commit its progress.
#   bash examples/multitask-minilm/snapshot.sh [RUN_DIR]      (default /work/runs/multitask-minilm)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 "$here/../snapshot_study.py" "${1:-/work/runs/multitask-minilm}/study.db" "$here"

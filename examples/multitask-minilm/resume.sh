#!/usr/bin/env bash
# Resume (or start) the multi-task study (study/multitask-minilm.toml, 90 trials) on the committed database.
# Completed cells are never re-run; a cell that was running when the last machine stopped runs again.
# Run it outside your CI clone; snapshot.sh copies the progress back here to commit.
#   bash examples/multitask-minilm/resume.sh RUN_DIR [DATA_DIR] [extra `freezestats run` options, e.g. --workers 1]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run="${1:?usage: resume.sh RUN_DIR [DATA_DIR] [run options]}"
data="${2:-$here/../../../shared/data/glue}"
shift $(( $# >= 2 ? 2 : 1 ))
mkdir -p "$run"
if [ ! -f "$run/study.db" ] && [ -f "$here/study.db" ]; then
  cp "$here/study.db" "$run/" && cp -r "$here/study.db.artifacts" "$run/"
fi
exec freezestats run --study multitask-minilm --storage "sqlite:///$(cd "$run" && pwd)/study.db" \
  --data-dir "$data" --no-progress "$@"

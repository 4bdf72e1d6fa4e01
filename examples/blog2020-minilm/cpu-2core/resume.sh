#!/usr/bin/env bash
# Resume (or start) the worked example: the 350-run blog2020-minilm grid, on the committed study database.
# Completed cells are never re-run; a cell that was running when the last machine stopped runs again.
# Run it outside your CI clone (a copy of this folder), then copy study.db and study.db.artifacts/ back here
# (snapshot.sh does it from a run folder) and commit them.
#   bash examples/blog2020-minilm/cpu-2core/resume.sh RUN_DIR [DATA_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run="${1:?usage: resume.sh RUN_DIR [DATA_DIR]}"
data="${2:-$here/../../../../shared/data/glue}"
mkdir -p "$run"
[ -f "$run/study.db" ] || { cp "$here/study.db" "$run/"; cp -r "$here/study.db.artifacts" "$run/"; }
exec nice -n 10 freezestats run --study blog2020-minilm --storage "sqlite:///$(cd "$run" && pwd)/study.db" \
  --data-dir "$data" --no-progress

#!/usr/bin/env bash
# Resume (or start) the decisive SST-2 study on the committed database, in two stages: the pilot (n = 1000, frozen
# 0, 1, 2: issue 60's measurement), then the whole spec with `run --extend`. Completed cells never run again; a cell
# that was running when the last machine stopped runs again. Run it outside your CI clone, then `snapshot.sh RUN_DIR`
# and commit.
#   bash examples/sst2-decide-minilm/resume.sh RUN_DIR [DATA_DIR] [-- extra run flags, e.g. --workers 10]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run="${1:?usage: resume.sh RUN_DIR [DATA_DIR] [-- run flags]}"
shift
data="$here/../../../shared/data/glue"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then data="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
mkdir -p "$run"
run="$(cd "$run" && pwd)"
[ -f "$run/study.db" ] || [ ! -f "$here/study.db" ] || { cp "$here/study.db" "$run/"; cp -r "$here/study.db.artifacts" "$run/"; }
sed -e "s/^frozen_layers = \[.*\]/frozen_layers = [0, 1, 2]/" -e "s/^train_sizes = \[.*\]/train_sizes = [1000]/" \
  "$here/spec.toml" > "$run/spec-pilot.toml"
stage() {
  local extend=(); [ -f "$run/study.db" ] && extend=(--extend)
  echo "stage $1: $(date -u +%FT%TZ)"
  nice -n 5 freezestats run --study "$2" --storage "sqlite:///$run/study.db" --data-dir "$data" --no-progress \
    "${extend[@]}" "${@:3}"
}
stage pilot "$run/spec-pilot.toml" "$@"
[ "${PILOT_ONLY:-0}" = 1 ] || stage full "$here/spec.toml" "$@"

#!/usr/bin/env bash
# Resume (or start) the 20-seed SST-2 study on the committed database, seeds in rounds of 5: the spec's seed list
# is grown with `run --extend` (1-5, 1-10, 1-15, 1-20), so a stop leaves every cell with as many seeds and a
# replay of any prefix is balanced. Completed cells never run again; a cell that was running when the last machine
# stopped runs again. Run it outside your CI clone, then `snapshot.sh RUN_DIR` and commit.
#   bash examples/sst2-20seeds-minilm/resume.sh RUN_DIR [DATA_DIR] [-- extra run flags, e.g. --workers 10]
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
stored=0  # the most seeds the stored spec already asks for (a round below it would drop seeds: --extend refuses)
[ -f "$run/study.db" ] && stored=$(python3 -c "import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
row = con.execute(\"select value_json from study_user_attributes where key = 'freezestats_spec'\").fetchone()
print(max(json.loads(json.loads(row[0]) if row and row[0].startswith('\"') else row[0])['grid']['seeds']) if row else 0)" "$run/study.db")
for last in 5 10 15 20; do
  [ "$last" -lt "$stored" ] && continue
  sed "s/^seeds = \[.*\]/seeds = [$(seq -s ', ' 1 "$last")]/" "$here/spec.toml" > "$run/spec-$last.toml"
  extend=(); [ -f "$run/study.db" ] && extend=(--extend)
  echo "round to $last seeds: $(date -u +%FT%TZ)"
  nice -n 5 freezestats run --study "$run/spec-$last.toml" --storage "sqlite:///$run/study.db" --data-dir "$data" \
    --no-progress "${extend[@]}" "$@"
done

"""The 20-seed SST-2 study in progress (examples/sst2-20seeds-minilm): what is committed can be resumed.

``resume.sh`` writes each round's spec from ``spec.toml`` with the seed list cut to 1..k and runs it with
``--extend``; the committed database must therefore hold exactly such a spec, or the next machine's resume is
refused (a changed spec) before it runs anything. The export beside it must be the database's finished runs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd

from freezestats.results.export import results_table
from freezestats.spec import load_spec
from freezestats.study.trials import load_study, open_storage

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sst2-20seeds-minilm"


def _study():
    return load_study(open_storage(f"sqlite:///{EXAMPLE / 'study.db'}", must_exist=True), None)


def test_the_committed_study_is_a_round_of_the_committed_spec(tmp_path: Path) -> None:
    study = _study()
    seeds = study.user_attrs["freezestats_spec"]["grid"]["seeds"]
    assert seeds == list(range(1, len(seeds) + 1)) and len(seeds) % 5 == 0  # a round of resume.sh
    text = (EXAMPLE / "spec.toml").read_text()
    round_text = re.sub(r"(?m)^seeds = \[.*\]$", f"seeds = {seeds}", text)
    (tmp_path / "round.toml").write_text(round_text)
    assert load_spec(tmp_path / "round.toml").spec_hash == study.user_attrs["spec_hash"]
    assert load_spec(EXAMPLE / "spec.toml").grid.seeds == tuple(range(1, 21))


def test_the_export_is_the_finished_runs_and_they_ran_in_fp32() -> None:
    runs = results_table(_study())
    exported = pd.read_csv(EXAMPLE / "results.csv")
    assert sorted(exported["trial"]) == sorted(runs["trial"]) and len(runs) > 0
    assert set(runs["precision"]) == {"fp32"} and set(runs["task"]) == {"sst2"}
    assert set(runs["train_size"]) <= {50, 100}


def test_the_scripts_parse() -> None:
    for script in ("resume.sh", "snapshot.sh"):
        subprocess.run(["bash", "-n", str(EXAMPLE / script)], check=True)

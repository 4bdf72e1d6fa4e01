"""The test suite in one process against a worker per core (pytest-xdist, one thread a worker), side by side.

Why: the brief keeps the suite under 15 minutes on a CI machine of two cores, and in one process it took 957-1014 s
on the AMD EPYC without bf16 instructions. ``pyproject.toml`` now runs it with ``-n auto --dist loadfile`` and
``tests/conftest.py`` pins every worker to one thread (two workers each starting a thread per core had gained only
10%). This bench runs the same tests both ways, one after the other on the same machine, and prints each wall
time, what passed, and the ratio, with the CPU and the precision ``"auto"`` runs there named (the suite's real
runs train at the precision each test sets; ``auto`` is what the MiniLM runs of the CLI tests use).

    FREEZESTATS_DATA=../shared/data/glue python bench/suite_workers.py                 # the whole suite, ~27 min
    FREEZESTATS_DATA=../shared/data/glue python bench/suite_workers.py tests/test_workers.py tests/test_report.py
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flops  # the CPU's name, as every bench gives it

REPO = Path(__file__).resolve().parents[1]
WAYS = {"one process": ["-n", "0"], "a worker per core": ["-n", "auto", "--dist", "loadfile"]}


def run_suite(tests: list[str], options: list[str]) -> dict:
    """One pytest run of ``tests`` with ``options``: its wall seconds and pytest's last line (what passed)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, *tests]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return {"options": options, "seconds": seconds, "returncode": done.returncode,
            "summary": summary[-1].strip("= ") if summary else done.stdout[-300:]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="*", help="test paths (default: the whole suite)")
    parser.add_argument("--output", default="bench/results/suite_workers.json")
    args = parser.parse_args()
    from freezestats.training import cpu_has_native_bf16

    machine = flops.cpu_description()
    runs = {name: run_suite(args.tests, options) for name, options in WAYS.items()}
    record = {"tests": args.tests or ["the whole suite"], "machine": machine,
              "auto_precision": "bf16" if cpu_has_native_bf16() else "fp32", "runs": runs}  # fmt: skip
    serial, parallel = runs["one process"]["seconds"], runs["a worker per core"]["seconds"]
    lines = [f"bench/suite_workers.py: {', '.join(record['tests'])}",
             f"  {flops.describe(machine)}; precision \"auto\" runs {record['auto_precision']} here"]  # fmt: skip
    for name, run in runs.items():
        lines.append(f"  {name:>18}: {run['seconds']:7.1f} s  exit {run['returncode']}  {run['summary']}")
    lines.append(f"  a worker per core / one process: {parallel / serial:.3f}")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=1))
    Path(args.output).with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Where does the adaptive design err under the null? Every false non-inferiority claim, with its look.

    python bench/adaptive_null_claims.py --spending "hwang_shih_decani(-2)" --first 0 --studies 48

``bench/adaptive_seeds.py`` counts the null studies with a claim; this lists the claims themselves (study, train
size, depth, the seeds and round at which the claim was made, its estimate, lower bound and local level), on the
same null studies (``null_at_margin(0.03)`` of ``blog_shaped()``, generator seed ``NULL_OFFSET + study``, 24 seeds
simulated a cell as that bench's runs with fixed designs up to 24 seeds) and the
plan of the README's adaptive table by default: margin 0.03, looks every 2 seeds from 4 to 20, a futility screen at
2 seeds, conditional-power futility 0.1, seeking non-inferiority (the plan's flags, as ``adaptive_seeds.py`` spells
them, change it). Whether the errors come from the first looks (few df)
or from the last ones is what decides which lever can lower the error: the spending function only moves the
first.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import platform
import time
from dataclasses import replace
from pathlib import Path

import flops
from adaptive_plan_flags import add_plan_flags, plan_options  # the plan's flags, shared with the other adaptive benches

from freezestats.stats.sequential import SequentialPlan, replay
from freezestats.stats.simulation.realistic import blog_shaped, null_at_margin, realistic_task, simulate_realistic

_SPEC = importlib.util.spec_from_file_location("adaptive_seeds", Path(__file__).with_name("adaptive_seeds.py"))
seeds_bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(seeds_bench)  # the null studies and the failure flags of that bench, not a copy

MARGIN = 0.03
_SHOWN = ["study", "train_size", "frozen_layers", "round", "seeds", "estimate", "lower", "alpha"]


def null_claims(index: int) -> list[dict]:
    """The first non-inferiority claim of each comparison in null study ``index``."""
    study = simulate_realistic(seeds_bench._TASKS["null"], rng=seeds_bench.NULL_OFFSET + index)
    played = replay(seeds_bench._flagged(study.results), study.items, seeds_bench.PLAN)
    claims = played[(played["decision"] == "noninferior") & (played["frozen_layers"] != 0)]
    first = claims.sort_values("round").groupby(["train_size", "frozen_layers"], as_index=False).first()
    return [{k: float(v) if k in ("estimate", "lower", "alpha") else int(v) for k, v in row.items() if k in _SHOWN}
            | {"study": index} for row in first.to_dict("records")]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_plan_flags(parser, min_seeds=4, max_seeds=20, seeds_per_round=2, futility=0.1, seek="noninferiority",
                   futility_seeds=2)  # fmt: skip
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--studies", type=int, default=48)
    parser.add_argument("--processes", type=int, default=2)
    rates = "the looks' failure part: Wilson-MOVER (pooled, what the looks use) or the joint draws (pooled_joint)"
    parser.add_argument("--failure-rates", default="pooled", choices=("pooled", "pooled_joint"), help=rates)
    simulated = "seeds simulated a cell: as adaptive_seeds.py's run did (24 for its fixed designs up to 24 seeds)"
    parser.add_argument("--simulated-seeds", type=int, default=24, help=simulated)
    parser.add_argument("--output", default=None, help="also write the claims as JSON here")
    args = parser.parse_args()
    plan = SequentialPlan(margin=MARGIN, **plan_options(parser, args))
    base = replace(blog_shaped(), seeds=max(args.simulated_seeds, plan.max_seeds))
    tasks = (realistic_task(base), realistic_task(null_at_margin(MARGIN, base)), plan, (plan.min_seeds,),
             args.failure_rates)  # fmt: skip
    started = time.perf_counter()
    with multiprocessing.Pool(args.processes, initializer=seeds_bench._start, initargs=tasks) as pool:
        claims = [c for found in pool.map(null_claims, range(args.first, args.first + args.studies)) for c in found]
    print(f"bench/adaptive_null_claims.py: {args.spending} spending, first test at {plan.min_seeds} seeds, "
          f"{plan.futility_rule()}, failure part {args.failure_rates}, "
          f"null studies {args.first}-{args.first + args.studies - 1}; {flops.cpu_name()}, "
          f"python {platform.python_version()}, {args.processes} process(es), "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    print(f"studies with a claim: {len({c['study'] for c in claims})} of {args.studies}; claims (truth -{MARGIN}):")
    print("  " + "  ".join(f"{name:>13}" for name in _SHOWN))
    for c in claims:  # floats to 4 decimals, counts as they are
        print(
            "  " + "  ".join(f"{c[name]:>13.4f}" if isinstance(c[name], float) else f"{c[name]:>13}" for name in _SHOWN)
        )
    if args.output:
        Path(args.output).write_text(json.dumps(claims, indent=1) + "\n")


if __name__ == "__main__":
    main()

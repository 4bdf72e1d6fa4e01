"""How long storing a finished run's record takes in a SQLite study, per attribute (Optuna's ``set_user_attr``, one
commit each, as before) against one transaction (``freezestats.study.trials.set_user_attrs``), with 1 and with
several worker processes writing at once.

Why: on a lent H200 the 280 runs of ``bench/experiments/sst2-seeds6-13-minilm.toml`` spent 634 s training and
evaluating (the sum of the runs' own ``wall_seconds``) on 10 fused workers, so about 63 s a worker, in a grid
that took 157.1 s; the rest is outside the training. A run's record is about 45 attributes, and every commit
takes SQLite's one write lock and syncs the file, so the records of all workers queue behind each other.

Each process claims enqueued trials through freezestats' storage (``open_storage``: heartbeats, ``BEGIN
IMMEDIATE``), stores a record of ``--attrs`` attributes and tells the trial, as a worker does after training.
It prints this machine's CPU, then per setting the time of the writing phase (from a common start of all
processes, their start-up excluded, to the last one done), the time per trial and the ratio.

    python bench/storage_writes.py --trials 40 --processes 1 4 > bench/results/storage_writes.txt
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import flops


def _record(n_attrs: int, trial: int) -> dict:
    """A record shaped like a run's: numbers, strings, a short list."""
    record = {f"metric_{i}": 0.5 + trial * 1e-3 + i * 1e-4 for i in range(n_attrs - 3)}
    return {**record, "fail_reason": "", "device": "cuda", "curve_steps": list(range(20))}


def _worker(url: str, n_trials: int, n_attrs: int, batched: bool, start: Any, walls: Any) -> None:
    import optuna

    from freezestats.study.trials import open_storage, set_user_attrs

    study = optuna.load_study(study_name="writes", storage=open_storage(url))
    start.wait()  # every process set up (interpreter, imports, storage) before any writes
    started = time.perf_counter()
    for _ in range(n_trials):
        trial = study.ask()
        record = _record(n_attrs, trial.number)
        if batched:
            set_user_attrs(trial, record)
        else:
            for key, value in record.items():
                trial.set_user_attr(key, value)
        study.tell(trial, 0.5)
    walls.put(time.perf_counter() - started)


def _time(processes: int, n_trials: int, n_attrs: int, batched: bool) -> float:
    import optuna
    from optuna.trial import TrialState

    from freezestats.study.trials import open_storage

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/writes.db"
        study = optuna.create_study(study_name="writes", storage=open_storage(url))
        for _ in range(processes * n_trials):
            study.enqueue_trial({})
        context = multiprocessing.get_context("spawn")
        start, walls = context.Barrier(processes), context.Queue()
        args = (url, n_trials, n_attrs, batched, start, walls)
        workers = [context.Process(target=_worker, args=args) for _ in range(processes)]
        for worker in workers:
            worker.start()
        wall = max(walls.get() for _ in workers)  # the writing phase: from the common start to the last one done
        for worker in workers:
            worker.join()
        if any(worker.exitcode for worker in workers):
            raise SystemExit("a writer failed")
        done = optuna.load_study(study_name="writes", storage=url).get_trials(states=(TrialState.COMPLETE,))
        assert len(done) == processes * n_trials and all(len(t.user_attrs) == n_attrs for t in done)
        return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="trials each process records")
    parser.add_argument("--attrs", type=int, default=45, help="attributes a record has")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    print(f"{flops.describe(flops.cpu_description())}; SQLite in a temporary folder; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{args.trials} trials a process, {args.attrs} attributes a record (process start-up excluded)")
    for processes in args.processes:
        each = {batched: _time(processes, args.trials, args.attrs, batched) for batched in (False, True)}
        n = processes * args.trials
        per_key, batched = (f"{each[b]:6.1f} s ({1000 * each[b] / n:5.0f} ms a trial)" for b in (False, True))
        print(f"  {processes} process(es): one commit per attribute {per_key}, one per record {batched}: ", end="")
        print(f"{each[False] / each[True]:.1f}x")


if __name__ == "__main__":
    main()

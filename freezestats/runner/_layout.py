"""How many worker processes ``freezestats run`` starts: ``--workers N``, or ``auto`` (the default).

Why more processes than one on a CPU: a small encoder at batch 16 does not keep two cores busy from
one process (torch's intra-op threads wait on each other between small matmuls and in the Python
between them). On the project's 2-core AVX512-BF16 EPYC, ``bench/layouts.py`` measured the blog grid's
cells at 69.1 cells/h with 2 workers x 1 thread against 59.1 with 1 worker x 2 threads (1.17x). So
``auto`` starts one worker per core on a CPU, up to :data:`MAX_AUTO_CPU_WORKERS`, each with
cores / workers threads (the pool sets ``OMP_NUM_THREADS``). Above four cores nothing is measured yet,
and every worker holds its own copy of the model, so ``auto`` stops at four and says so.

That gain holds only while every worker has work. So ``auto`` is a ceiling: the pool starts no more workers than
there are claims left (:meth:`~freezestats.runner._pool.WorkerPool.size_for`), each with cores / started threads,
and a worker that finds nothing left hands its threads to the trials still running (:mod:`._threads`).

On a GPU ``auto`` keeps one process per device: concurrency there helps (``bench/gpu_concurrency.py``)
but its best level depends on the model's memory, which only the user knows (``--workers N``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from freezestats.exceptions import SpecError

__all__ = ["AUTO", "MAX_AUTO_CPU_WORKERS", "WORKERS_ENV_VAR", "WorkerLayout", "choose_workers", "parse_workers"]

AUTO = "auto"
MAX_AUTO_CPU_WORKERS = 4
WORKERS_ENV_VAR = "FREEZESTATS_WORKERS"  # the default of --workers, for machines (and test suites) that need one


@dataclass(frozen=True)
class WorkerLayout:
    """The number of worker processes, and the sentence ``run`` prints about the choice when it starts.

    ``auto``: the count is a ceiling, lowered to the claims left when the pool starts."""

    workers: int
    reason: str
    auto: bool = False


def parse_workers(text: str) -> int | str:
    """``--workers``: a count >= 1 or ``auto``; anything else is a one-line error."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        count = int(text)
    except ValueError:
        raise SpecError(f"`--workers` must be a number >= 1 or 'auto', but got {text!r}.") from None
    if count < 1:
        raise SpecError(f"`--workers` must be >= 1, but got {count}.")
    return count


def default_workers() -> int | str:
    """``$FREEZESTATS_WORKERS`` when set, else ``auto``."""
    text = os.environ.get(WORKERS_ENV_VAR)
    return AUTO if not text else parse_workers(text)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, as taskset or a container sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def choose_workers(
    requested: int | str,
    *,
    device_type: str,
    storage: str,
    devices: list[str] | None,
    max_trials: int | None,
    cores: int | None = None,
) -> WorkerLayout:
    """The layout for ``requested`` (a count, or ``auto``) on this machine, with the reason in words."""
    if requested != AUTO:
        return WorkerLayout(
            int(requested), f"{requested} worker process(es), as asked (--workers or ${WORKERS_ENV_VAR})."
        )
    if devices:
        return WorkerLayout(len(devices), f"auto: one worker per listed device ({', '.join(devices)}).")
    if device_type != "cpu":
        return WorkerLayout(1, f"auto: one worker on {device_type} (--workers N runs N trials on it at once).")
    if ":memory:" in storage:
        return WorkerLayout(1, "auto: one worker, because an in-memory study cannot be shared between processes.")
    if max_trials is not None:
        return WorkerLayout(1, "auto: one worker, so that --max-trials stops after exactly that many trials.")
    cores = usable_cores() if cores is None else cores
    if cores < 2:
        return WorkerLayout(1, "auto: one worker on this 1-core CPU.")
    workers = min(cores, MAX_AUTO_CPU_WORKERS)
    threads = cores // workers
    capped = f" (auto stops at {MAX_AUTO_CPU_WORKERS}; more are untested)" if cores > MAX_AUTO_CPU_WORKERS else ""
    return WorkerLayout(
        workers,
        f"auto: {workers} worker processes x {threads} torch thread(s) on this {cores}-core CPU{capped}, fewer when "
        "fewer cells are left, each with the cores shared out; a worker with nothing left hands its threads to the "
        "trials still running. --workers 1 runs one process.",
        auto=True,
    )

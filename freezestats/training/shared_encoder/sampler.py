"""The MT-DNN mixed mini-batch sampler: which task, and which of its examples, each training step uses.

Each task's training subset is cut into batches of ``batch_size``, in an order drawn per epoch exactly as
the single-task run draws it (:func:`freezestats.training.data_orders` with the same ``order_seed``), so a
task sees its examples in the same order alone and in a group; only the interleaving differs. An epoch of
the group is as many steps as all tasks have batches. Which task each step trains on:

``proportional`` (default, MT-DNN)
    every batch of every task once per epoch, pooled and shuffled: task ``t`` gets ``b_t`` steps an epoch.
``uniform``
    each step draws a task with probability ``1 / K``; a task that runs out of batches starts a new epoch
    of its own (a new permutation), one that is drawn rarely leaves some unseen.
``temperature``
    each step draws task ``t`` with probability proportional to ``n_t ** (1 / T)`` (``T = 1`` is
    proportional to size, ``T -> inf`` uniform).

The interleaving has a generator of its own (seeded from ``order_seed``), so it draws nothing from the
RNGs of head initialisation and dropout; a group of one task gives the single-task run's batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from freezestats.exceptions import SpecError

__all__ = ["MixedBatches", "task_probabilities"]

_MIX_STREAM = 0x6D6978  # "mix": the interleaving's stream, apart from the data orders seeded with order_seed

Orders = Callable[[int, int], Iterator[list[int]]]
"""``data_orders(n_examples, order_seed)``: one permutation of the examples per epoch."""


def task_probabilities(
    sizes: Mapping[str, int], batch_size: int, sampling: str, temperature: float
) -> dict[str, float]:
    """The chance that a step trains on each task (``proportional``: its share of the group's batches)."""
    if sampling == "proportional":
        weights = {task: math.ceil(n / batch_size) for task, n in sizes.items()}
    elif sampling == "uniform":
        weights = {task: 1.0 for task in sizes}
    elif sampling == "temperature":
        weights = {task: n ** (1.0 / temperature) for task, n in sizes.items()}
    else:
        raise SpecError(f"`sampling` must be 'proportional', 'uniform' or 'temperature', but got {sampling!r}.")
    total = sum(weights.values())
    return {task: w / total for task, w in weights.items()}


@dataclass
class MixedBatches:
    """An endless stream of ``(task, example indices)``: one training step each.

    ``sizes`` maps each task (in the group's order) to the size of its training subset.
    """

    sizes: Mapping[str, int]
    batch_size: int
    order_seed: int
    orders: Orders
    sampling: str = "proportional"
    temperature: float = 2.0

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes.values()) < 1:
            raise SpecError(f"Every task of a group needs at least one training example, but got sizes {self.sizes}.")
        self.tasks = tuple(self.sizes)
        self.batches_per_task = {task: math.ceil(n / self.batch_size) for task, n in self.sizes.items()}
        self.probabilities = task_probabilities(self.sizes, self.batch_size, self.sampling, self.temperature)

    @property
    def steps_per_epoch(self) -> int:
        """All tasks' batches: the same budget for every sampling, so samplings compare at equal steps."""
        return sum(self.batches_per_task.values())

    def __iter__(self) -> Iterator[tuple[str, list[int]]]:
        streams = {task: _batches(self.orders(n, self.order_seed), self.batch_size) for task, n in self.sizes.items()}
        for epoch in self._task_sequences():
            for task_index in epoch:
                task = self.tasks[task_index]
                yield task, next(streams[task])

    def _task_sequences(self) -> Iterator[np.ndarray]:
        """Per epoch, the task (index) of each step."""
        rng = np.random.default_rng([self.order_seed, _MIX_STREAM])
        pooled = np.repeat(np.arange(len(self.tasks)), [self.batches_per_task[t] for t in self.tasks])
        p = np.array([self.probabilities[t] for t in self.tasks])
        while True:
            if self.sampling == "proportional":
                yield rng.permutation(pooled)
            else:
                yield rng.choice(len(self.tasks), size=self.steps_per_epoch, p=p)


def _batches(orders: Iterator[list[int]], batch_size: int) -> Iterator[list[int]]:
    """One task's batches: each epoch's permutation cut into consecutive batches (the last may be short)."""
    for permutation in orders:
        for start in range(0, len(permutation), batch_size):
            yield permutation[start : start + batch_size]

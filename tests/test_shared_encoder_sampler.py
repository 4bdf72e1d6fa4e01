"""The mixed mini-batch sampler: the task mix matches its setting, every task keeps its own data order."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from freezestats.exceptions import SpecError
from freezestats.training import data_orders
from freezestats.training.shared_encoder import MixedBatches, task_probabilities

SIZES = {"sst2": 400, "mrpc": 100, "stsb": 36}  # 25, 7 and 3 batches of 16: 35 steps an epoch


def _steps(n: int, **options) -> list[tuple[str, list[int]]]:
    sampler = MixedBatches(SIZES, batch_size=16, order_seed=3, orders=data_orders, **options)
    return list(itertools.islice(sampler, n))


def test_proportional_visits_every_batch_of_every_task_once_an_epoch() -> None:
    sampler = MixedBatches(SIZES, batch_size=16, order_seed=3, orders=data_orders)
    assert sampler.steps_per_epoch == 35
    for epoch in range(3):
        steps = _steps(35 * (epoch + 1))[35 * epoch :]
        assert Counter(task for task, _ in steps) == {"sst2": 25, "mrpc": 7, "stsb": 3}
        for task, n in SIZES.items():
            seen = sorted(i for t, batch in steps if t == task for i in batch)
            assert seen == list(range(n))  # each example exactly once per epoch
    tasks = [task for task, _ in _steps(35)]
    assert tasks != sorted(tasks, key=list(SIZES).index)  # shuffled, not task after task


@pytest.mark.parametrize(
    ("sampling", "expected"),
    [
        ("uniform", {task: 1 / 3 for task in SIZES}),
        ("temperature", {task: math.sqrt(n) / sum(math.sqrt(m) for m in SIZES.values()) for task, n in SIZES.items()}),
    ],
)
def test_drawn_samplings_match_their_frequencies(sampling: str, expected: dict[str, float]) -> None:
    n = 35 * 200
    counts = Counter(task for task, _ in _steps(n, sampling=sampling, temperature=2.0))
    assert task_probabilities(SIZES, 16, sampling, 2.0) == pytest.approx(expected)
    for task, p in expected.items():
        assert abs(counts[task] / n - p) < 4 * math.sqrt(p * (1 - p) / n)  # within 4 standard errors


def test_a_task_keeps_the_data_order_it_has_alone() -> None:
    alone = [batch for _, batch in itertools.islice(MixedBatches({"mrpc": 100}, 16, 3, data_orders), 21)]
    in_group = [batch for task, batch in _steps(35 * 4, sampling="uniform") if task == "mrpc"]
    expected = [p[i : i + 16] for p in itertools.islice(data_orders(100, 3), 3) for i in range(0, 100, 16)]
    assert alone == expected  # one task: the single-task run's batches, in its order
    assert in_group[:21] == expected[: len(in_group[:21])]


def test_the_mix_follows_the_seed() -> None:
    assert _steps(70) == _steps(70)
    other = list(itertools.islice(MixedBatches(SIZES, 16, 4, data_orders), 70))
    assert [t for t, _ in other] != [t for t, _ in _steps(70)]


def test_temperature_one_is_proportional_to_size_and_bad_input_is_refused() -> None:
    assert task_probabilities(SIZES, 1, "temperature", 1.0) == pytest.approx(
        task_probabilities(SIZES, 1, "proportional", 1.0)
    )
    with pytest.raises(SpecError, match="at least one training example"):
        MixedBatches({"sst2": 0}, 16, 1, data_orders)
    with pytest.raises(SpecError, match="`sampling` must be"):
        task_probabilities(SIZES, 16, "round-robin", 2.0)

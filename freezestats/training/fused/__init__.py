"""Train K runs of one cell as one computation (horizontal fusion, after HFTA: Wang et al., MLSys 2021).

The runs of a cell differ only in their seeds: the head's initialisation, the data order, dropout. Trained
one after another, each runs the same small matrix products (hidden 384, batch 16 for MiniLM) that leave most
of a CPU's or GPU's throughput unused, and each evaluation reads the same validation batches. Fused, the K runs'
trained parameters are stacked (:mod:`._stacked`), their batches stacked, and one forward, backward and
optimizer step serves all K (:mod:`._steps`); evaluation reads every validation batch once, for the K runs'
layers together on a GPU and in turn on a CPU (:mod:`._evaluator`).

**Fusion changes no result.** Each run keeps its initialisation (its model is built by the same set-up as
:func:`~freezestats.training.fine_tune`'s, from its seed), its data order, its dropout masks, its optimizer
moments, its gradient clipping, its curve, checkpoints and predictions. Dropout draws each run's masks from a
generator of its own, started where the run's seeded set-up leaves torch's global generator, over the run's own
(unpadded) batch shapes and in the lone model's order: on CPU these are the masks the run draws alone, so a
fused run equals the lone run within float tolerance with dropout on (``tests/test_fused_training.py``: fp32,
every step's loss within 1e-5 relative, the same predictions). On CUDA, torch's dropout kernel consumes its
generator differently, so there a fused run is another draw of the same masks' distribution; its masks still
depend on nothing but its own seed (not on its batch mates).

What cannot fuse (another model family, an adapter arm such as LoRA, bi-encoded pairs, fp16, runs that differ
in anything but their seeds and data) runs alone through ``fine_tune``, and its outcome says why
(``extra["fusion"]``). A run whose loss stops being finite leaves the batch; the others go on unchanged.

Entry point: :func:`fine_tune_many`, given K sets of :func:`~freezestats.training.fine_tune`'s keyword inputs,
returns K outcomes (a :class:`~freezestats.training.RunOutcome`, or the :class:`~freezestats.exceptions.TrialFailed`
that ended the run), in order.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from freezestats.encoder.freezing import locate_encoder
from freezestats.encoder.pair_encoding import check_pair_encoding
from freezestats.encoder.prefix_cache import PrefixCache
from freezestats.exceptions import TrialFailed
from freezestats.spec.pairs import CROSS
from freezestats.training import (
    RunOutcome,
    _arm,
    _autocast,
    _check_encoded,
    _outcome,
    _set_up,
    data_orders,
    fine_tune,
    resolve_device,
    resolve_precision,
)
from freezestats.training._encoding import EncodedSplit
from freezestats.training._loop import Schedule
from freezestats.training._measure import Meter
from freezestats.training._prefix import wire_prefix_cache
from freezestats.training.fused._evaluator import FusedEvaluator, RunCurve
from freezestats.training.fused._stacked import RunDropout, StackedBert, stacking_blocker
from freezestats.training.fused._steps import FusedSteps, RunSlot

__all__ = ["PER_RUN", "fine_tune_many", "fusion_blocker"]

PER_RUN = frozenset({"seed", "order_seed", "train", "select_idx", "score_idx", "on_step"})
"""``fine_tune`` inputs that may differ between fused runs; every other input must be the same for all."""

Outcome = RunOutcome | TrialFailed


def fusion_blocker(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """Why these runs cannot be trained fused (``None``: they can), from their inputs alone.

    The model-level conditions (a BERT or RoBERTa classifier, no adapter) are checked once the models are built.
    """
    if len(runs) < 2:
        return "a single run"
    first = runs[0]
    if "strategy" in first:
        return "the deprecated `strategy` input"
    for run in runs[1:]:
        if set(run) != set(first):
            return "the runs were given different inputs"
        differing = [key for key in first if key not in PER_RUN and not _same(first[key], run[key])]
        if differing:
            return f"the runs differ in {', '.join(sorted(differing))}"
        if len(run["train"]) != len(first["train"]):
            return "the runs' train sets differ in size"
    task, training = first["task"], first["training"]
    if task.is_pair and check_pair_encoding(first.get("pair_encoding", CROSS)) != CROSS:
        return "bi-encoded pairs"
    if resolve_precision(training.precision, resolve_device(training.device)) == "fp16":
        return "fp16 (its loss scaling is per run)"
    if first["tokenizer"].padding_side != "right":
        return "a tokenizer that pads on the left"
    return None


def _same(a: Any, b: Any) -> bool:
    """Equal inputs: the same object, equal arrays, equal splits (examples and labels), or ``==``."""
    if a is b:
        return True
    if isinstance(a, EncodedSplit) and isinstance(b, EncodedSplit):
        return a.name == b.name and a.features == b.features and np.array_equal(a.labels, b.labels)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    try:
        return bool(a == b)
    except Exception:  # objects without a usable equality (a tokenizer): only the same object is the same
        return False


def fine_tune_many(runs: Sequence[Mapping[str, Any]]) -> list[Outcome]:
    """Train ``runs`` (each a dict of :func:`~freezestats.training.fine_tune`'s keyword inputs) fused where they
    can be, else one by one; returns one outcome per run, in order: its ``RunOutcome``, or the ``TrialFailed``
    that ended it. ``extra["fusion"]`` says how the run was trained: ``"fused"`` (with ``fused_runs``, the batch
    size, and ``fused_wall_seconds``, the batch's time; ``wall_seconds`` is the run's share) or ``"alone: why"``.
    """
    blocker = fusion_blocker(runs)
    if blocker is None:
        trained = _fused(runs)
        if isinstance(trained, list):
            return trained
        blocker = trained
    return [_alone(run, blocker) for run in runs]


def _alone(run: Mapping[str, Any], reason: str) -> Outcome:
    try:
        outcome = fine_tune(**run)
    except TrialFailed as failed:
        return failed
    outcome.extra["fusion"] = f"alone: {reason}"
    return outcome


def _fused(runs: Sequence[Mapping[str, Any]]) -> list[Outcome] | str:
    """The fused training of ``runs``, or why their models cannot be stacked."""
    started = time.perf_counter()
    first = runs[0]
    for run in runs:
        _check_encoded(first["task"], first.get("pair_encoding", CROSS), run["train"])
    meters = [Meter() for _ in runs]
    arm = _arm(first.get("arm"), first.get("freezing"))
    models, generators = [], []
    for run, meter in zip(runs, meters, strict=True):
        device, precision, model = _set_up(
            first["model_name"], first["task"], arm, first["frozen_layers"], run["seed"], first["training"], meter
        )
        models.append(model)
        generators.append(_run_generator(device))
    blocker = stacking_blocker(models)
    if blocker is not None:
        return blocker
    stacked = StackedBert(models).to(device)
    prefix = _wire(first, models[0], device, precision)
    del models[1:]
    steps, curves = _steps(runs, stacked, RunDropout(generators, []), prefix, device, precision)
    evaluator = FusedEvaluator(stacked, prefix, _autocast(device, precision), curves, len(first["validation"]))
    stacked.train()
    n_steps = steps.run(first["learning_rate"], Schedule.of(len(first["train"]), first["training"]), evaluator)
    wall = time.perf_counter() - started
    outcomes: list[Outcome] = []
    for i in range(len(runs)):
        slot = next(s for s in [*steps.slots, *steps.failed] if s.index == i)
        if slot.failure is not None:
            outcomes.append(slot.failure)
            continue
        measured = replace(meters[i].read(device), wall_seconds=wall / len(runs))
        outcome = _outcome(curves[i], measured, prefix, n_steps, slot.loss, precision)
        outcome.extra.update(fusion="fused", fused_runs=len(runs), fused_wall_seconds=wall)
        outcomes.append(outcome)
    return outcomes


def _run_generator(device: torch.device) -> torch.Generator:
    """A generator for the run's dropout, continuing from where its seeded set-up left torch's global one."""
    generator = torch.Generator(device=device)
    generator.set_state(torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state())
    return generator


def _wire(run: Mapping[str, Any], model: torch.nn.Module, device: torch.device, precision: str) -> Any:
    """The frozen-prefix cache for the batch, wired through the first run's model (the frozen part is shared)."""
    cache = run.get("prefix_cache")
    return wire_prefix_cache(
        model,
        locate_encoder(model),
        cache=cache if cache is not None else PrefixCache(),
        model_name=run["model_name"],
        train=run["train"],
        validation=run["validation"],
        tokenizer=run["tokenizer"],
        device=device,
        precision=precision,
        training=run["training"],
        use_prefix_cache=run.get("use_prefix_cache", True),
        autocast=_autocast(device, precision),
    )


def _steps(
    runs: Sequence[Mapping[str, Any]],
    model: StackedBert,
    dropout: RunDropout,
    prefix: Any,
    device: torch.device,
    precision: str,
) -> tuple[FusedSteps, dict[int, RunCurve]]:
    """The runs' slots (data orders, curves) and the fused steps over them."""
    first = runs[0]
    task, training = first["task"], first["training"]
    schedule = Schedule.of(len(first["train"]), training)
    slots, curves = [], {}
    for i, run in enumerate(runs):
        order_seed = run.get("order_seed")
        orders = data_orders(len(run["train"]), run["seed"] if order_seed is None else order_seed)
        slots.append(RunSlot(i, run["train"], orders, run.get("on_step")))
        curves[i] = RunCurve(
            task=task,
            metric=first["metric"],
            labels=first["validation"].labels,
            select_idx=run["select_idx"],
            score_idx=run["score_idx"],
            steps_per_epoch=schedule.steps_per_epoch,
        )
    steps = FusedSteps(
        model,
        slots,
        dropout,
        first["tokenizer"],
        training,
        device,
        task.is_regression,
        prefix,
        _autocast(device, precision),
    )
    return steps, curves

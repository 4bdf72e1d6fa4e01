"""Fine-tune one model on one train subset and evaluate it along the way: the work inside a trial.

The loop is plain PyTorch rather than HF ``Trainer`` because a freeze study needs things Trainer does
not give cheaply: evaluation on the whole validation set *and* on two fixed halves at every evaluation
(for the unbiased ``heldout`` metric), the full learning curve, and no checkpoints on disk. The protocol
itself is the 2020 blog post's (Trainer defaults): AdamW, linear warm-up then linear decay to zero,
gradient clipping at 1.0, dynamic padding, evaluation every ``eval_every_epochs``.

Seeding: ``seed`` fixes the classifier-head initialisation and dropout, and the data order unless an
``order_seed`` is given (Dodge et al. 2020 seed the two apart: ``grid.order_seeds``); the data order has
a generator of its own, so ``order_seed`` changes nothing else. On CPU the same seeds give the same
metrics twice.

:func:`fine_tune` composes named steps, each in a module of its own: the set-up (here: device, precision,
seeding, the model as the arm builds it), the frozen-prefix cache wiring (``_prefix``), the training steps
(``_loop``), the evaluator (``_evaluator``: learning curve, checkpoints, predictions) and the measurements
(``_measure``: time, memory, parameter counts). The set-up stays in this module because the names it calls
(``load_classifier``, ``data_orders``, ``cpu_has_native_bf16``) are looked up here, where tests and
benchmarks replace them to watch or steer a run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import torch

from freezestats.encoder.backbone import load_classifier
from freezestats.encoder.freezing import locate_encoder
from freezestats.encoder.pair_encoding import SECOND, check_pair_encoding, drop_unused_pooler, pair_model
from freezestats.encoder.prefix_cache import PrefixCache
from freezestats.exceptions import SpecError
from freezestats.spec.pairs import CROSS
from freezestats.spec.training import TrainingSpec
from freezestats.tasks import TaskConfig
from freezestats.training._encoding import EncodedSplit, encode_split, eval_batches
from freezestats.training._evaluator import Evaluator
from freezestats.training._loop import Schedule, TrainingSteps
from freezestats.training._measure import Measurements, Meter
from freezestats.training._outcome import RunOutcome
from freezestats.training._prefix import FrozenPrefix, wire_prefix_cache
from freezestats.training.model_builder import FreezePrefix, ModelBuilder

__all__ = [
    "EncodedSplit",
    "RunOutcome",
    "data_orders",
    "encode_split",
    "fine_tune",
    "resolve_device",
    "resolve_precision",
]


def resolve_device(requested: str) -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA without one is a spec error, found before training."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise SpecError(f"`training.device` is {requested!r}, but torch sees no CUDA device on this machine.")
    return torch.device(requested)


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto`` means mixed precision wherever the hardware computes it natively, as the blog's own runs
    (fp16 autocast on a GPU) did: bf16 on GPUs that support it, fp16 on older GPUs, bf16 on CPUs with
    bf16 instructions, fp32 on other CPUs, where emulated bf16 would be slower than fp32.

    On a 2-core AVX512-BF16 CPU, bf16 autocast makes a MiniLM cell about 2.4x faster, and
    ``bench/speed.py`` compares its results with the fp32 reference. The precision that ran is recorded
    per trial, and ``precision = "fp32"`` keeps full precision.
    """
    if requested != "auto":
        if requested == "fp16" and device.type != "cuda":
            raise SpecError("`training.precision = 'fp16'` needs a CUDA device; use 'fp32' or 'bf16' on CPU.")
        return requested
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_native_bf16() else "fp32"


def cpu_has_native_bf16() -> bool:
    """x86 CPUs with AVX512-BF16 or AMX-BF16 (torch's oneDNN kernels use them); unknown means no."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)  # absent from older torch releases
    if capabilities is None:
        return False
    found = capabilities()
    return bool(found.get("avx512_bf16") or found.get("amx_bf16"))


def data_orders(n_examples: int, order_seed: int) -> Iterator[list[int]]:
    """The order of the training examples in each epoch: a new permutation per epoch, from a generator of
    its own seeded with ``order_seed`` (so the data order draws nothing from the head-init/dropout RNGs)."""
    generator = torch.Generator().manual_seed(order_seed)
    while True:
        yield torch.randperm(n_examples, generator=generator).tolist()


def fine_tune(
    *,
    model_name: str,
    task: TaskConfig,
    metric: str,
    train: EncodedSplit,
    validation: EncodedSplit,
    select_idx: np.ndarray,
    score_idx: np.ndarray,
    frozen_layers: int,
    seed: int,
    learning_rate: float,
    training: TrainingSpec,
    tokenizer: Any,
    freezing: str | None = None,
    arm: ModelBuilder | None = None,
    on_step: Callable[[int, int], None] | None = None,
    prefix_cache: PrefixCache | None = None,
    use_prefix_cache: bool = True,
    order_seed: int | None = None,
    pair_encoding: str = "cross",
    strategy: str | None = None,
    pool: EncodedSplit | None = None,
) -> RunOutcome:
    """Fine-tune ``model_name`` on ``train`` and evaluate on ``validation`` every ``eval_every_epochs``.

    ``arm`` builds the model for the level ``frozen_layers`` (default: the ``freeze`` arm with the
    freezing rule ``freezing``, itself by default ``"freeze"``; give one or the other). ``strategy`` is
    ``freezing``'s name from before (deprecated: it warns, then means the same).

    ``seed`` fixes the head initialisation and dropout; ``order_seed`` the order in which the training
    examples are visited (default: ``seed``; ``order_seed == seed`` is the same run as leaving it out).

    ``pair_encoding = "bi"`` trains a sentence-pair task as a bi-encoder (:mod:`freezestats.encoder.pair_encoding`);
    ``train`` and ``validation`` must then be bi-encoded (``encode_split(..., pair_encoding="bi")``).

    ``prefix_cache`` shares frozen-layer outputs with other trials of the same model in this process
    (see :mod:`freezestats.encoder.prefix_cache`); ``use_prefix_cache=False`` runs every layer every time, which
    gives the same predictions and exists to prove that and to measure what the cache saves.

    ``pool``: an evaluation pool, scored once at the checkpoint chosen on the select half
    (``RunOutcome.pool_predictions``).

    Raises :class:`TrialFailed` when the loss stops being finite, so the study can record the run as
    failed and go on.
    """
    meter = Meter()
    _check_encoded(task, pair_encoding, train)
    arm_ = _arm(arm, _renamed_freezing(freezing, strategy))
    device, precision, model = _set_up(model_name, task, arm_, frozen_layers, seed, training, meter, pair_encoding)
    parts = locate_encoder(model)
    autocast = _autocast(device, precision)
    prefix = wire_prefix_cache(
        model,
        parts,
        cache=prefix_cache if prefix_cache is not None else PrefixCache(),
        model_name=model_name,
        train=train,
        validation=validation,
        tokenizer=tokenizer,
        device=device,
        precision=precision,
        training=training,
        use_prefix_cache=use_prefix_cache,
        autocast=autocast,
    )
    schedule = Schedule.of(len(train), training)
    evaluator = Evaluator(
        model,
        parts,
        prefix,
        autocast,
        task=task,
        metric=metric,
        labels=validation.labels,
        select_idx=select_idx,
        score_idx=score_idx,
        steps_per_epoch=schedule.steps_per_epoch,
        pool=None if pool is None else eval_batches(tokenizer, pool, training.eval_batch_size, device),
    )
    steps = TrainingSteps(
        model, parts, train, tokenizer, training, device, precision, task.is_regression, prefix, autocast
    )
    orders = data_orders(len(train), seed if order_seed is None else order_seed)
    n_steps, final_loss = steps.run(learning_rate, schedule, orders, evaluator, on_step)
    pool_predictions = evaluator.pool_predictions()  # inside the run's measured time: it is part of its cost
    outcome = _outcome(evaluator, meter.read(device), prefix, n_steps, final_loss, precision)
    outcome.pool_predictions = pool_predictions
    return outcome


def _outcome(
    evaluator: Evaluator, measured: Measurements, prefix: FrozenPrefix, n_steps: int, final_loss: float, precision: str
) -> RunOutcome:
    """The run's outcome: the evaluator's curve and checkpoints, the measurements, what the cache served."""
    summary = evaluator.summary()
    return RunOutcome(
        summary=summary,
        curve=evaluator.curve,
        final_metrics=dict(evaluator.curve[-1]["metrics"]),
        trainable_params=measured.trainable_params,
        total_params=measured.total_params,
        n_steps=n_steps,
        wall_seconds=measured.wall_seconds,
        peak_mem_bytes=measured.peak_mem_bytes,
        peak_mem_kind=measured.peak_mem_kind,
        device=measured.device,
        precision=precision,
        final_train_loss=final_loss,
        checkpoints=evaluator.checkpoints(summary),
        extra=prefix.extra(),
    )


def _arm(arm: ModelBuilder | None, freezing: str | None) -> ModelBuilder:
    """The arm of a call: ``arm``, or the ``freeze`` arm with ``freezing`` (the call before arms existed)."""
    if arm is not None and freezing is not None:
        raise TypeError("fine_tune() takes `arm` or `freezing` (the freeze arm's option), not both.")
    if arm is not None:
        return arm
    return FreezePrefix("freeze" if freezing is None else freezing)


def _renamed_freezing(freezing: str | None, strategy: str | None) -> str | None:
    """``freezing``, or ``strategy`` (its name before) with a ``DeprecationWarning``; both is an error."""
    if strategy is None:
        return freezing
    if freezing is not None:
        raise TypeError("fine_tune() takes `freezing` or `strategy` (its deprecated name), not both.")
    warnings.warn("fine_tune(strategy=...) is deprecated: use freezing=... (the same)", DeprecationWarning, 3)
    return strategy


def _check_encoded(task: TaskConfig, pair_encoding: str, train: EncodedSplit) -> None:
    """A bi-encoder needs bi-encoded examples, a cross-encoder joint ones: a mix-up fails before training."""
    bi = check_pair_encoding(pair_encoding) != CROSS and task.is_pair
    if len(train) and bi != ("input_ids" + SECOND in train.features[0]):
        wanted = "bi-encoded (encode_split(..., pair_encoding='bi'))" if bi else "encoded as one input"
        raise SpecError(f"`pair_encoding = {pair_encoding!r}` for task '{task.name}' needs examples {wanted}.")


def _set_up(
    model_name: str,
    task: TaskConfig,
    arm: ModelBuilder,
    level: int,
    seed: int,
    training: TrainingSpec,
    meter: Meter,
    pair_encoding: str = CROSS,
) -> tuple[torch.device, str, torch.nn.Module]:
    """Device and precision, the seed, then the model as the arm builds it for ``level``, on its device.

    The seed is set just before the pretrained model is loaded, so that the head initialisation (drawn
    while loading, then the bi-encoder's head, if any) and then dropout follow from ``seed`` alone.
    """
    from transformers import set_seed

    device = resolve_device(training.device)
    precision = resolve_precision(training.precision, device)
    meter.watch(device)
    set_seed(seed)  # python, numpy and torch RNGs: head init and dropout
    model = pair_model(load_classifier(model_name, task.num_labels, task.is_regression), task, pair_encoding)
    drop_unused_pooler([model])
    model = arm.prepare_model(model, level)
    meter.count(model)
    model.to(device)
    return device, precision, model


def _autocast(device: torch.device, precision: str) -> Callable[[], AbstractContextManager[Any]]:
    """A factory of autocast contexts for ``precision`` (a no-op context under fp32)."""
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def autocast() -> AbstractContextManager[Any]:
        return torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)

    return autocast

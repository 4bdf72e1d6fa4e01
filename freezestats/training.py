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
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from freezestats.backbone import load_classifier
from freezestats.exceptions import SpecError, TrialFailed
from freezestats.freezing import count_parameters, get_strategy, locate_encoder
from freezestats.metrics import CurveSummary, compute_metrics, summarize_curve
from freezestats.predictions import Checkpoint
from freezestats.prefix_cache import EvalBatch, PrefixCache, forward_from, frozen_depth, pad_hidden
from freezestats.spec import TrainingSpec
from freezestats.tasks import TaskConfig

__all__ = [
    "EncodedSplit",
    "RunOutcome",
    "data_orders",
    "encode_split",
    "fine_tune",
    "resolve_device",
    "resolve_precision",
]


@dataclass(frozen=True)
class EncodedSplit:
    """A tokenized split: one dict of token lists per example (unpadded), and the labels.

    ``name`` and ``ids`` (each example's position in the split it was cut from) let the frozen-prefix
    cache recognise the same examples in another trial's subset.
    """

    features: tuple[dict[str, list[int]], ...]
    labels: np.ndarray
    name: str = ""
    ids: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.features)

    def example_ids(self) -> np.ndarray:
        return np.arange(len(self)) if self.ids is None else self.ids

    def subset(self, indices: Sequence[int]) -> EncodedSplit:
        index = np.asarray(indices, dtype=int)
        return EncodedSplit(
            tuple(self.features[i] for i in indices), self.labels[index], self.name, self.example_ids()[index]
        )


@dataclass
class RunOutcome:
    """Everything one fine-tuning run produces that the study database keeps."""

    summary: CurveSummary
    curve: list[dict[str, Any]]
    final_metrics: dict[str, float]
    trainable_params: int
    total_params: int
    n_steps: int
    wall_seconds: float
    peak_mem_bytes: int
    peak_mem_kind: str
    device: str
    precision: str
    final_train_loss: float
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)  # best, heldout, final: see predictions.py
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def final_predictions(self) -> np.ndarray:
        return self.checkpoints["final"].predictions

    @property
    def final_logits(self) -> np.ndarray:
        return self.checkpoints["final"].logits


def encode_split(
    texts: Sequence[Sequence[str]], labels: np.ndarray, tokenizer: Any, max_length: int, name: str = ""
) -> EncodedSplit:
    """Tokenize once, without padding (padding happens per batch, to the batch's longest sequence).

    ``texts`` holds one sequence of strings per text column; two columns are encoded as a sequence pair.
    """
    columns = [list(column) for column in texts]
    encoded = tokenizer(*columns, truncation=True, max_length=max_length, padding=False)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
    features = tuple({k: encoded[k][i] for k in keys} for i in range(len(columns[0])))
    return EncodedSplit(features=features, labels=np.asarray(labels), name=name)


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


def fine_tune(
    *,
    model_name: str,
    task: TaskConfig,
    metric: str,
    train: EncodedSplit,
    validation: EncodedSplit,
    select_idx: np.ndarray,
    score_idx: np.ndarray,
    strategy: str,
    frozen_layers: int,
    seed: int,
    learning_rate: float,
    training: TrainingSpec,
    tokenizer: Any,
    on_step: Callable[[int, int], None] | None = None,
    prefix_cache: PrefixCache | None = None,
    use_prefix_cache: bool = True,
    order_seed: int | None = None,
) -> RunOutcome:
    """Fine-tune ``model_name`` on ``train`` and evaluate on ``validation`` every ``eval_every_epochs``.

    ``seed`` fixes the head initialisation and dropout; ``order_seed`` the order in which the training
    examples are visited (default: ``seed``; ``order_seed == seed`` is the same run as leaving it out).

    ``prefix_cache`` shares frozen-layer outputs with other trials of the same model in this process
    (see :mod:`freezestats.prefix_cache`); ``use_prefix_cache=False`` runs every layer every time, which
    gives the same predictions and exists to prove that and to measure what the cache saves.

    Raises :class:`TrialFailed` when the loss stops being finite, so the study can record the run as
    failed and go on.
    """
    from transformers import get_linear_schedule_with_warmup, set_seed

    started = time.perf_counter()
    device = resolve_device(training.device)
    precision = resolve_precision(training.precision, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    set_seed(seed)  # python, numpy and torch RNGs: head init and dropout
    model = load_classifier(model_name, task.num_labels, task.is_regression)
    get_strategy(strategy)(model, frozen_layers)
    trainable, total = count_parameters(model)
    model.to(device)
    parts = locate_encoder(model)
    depth = frozen_depth(parts)
    frozen_prefix = [] if depth is None else [*parts.embeddings, *parts.layers[:depth]]
    dropout_off = training.frozen_dropout == "off"

    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def autocast() -> Any:
        return torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)

    cache = prefix_cache if prefix_cache is not None else PrefixCache()
    eval_key = (
        model_name,
        validation.name or id(validation),
        len(validation),
        str(device),
        precision,
        training.eval_batch_size,
    )
    batches = cache.eval_batches(
        eval_key, lambda: _eval_batches(tokenizer, validation, training.eval_batch_size, device)
    )
    eval_hidden = train_hidden = None
    if use_prefix_cache and depth is not None:
        model.eval()
        with autocast():
            eval_hidden = cache.eval_hidden(model, parts, eval_key, batches, depth)
        if eval_hidden is not None and dropout_off and tokenizer.padding_side == "right":
            train_hidden = _cached_train_states(cache, model, parts, train, tokenizer, device, depth, training)

    steps_per_epoch = math.ceil(len(train) / training.batch_size)
    total_steps = max(1, round(training.epochs * steps_per_epoch))
    warmup_steps = round(training.warmup_epochs * steps_per_epoch)
    eval_interval = max(1, round(training.eval_every_epochs * steps_per_epoch))

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = _adamw(params, learning_rate, training.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    epoch_orders = data_orders(len(train), seed if order_seed is None else order_seed)
    label_dtype = torch.float32 if task.is_regression else torch.long
    train_ids = train.example_ids()

    curve: list[dict[str, Any]] = []
    evaluated: list[Checkpoint] = []  # one per curve point; 20 small arrays, picked from after training
    step = 0
    loss_value = float("nan")
    while step < total_steps:
        permutation = next(epoch_orders)
        for start in range(0, len(permutation), training.batch_size):
            if step >= total_steps:
                break
            batch_idx = permutation[start : start + training.batch_size]
            batch = _collate(tokenizer, [train.features[i] for i in batch_idx], device)
            labels = torch.as_tensor(train.labels[batch_idx], dtype=label_dtype, device=device)
            model.train()
            if dropout_off:
                for module in frozen_prefix:
                    module.eval()
            with autocast():
                if train_hidden is not None:
                    states = [train_hidden[int(train_ids[i])] for i in batch_idx]
                    hidden = pad_hidden(states, batch["input_ids"].shape[1])
                    loss = forward_from(model, parts, batch, depth, hidden, labels=labels).loss
                else:
                    loss = model(**batch, labels=labels).loss
            if not torch.isfinite(loss):
                raise TrialFailed(f"The training loss became {loss.item()} at step {step + 1} of {total_steps}.")
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            if training.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, training.max_grad_norm)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            step += 1
            loss_value = float(loss.detach())
            if step % eval_interval == 0 or step == total_steps:
                model.eval()
                with autocast():
                    logits = _predict(model, parts, batches, len(validation), depth, eval_hidden)
                predictions = _to_predictions(logits, task)
                evaluated.append(Checkpoint(step, predictions, logits))
                curve.append(
                    _evaluation(
                        task,
                        metric,
                        predictions,
                        validation.labels,
                        select_idx,
                        score_idx,
                        step,
                        step / steps_per_epoch,
                        loss_value,
                    )
                )
            if on_step is not None:
                on_step(step, total_steps)

    summary = summarize_curve(
        [point["full"] for point in curve], [point["select"] for point in curve], [point["score"] for point in curve]
    )
    if device.type == "cuda":
        peak, peak_kind = int(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    else:
        peak, peak_kind = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_max_rss"
    return RunOutcome(
        summary=summary,
        curve=curve,
        final_metrics=dict(curve[-1]["metrics"]),
        trainable_params=trainable,
        total_params=total,
        n_steps=step,
        wall_seconds=time.perf_counter() - started,
        peak_mem_bytes=peak,
        peak_mem_kind=peak_kind,
        device=str(device) if device.type == "cpu" else f"{device}:{torch.cuda.get_device_name(device)}",
        precision=precision,
        final_train_loss=loss_value,
        checkpoints={
            "best": evaluated[summary.best_step],
            "heldout": evaluated[summary.heldout_step],
            "final": evaluated[-1],
        },
        extra={
            "eval_prefix_cached": eval_hidden is not None,
            "train_prefix_cached": train_hidden is not None,
            "prefix_depth": depth,
        },
    )


def data_orders(n_examples: int, order_seed: int) -> Iterator[list[int]]:
    """The order of the training examples in each epoch: a new permutation per epoch, from a generator of
    its own seeded with ``order_seed`` (so the data order draws nothing from the head-init/dropout RNGs)."""
    generator = torch.Generator().manual_seed(order_seed)
    while True:
        yield torch.randperm(n_examples, generator=generator).tolist()


def _adamw(params: list[torch.nn.Parameter], learning_rate: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW, fused where torch has the kernel: the same update as HF Trainer's default (``adamw_torch_fused``
    since torch 2.8), about 11% of a MiniLM training step faster on CPU than the per-tensor loop."""
    try:
        return torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):  # older torch: no fused kernel for this device
        return torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay)


def _collate(tokenizer: Any, features: list[dict[str, list[int]]], device: torch.device) -> dict[str, torch.Tensor]:
    batch = tokenizer.pad(features, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in batch.items()}


def _eval_batches(tokenizer: Any, split: EncodedSplit, batch_size: int, device: torch.device) -> list[EvalBatch]:
    """Length-sorted, dynamically padded batches of the whole split (made once per split and process)."""
    order = sorted(range(len(split)), key=lambda i: len(split.features[i]["input_ids"]))
    return [
        EvalBatch(tuple(chunk), _collate(tokenizer, [split.features[i] for i in chunk], device))
        for chunk in (order[start : start + batch_size] for start in range(0, len(order), batch_size))
    ]


def _cached_train_states(
    cache: PrefixCache,
    model: torch.nn.Module,
    parts: Any,
    train: EncodedSplit,
    tokenizer: Any,
    device: torch.device,
    depth: int,
    training: TrainingSpec,
) -> dict[int, torch.Tensor]:
    """Frozen-prefix outputs of every training example (frozen layers in eval mode: ``frozen_dropout='off'``)."""
    position = {int(example): i for i, example in enumerate(train.example_ids())}
    by_length = sorted(position, key=lambda example: len(train.features[position[example]]["input_ids"]))
    return cache.train_hidden(
        model,
        parts,
        (train.name or id(train), str(device)),
        by_length,
        lambda chunk: _collate(tokenizer, [train.features[position[example]] for example in chunk], device),
        depth,
        training.eval_batch_size,
    )


@torch.no_grad()
def _predict(
    model: torch.nn.Module,
    parts: Any,
    batches: list[EvalBatch],
    n_examples: int,
    depth: int | None,
    hidden: list[torch.Tensor] | None,
) -> np.ndarray:
    """Logits for every example, in the split's order; with ``hidden``, only the unfrozen layers run."""
    result: np.ndarray | None = None
    for i, batch in enumerate(batches):
        if hidden is not None:
            logits = forward_from(model, parts, batch.inputs, depth, hidden[i]).logits
        else:
            logits = model(**batch.inputs).logits
        values = logits.float().cpu().numpy()
        if result is None:
            result = np.empty((n_examples, values.shape[1]), dtype=values.dtype)
        result[np.asarray(batch.positions)] = values
    return result


def _to_predictions(logits: np.ndarray, task: TaskConfig) -> np.ndarray:
    return logits[:, 0].astype(np.float64) if task.is_regression else logits.argmax(axis=1).astype(np.int64)


def _evaluation(
    task: TaskConfig,
    metric: str,
    predictions: np.ndarray,
    labels: np.ndarray,
    select_idx: np.ndarray,
    score_idx: np.ndarray,
    step: int,
    epoch: float,
    train_loss: float,
) -> dict[str, Any]:
    """One point of the learning curve: every task metric on the whole set, the primary one on both halves."""
    metrics = compute_metrics(task.metrics, predictions, labels)
    return {
        "step": step,
        "epoch": round(epoch, 4),
        "train_loss": train_loss,
        "metrics": metrics,
        "full": metrics[metric],
        "select": compute_metrics([metric], predictions[select_idx], labels[select_idx])[metric],
        "score": compute_metrics([metric], predictions[score_idx], labels[score_idx])[metric],
    }

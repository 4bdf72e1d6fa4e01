"""Fine-tune one model on one train subset and evaluate it along the way: the work inside a trial.

The loop is plain PyTorch rather than HF ``Trainer`` because a freeze study needs things Trainer does
not give cheaply: evaluation on the whole validation set *and* on two fixed halves at every evaluation
(for the unbiased ``heldout`` metric), the full learning curve, and no checkpoints on disk. The protocol
itself is the 2020 blog post's (Trainer defaults): AdamW, linear warm-up then linear decay to zero,
gradient clipping at 1.0, dynamic padding, evaluation every ``eval_every_epochs``.

Seeding: ``seed`` fixes the classifier-head initialisation, the data order and dropout; on CPU the same
seed gives the same metrics twice.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from freezestats.backbone import load_classifier
from freezestats.exceptions import SpecError, TrialFailed
from freezestats.freezing import count_parameters, get_strategy
from freezestats.metrics import CurveSummary, compute_metrics, summarize_curve
from freezestats.spec import TrainingSpec
from freezestats.tasks import TaskConfig

__all__ = ["EncodedSplit", "RunOutcome", "encode_split", "fine_tune", "resolve_device", "resolve_precision"]


@dataclass(frozen=True)
class EncodedSplit:
    """A tokenized split: one dict of token lists per example (unpadded), and the labels."""

    features: tuple[dict[str, list[int]], ...]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.features)

    def subset(self, indices: Sequence[int]) -> EncodedSplit:
        return EncodedSplit(tuple(self.features[i] for i in indices), self.labels[np.asarray(indices, dtype=int)])


@dataclass
class RunOutcome:
    """Everything one fine-tuning run produces that the study database keeps."""

    summary: CurveSummary
    curve: list[dict[str, Any]]
    final_metrics: dict[str, float]
    final_predictions: np.ndarray
    final_logits: np.ndarray
    trainable_params: int
    total_params: int
    n_steps: int
    wall_seconds: float
    peak_mem_bytes: int
    peak_mem_kind: str
    device: str
    precision: str
    final_train_loss: float
    extra: dict[str, Any] = field(default_factory=dict)


def encode_split(texts: Sequence[Sequence[str]], labels: np.ndarray, tokenizer: Any, max_length: int) -> EncodedSplit:
    """Tokenize once, without padding (padding happens per batch, to the batch's longest sequence).

    ``texts`` holds one sequence of strings per text column; two columns are encoded as a sequence pair.
    """
    columns = [list(column) for column in texts]
    encoded = tokenizer(*columns, truncation=True, max_length=max_length, padding=False)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
    features = tuple({k: encoded[k][i] for k in keys} for i in range(len(columns[0])))
    return EncodedSplit(features=features, labels=np.asarray(labels))


def resolve_device(requested: str) -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA without one is a spec error, found before training."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise SpecError(f"`training.device` is {requested!r}, but torch sees no CUDA device on this machine.")
    return torch.device(requested)


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto`` means bf16 on GPUs that support it, fp16 on older GPUs, fp32 on CPU."""
    if requested != "auto":
        if requested == "fp16" and device.type != "cuda":
            raise SpecError("`training.precision = 'fp16'` needs a CUDA device; use 'fp32' or 'bf16' on CPU.")
        return requested
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


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
) -> RunOutcome:
    """Fine-tune ``model_name`` on ``train`` and evaluate on ``validation`` every ``eval_every_epochs``.

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

    steps_per_epoch = math.ceil(len(train) / training.batch_size)
    total_steps = max(1, round(training.epochs * steps_per_epoch))
    warmup_steps = round(training.warmup_epochs * steps_per_epoch)
    eval_interval = max(1, round(training.eval_every_epochs * steps_per_epoch))

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=training.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    order_rng = torch.Generator().manual_seed(seed)
    label_dtype = torch.float32 if task.is_regression else torch.long

    curve: list[dict[str, Any]] = []
    step = 0
    loss_value = float("nan")
    while step < total_steps:
        permutation = torch.randperm(len(train), generator=order_rng).tolist()
        for start in range(0, len(permutation), training.batch_size):
            if step >= total_steps:
                break
            batch_idx = permutation[start : start + training.batch_size]
            batch = _collate(tokenizer, [train.features[i] for i in batch_idx], device)
            labels = torch.as_tensor(train.labels[batch_idx], dtype=label_dtype, device=device)
            model.train()
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
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
                logits = _predict(model, tokenizer, validation, training.eval_batch_size, device, amp_dtype)
                predictions = _to_predictions(logits, task)
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
        final_predictions=predictions,
        final_logits=logits,
        trainable_params=trainable,
        total_params=total,
        n_steps=step,
        wall_seconds=time.perf_counter() - started,
        peak_mem_bytes=peak,
        peak_mem_kind=peak_kind,
        device=str(device) if device.type == "cpu" else f"{device}:{torch.cuda.get_device_name(device)}",
        precision=precision,
        final_train_loss=loss_value,
    )


def _collate(tokenizer: Any, features: list[dict[str, list[int]]], device: torch.device) -> dict[str, torch.Tensor]:
    batch = tokenizer.pad(features, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def _predict(
    model: torch.nn.Module,
    tokenizer: Any,
    split: EncodedSplit,
    batch_size: int,
    device: torch.device,
    amp_dtype: torch.dtype | None,
) -> np.ndarray:
    """Logits for every example, in the split's order; batches are length-sorted to pad little."""
    model.eval()
    order = sorted(range(len(split)), key=lambda i: len(split.features[i]["input_ids"]))
    outputs: list[np.ndarray] = []
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = _collate(tokenizer, [split.features[i] for i in chunk], device)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(**batch).logits
        outputs.append(logits.float().cpu().numpy())
    stacked = np.concatenate(outputs)
    result = np.empty_like(stacked)
    result[np.asarray(order)] = stacked
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

"""The reference to beat: one cell of the 2020 blog post's protocol, run with HF ``Trainer``, one process.

This is the recipe as the blog published it, not freezestats' loop: ``Trainer`` with evaluation every
half epoch (``eval_strategy="steps"``), a checkpoint written at every evaluation (``save_total_limit=1``,
``load_best_model_at_end``, ``metric_for_best_model="accuracy"``), AdamW at 5e-5, batch 16, 10 epochs,
one epoch of linear warm-up then linear decay, and the blog's own freezing code (``freeze_layer_count``:
-1 freezes the embeddings, k > 0 the embeddings and the first k layers, 0 nothing). Evaluation batches
use Trainer's default size (8) and order (the split's), padded per batch by ``DataCollatorWithPadding``.

Only the training examples are shared with freezestats (the same nested stratified subset, so the two
are compared on the same data); everything else is Trainer's.

``--precision bf16`` sets ``TrainingArguments(bf16=True)``: on CPU (``use_cpu=True``, as here whenever
there is no CUDA) Trainer hands ``mixed_precision="bf16"`` to Accelerate, which wraps the model's forward
in ``torch.autocast("cpu", dtype=torch.bfloat16)`` (outputs cast back to fp32) for training and evaluation
alike: the same autocast freezestats' ``precision = "bf16"`` uses. ``fp32`` (the default) is Trainer's own
default.

Besides the result it reports, for ``bench/speed.py``'s FLOP count, the padded tokens of every batch
the model saw in training and in evaluation (a forward pre-hook: batches, sequences, tokens, sum of b*s^2,
unpadded tokens), the time inside training steps (``on_step_begin`` .. ``on_step_end``: forward, backward,
clipping, optimizer; the data loader's collation before it is not included) and the evaluations'
``eval_runtime``. Prints one JSON line::

    python bench/reference_trainer.py --task sst2 --size 100 --frozen 0 --seed 1 --data-dir ../shared/data/glue
    python bench/reference_trainer.py --task sst2 --size 50 --frozen 0 --precision bf16 --max-steps 3 --max-eval 64 ...
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time

STARTED = time.perf_counter()  # before the heavy imports: their cost is part of a process-per-cell recipe

import numpy as np  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from freezestats.encoder.backbone import resolve_model  # noqa: E402
from freezestats.spec.study import load_spec  # noqa: E402
from freezestats.tasks import get_task  # noqa: E402
from freezestats.tasks.data import load_task_data  # noqa: E402
from freezestats.tasks.subsets import nested_subsets  # noqa: E402

COUNT_KEYS = ("batches", "seqs", "tokens", "tokens_sq", "real_tokens")  # as bench/flops.py counts them


def freeze_like_the_blog(model: torch.nn.Module, freeze_layer_count: int) -> None:
    """The blog's freezing code, written for ``model.roberta``; ``base_model`` is the same module here."""
    base = model.base_model
    if freeze_layer_count:
        for param in base.embeddings.parameters():
            param.requires_grad = False
        if freeze_layer_count != -1:
            for layer in base.encoder.layer[:freeze_layer_count]:
                for param in layer.parameters():
                    param.requires_grad = False


class StepTimer(TrainerCallback):
    """Seconds inside training steps: from ``on_step_begin`` to ``on_step_end`` (no evaluation, no saving)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._began = 0.0

    def on_step_begin(self, args, state, control, **kwargs) -> None:  # type: ignore[override]
        self._began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs) -> None:  # type: ignore[override]
        self.seconds += time.perf_counter() - self._began


def count_tokens(model: torch.nn.Module) -> dict[str, dict[str, int]]:
    """Padded tokens of every batch the model runs, apart for training (``model.training``) and evaluation."""
    counts = {"train": dict.fromkeys(COUNT_KEYS, 0), "eval": dict.fromkeys(COUNT_KEYS, 0)}

    def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return
        seqs, length = int(ids.shape[0]), int(ids.shape[1])
        mask = kwargs.get("attention_mask")
        entry = counts["train" if module.training else "eval"]
        entry["batches"] += 1
        entry["seqs"] += seqs
        entry["tokens"] += seqs * length
        entry["tokens_sq"] += seqs * length * length
        entry["real_tokens"] += int(mask.sum()) if mask is not None else seqs * length

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counts


def run_cell(args: argparse.Namespace) -> dict:
    spec = load_spec(args.spec)
    task = get_task(args.task)
    data = load_task_data(task, args.data_dir)
    sizes = [s for s in spec.grid.train_sizes if isinstance(s, int)]
    rows = nested_subsets(data.train_labels, sizes, draw_seed=0, regression=task.is_regression)[args.size]
    train = data.train.iloc[rows]
    columns = list(task.text_columns)
    model_path = resolve_model(spec.model.name)
    tokenizer = AutoTokenizer.from_pretrained(model_path)

    def tokenize(batch: dict) -> dict:
        return tokenizer(*(batch[c] for c in columns), truncation=True, max_length=spec.training.max_length)

    def as_dataset(frame) -> Dataset:
        return Dataset.from_dict({**{c: frame[c].tolist() for c in columns}, "label": frame["label"].tolist()}).map(
            tokenize, batched=True, remove_columns=columns
        )

    validation = data.validation.iloc[: args.max_eval] if args.max_eval else data.validation
    train_ds, val_ds = as_dataset(train), as_dataset(validation)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=task.num_labels)
    freeze_like_the_blog(model, args.frozen)
    counts = count_tokens(model)
    timer = StepTimer()

    steps_per_epoch = math.ceil(len(train_ds) / spec.training.batch_size)
    eval_steps = max(1, round(spec.training.eval_every_epochs * steps_per_epoch))

    def accuracy(prediction) -> dict:
        return {"accuracy": float((np.argmax(prediction.predictions, axis=1) == prediction.label_ids).mean())}

    with tempfile.TemporaryDirectory() as output_dir:
        training_args = TrainingArguments(
            output_dir=output_dir,
            num_train_epochs=spec.training.epochs,
            per_device_train_batch_size=spec.training.batch_size,
            learning_rate=spec.training.learning_rate,
            weight_decay=spec.training.weight_decay,
            max_grad_norm=spec.training.max_grad_norm,
            warmup_steps=round(spec.training.warmup_epochs * steps_per_epoch),
            lr_scheduler_type="linear",
            eval_strategy="steps",
            eval_steps=eval_steps,
            save_strategy="steps",
            save_steps=eval_steps,
            save_total_limit=1,
            load_best_model_at_end=True,
            metric_for_best_model="accuracy",
            logging_strategy="no",
            report_to="none",
            seed=args.seed,
            use_cpu=not torch.cuda.is_available(),
            bf16=args.precision == "bf16",
            max_steps=args.max_steps or -1,  # a cap for smoke tests only; the recipe is the epochs
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=train_ds,
            eval_dataset=val_ds,
            data_collator=DataCollatorWithPadding(tokenizer),
            compute_metrics=accuracy,
            callbacks=[timer],
        )
        trained = trainer.train()
        evals = [entry for entry in trainer.state.log_history if "eval_accuracy" in entry]
        return {
            "task": args.task,
            "train_size": args.size,
            "frozen_layers": args.frozen,
            "seed": args.seed,
            "best_dev": trainer.state.best_metric,
            "n_steps": trainer.state.global_step,
            "n_evals": len(evals),
            "precision": args.precision,
            "train_runtime": trained.metrics.get("train_runtime"),
            "train_step_seconds": timer.seconds,
            "eval_seconds": sum(entry.get("eval_runtime", 0.0) for entry in evals),
            "counts": counts,
            "process_seconds": time.perf_counter() - STARTED,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--frozen", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--spec", default="study/blog2020-minilm.toml")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: Trainer's bf16=True")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (smoke tests only)")
    parser.add_argument("--max-eval", type=int, default=0, help="evaluate on the first N examples (smoke tests only)")
    print(json.dumps(run_cell(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()

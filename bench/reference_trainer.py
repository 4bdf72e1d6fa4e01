"""The reference to beat: one cell of the 2020 blog post's protocol, run with HF ``Trainer``, one process.

This is the recipe as the blog published it, not freezestats' loop: ``Trainer`` with evaluation every
half epoch (``eval_strategy="steps"``), a checkpoint written at every evaluation (``save_total_limit=1``,
``load_best_model_at_end``, ``metric_for_best_model="accuracy"``), AdamW at 5e-5, batch 16, 10 epochs,
one epoch of linear warm-up then linear decay, and the blog's own freezing code (``freeze_layer_count``:
-1 freezes the embeddings, k > 0 the embeddings and the first k layers, 0 nothing). Evaluation batches
use Trainer's default size (8) and order (the split's), padded per batch by ``DataCollatorWithPadding``.

Only the training examples are shared with freezestats (the same nested stratified subset, so the two
are compared on the same data); everything else is Trainer's. Prints one JSON line::

    python bench/reference_trainer.py --task sst2 --size 100 --frozen 0 --seed 1 --data-dir ../shared/data/glue
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
    TrainingArguments,
)

from freezestats.backbone import resolve_model  # noqa: E402
from freezestats.data import load_task_data  # noqa: E402
from freezestats.spec import load_spec  # noqa: E402
from freezestats.subsets import nested_subsets  # noqa: E402
from freezestats.tasks import get_task  # noqa: E402


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

    train_ds, val_ds = as_dataset(train), as_dataset(data.validation)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=task.num_labels)
    freeze_like_the_blog(model, args.frozen)

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
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=train_ds,
            eval_dataset=val_ds,
            data_collator=DataCollatorWithPadding(tokenizer),
            compute_metrics=accuracy,
        )
        trainer.train()
        n_evals = sum(1 for entry in trainer.state.log_history if "eval_accuracy" in entry)
        return {
            "task": args.task,
            "train_size": args.size,
            "frozen_layers": args.frozen,
            "seed": args.seed,
            "best_dev": trainer.state.best_metric,
            "n_steps": trainer.state.global_step,
            "n_evals": n_evals,
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
    print(json.dumps(run_cell(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()

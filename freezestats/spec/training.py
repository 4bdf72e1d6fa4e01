"""The spec's ``[training]`` table: the fine-tuning protocol that every cell of a study shares.

Kept apart from :mod:`freezestats.spec.study` because it is the table with the most keys, each a number with a range
or a choice, read by the training code (:mod:`freezestats.training`, :mod:`freezestats.training.shared_encoder`) with no
need for the rest of the spec; its defaults are the 2020 blog post's protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freezestats.exceptions import SpecError
from freezestats.spec.parser import _Parser

__all__ = ["DEVICES", "PRECISIONS", "TrainingSpec", "parse_training"]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainingSpec:
    """The fine-tuning protocol shared by every cell (defaults are the 2020 blog post's)."""

    epochs: float = 10.0
    batch_size: int = 16
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_epochs: float = 1.0
    eval_every_epochs: float = 0.5
    eval_batch_size: int = 128
    max_length: int = 128
    precision: str = "auto"
    device: str = "auto"
    frozen_dropout: str = "on"
    """``on``: frozen layers keep dropout while training (the blog's protocol). ``off``: they run in eval
    mode, which changes the experiment but makes their outputs cacheable (much faster at deep freezing)."""


def parse_training(p: _Parser, tr: Mapping[str, Any]) -> TrainingSpec:
    """``[training]``: the fine-tuning protocol every cell shares."""
    p.keys(tr, "training.", set(TrainingSpec.__dataclass_fields__))
    d = TrainingSpec()
    training = TrainingSpec(
        epochs=p.number(tr.get("epochs", d.epochs), "training.epochs", positive=True),
        batch_size=p.integer(tr.get("batch_size", d.batch_size), "training.batch_size", low=1),
        learning_rate=p.number(tr.get("learning_rate", d.learning_rate), "training.learning_rate", positive=True),
        weight_decay=p.number(tr.get("weight_decay", d.weight_decay), "training.weight_decay"),
        max_grad_norm=p.number(tr.get("max_grad_norm", d.max_grad_norm), "training.max_grad_norm"),
        warmup_epochs=p.number(tr.get("warmup_epochs", d.warmup_epochs), "training.warmup_epochs"),
        eval_every_epochs=p.number(
            tr.get("eval_every_epochs", d.eval_every_epochs), "training.eval_every_epochs", positive=True
        ),
        eval_batch_size=p.integer(tr.get("eval_batch_size", d.eval_batch_size), "training.eval_batch_size", low=1),
        max_length=p.integer(tr.get("max_length", d.max_length), "training.max_length", low=8),
        precision=p.choice(tr.get("precision", d.precision), "training.precision", PRECISIONS),
        device=p.choice(tr.get("device", d.device), "training.device", DEVICES),
        frozen_dropout=p.choice(tr.get("frozen_dropout", d.frozen_dropout), "training.frozen_dropout", ("on", "off")),
    )
    if training.warmup_epochs > training.epochs:
        raise SpecError(
            "`training.warmup_epochs` must be <= `training.epochs`, but got "
            f"warmup_epochs={training.warmup_epochs}, epochs={training.epochs} ({p.source})."
        )
    return training

"""What one fine-tuning run returns to the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from freezestats.tasks.curve import CurveSummary
from freezestats.training.predictions import Checkpoint

__all__ = ["RunOutcome"]


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
    pool_predictions: np.ndarray | None = None  # the evaluation pool's, at the checkpoint chosen on the select half

    @property
    def final_predictions(self) -> np.ndarray:
        return self.checkpoints["final"].predictions

    @property
    def final_logits(self) -> np.ndarray:
        return self.checkpoints["final"].logits

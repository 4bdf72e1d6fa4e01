"""The measurements of a run that are not metrics: time, peak memory, device, parameter counts.

Kept apart from the training steps so that every arm is measured the same way: the clock starts before
the model is loaded, the parameter counts are taken once the arm has built the model, and peak memory is
the device's own counter (CUDA) or the process's peak resident size (CPU).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

import torch

from freezestats.encoder.freezing import count_parameters

__all__ = ["Measurements", "Meter"]


@dataclass(frozen=True)
class Measurements:
    """What :meth:`Meter.read` returns at the end of a run."""

    wall_seconds: float
    peak_mem_bytes: int
    peak_mem_kind: str
    device: str
    trainable_params: int
    total_params: int


class Meter:
    """Started when a run starts; told the device and the built model; read when the run ends."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.trainable = self.total = 0

    def watch(self, device: torch.device) -> None:
        """Count peak memory from now on (CUDA's counter is per process, so reset it for this run)."""
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def count(self, model: torch.nn.Module) -> None:
        """Trainable and total parameters of the model as the arm built it (shared parameters once)."""
        self.trainable, self.total = count_parameters(model)

    def read(self, device: torch.device) -> Measurements:
        if device.type == "cuda":
            peak, peak_kind = int(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
        else:
            peak, peak_kind = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_max_rss"
        return Measurements(
            wall_seconds=time.perf_counter() - self.started,
            peak_mem_bytes=peak,
            peak_mem_kind=peak_kind,
            device=str(device) if device.type == "cpu" else f"{device}:{torch.cuda.get_device_name(device)}",
            trainable_params=self.trainable,
            total_params=self.total,
        )

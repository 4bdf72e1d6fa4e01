"""How many runs of a cell fit in memory at once: ``--fuse auto`` claims no more than this.

A fused batch of K runs holds K copies of everything a run trains (weight, gradient and AdamW's two moments,
fp32: 16 bytes a parameter), K full models while they are built and stacked (4 bytes a parameter), and K runs'
activations of a training step. Eight MiniLM runs fit anywhere; eight RoBERTa-base runs (125M parameters,
about 4 GiB each by this count) do not fit beside another worker on a 24 GiB machine. So ``auto`` takes
``HEADROOM`` of the memory free on the worker's device when it claims, divided by one run's upper bound below.

The bound is deliberately pessimistic: every parameter counted as trained (a frozen prefix trains less), and
every sequence padded to ``max_length`` (batches are padded to their longest, usually far less). On this
project's CPU a K = 5 fused batch of MiniLM at frozen 0 peaked 3.4 GiB above the lone run, 0.85 GiB a run,
against 1.0 GiB a run by this bound.
"""

from __future__ import annotations

import os
from functools import cache

import torch

from freezestats.encoder.backbone import load_model_config
from freezestats.spec.training import TrainingSpec

__all__ = ["HEADROOM", "free_bytes", "memory_limit", "run_bytes"]

HEADROOM = 0.5
"""The share of the free memory a worker's fused batch may take: other workers on the machine, the data, the
allocator's slack and the evaluation's batches need the rest."""
_TRAINED_BYTES = 16  # fp32 weight, gradient, two AdamW moments
_BUILT_BYTES = 4  # each run's full model, built before its trained parameters are stacked
_FLOAT = 4


@cache
def _parameter_count(model_name: str, num_labels: int) -> int:
    """Parameters of the model with its classification head, counted on the meta device (nothing allocated)."""
    from transformers import AutoModelForSequenceClassification

    config = load_model_config(model_name)
    config.num_labels = num_labels
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(config)
    return sum(p.numel() for p in model.parameters())


def _activation_bytes(model_name: str, training: TrainingSpec) -> int:
    """One training step's saved activations, every sequence at ``max_length``: per layer and token about ten
    hidden-size vectors, two of the feed-forward width, and three rows of attention per head."""
    config = load_model_config(model_name)
    hidden = config.hidden_size
    width = getattr(config, "intermediate_size", 4 * hidden)
    heads, layers = config.num_attention_heads, config.num_hidden_layers
    length = training.max_length
    per_token_layer = 10 * hidden + 2 * width + 3 * heads * length
    return training.batch_size * length * layers * per_token_layer * _FLOAT


def run_bytes(model_name: str, num_labels: int, training: TrainingSpec) -> int:
    """An upper bound on what one more run adds to a fused batch (see the module docstring)."""
    params = _parameter_count(model_name, num_labels)
    return params * (_TRAINED_BYTES + _BUILT_BYTES) + _activation_bytes(model_name, training)


def free_bytes(device: torch.device) -> int:
    """Memory free now: the GPU's free memory (``cudaMemGetInfo``), else the host's MemAvailable."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")  # no /proc (macOS): free pages


def memory_limit(model_name: str, num_labels: int, training: TrainingSpec, device: torch.device) -> int:
    """How many runs fit in ``HEADROOM`` of the free memory now (at least 1: one run always trains, as unfused)."""
    return max(1, int(HEADROOM * free_bytes(device) // run_bytes(model_name, num_labels, training)))

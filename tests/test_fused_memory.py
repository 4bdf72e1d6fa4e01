"""``--fuse auto``'s memory bound: one run's upper bound grows with the model, and K is half the free memory over it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import freezestats.training.fused.memory as memory
from freezestats.runner._fused import AUTO_MAX, fuse_limit
from freezestats.spec.study import load_spec

BLOG = Path(__file__).resolve().parents[1] / "study" / "blog2020-minilm.toml"


def test_one_minilm_run_is_bounded_above_what_it_was_measured_to_take(tiny_model: Path) -> None:
    training = load_spec(BLOG).training
    minilm = memory.run_bytes("minilm-l6", 2, training)
    # measured: 0.85 GiB a run above the lone run (K = 5, frozen 0, fp32, this project's CPU); the bound is above
    # it but not wildly (a bound of 10x would leave most of a machine unused)
    assert 0.85 * 2**30 < minilm < 2 * 2**30
    assert memory.run_bytes(str(tiny_model), 2, training) < minilm / 10  # 2 layers, random weights: far smaller


def test_memory_limit_is_half_the_free_memory_over_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    training = load_spec(BLOG).training
    one = memory.run_bytes("minilm-l6", 2, training)
    cpu = torch.device("cpu")
    monkeypatch.setattr(memory, "free_bytes", lambda device: 10 * one)
    assert memory.memory_limit("minilm-l6", 2, training, cpu) == 5
    monkeypatch.setattr(memory, "free_bytes", lambda device: one // 3)
    assert memory.memory_limit("minilm-l6", 2, training, cpu) == 1  # one run always trains, as unfused


def test_free_host_memory_is_read() -> None:
    assert 0 < memory.free_bytes(torch.device("cpu")) < 2**50


def test_fuse_limit_caps_auto_by_memory_and_the_group_but_not_an_explicit_k() -> None:
    assert fuse_limit("auto", 5, fits=3) == 3 and fuse_limit("auto", 2, fits=3) == 2
    assert fuse_limit("auto", 20, fits=None) == AUTO_MAX and fuse_limit("auto", 20, fits=100) == AUTO_MAX
    assert fuse_limit("5", 5, fits=1) == 5 and fuse_limit("off", 5, fits=3) == 1

"""The suite's own set-up: under pytest-xdist each worker runs torch and BLAS on one thread (``conftest.py``'s
``pytest_configure`` says why), so two workers on two cores do not each start two threads a test."""

from __future__ import annotations

import os

import pytest


def test_an_xdist_worker_trains_on_one_thread() -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip("not run by a pytest-xdist worker (-n 0 or without pytest-xdist)")
    import torch

    assert os.environ.get("OMP_NUM_THREADS") == "1"
    assert torch.get_num_threads() == 1

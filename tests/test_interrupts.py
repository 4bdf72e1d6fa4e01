"""The Ctrl-C gate: deferred outside the interruptible block, at once inside it, forced by a second press."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from freezestats.runner.interrupts import InterruptGate


@pytest.fixture(autouse=True)
def python_sigint_handler() -> Iterator[None]:
    # A suite started in the background inherits SIGINT ignored; the gate acts only on Python's own handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_outside_the_block_waits_for_the_next_safe_point() -> None:
    with InterruptGate() as gate:
        _ctrl_c()  # would raise KeyboardInterrupt here without the gate
        assert gate.pending
        with pytest.raises(KeyboardInterrupt):
            gate.check()
        assert not gate.pending
        gate.check()  # delivered once


def test_ctrl_c_inside_the_block_raises_at_once_and_a_deferred_one_raises_on_entry() -> None:
    with InterruptGate() as gate:
        with pytest.raises(KeyboardInterrupt), gate.interruptible():
            _ctrl_c()
            pytest.fail("the interrupt was not raised inside the block")
        _ctrl_c()
        reached = False
        with pytest.raises(KeyboardInterrupt), gate.interruptible():
            reached = True
        assert not reached


def test_a_second_ctrl_c_forces_the_stop() -> None:
    with InterruptGate():
        _ctrl_c()
        with pytest.raises(KeyboardInterrupt):
            _ctrl_c()


def test_the_previous_handler_is_restored_and_ignored_sigint_stays_ignored() -> None:
    with InterruptGate():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with InterruptGate():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_outside_the_main_thread_the_gate_installs_nothing() -> None:
    seen = []

    def work() -> None:
        with InterruptGate() as gate:
            seen.append((signal.getsignal(signal.SIGINT), gate.pending))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [(signal.default_int_handler, False)]


def test_sigterm_is_the_same_request_and_the_default_action_comes_back() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with InterruptGate() as gate:
            os.kill(os.getpid(), signal.SIGTERM)  # would end the process here without the gate
            assert gate.pending
            with pytest.raises(KeyboardInterrupt), gate.interruptible():
                pytest.fail("the deferred SIGTERM was not delivered on entry")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # an ignored SIGTERM stays ignored
        with InterruptGate():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)

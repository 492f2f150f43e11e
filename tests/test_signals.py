"""autotune.signals: SIGTERM and SIGINT end a command cleanly, exiting 128 + the signal."""

from __future__ import annotations

import os
import signal
import time

import pytest

from autotune.signals import HANDLED, Stopped, stop_on_signals


def test_stopped_names_the_signal_and_exits_128_plus_it():
    # Rule: 143 for SIGTERM, 130 for SIGINT.
    assert Stopped(signal.SIGTERM).exit_code == 143 and Stopped(signal.SIGINT).exit_code == 130
    assert Stopped(signal.SIGTERM).name == "SIGTERM"
    # Rule: a BaseException, so that `except Exception` in between lets it by.
    assert not isinstance(Stopped(signal.SIGINT), Exception)


def test_a_signal_inside_raises_stopped_ignores_a_second_and_restores_handlers():
    before = {sig: signal.getsignal(sig) for sig in HANDLED}
    with pytest.raises(Stopped) as caught:
        with stop_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)  # the handler raises at the next bytecode
            except Exception:  # noqa: BLE001 - Stopped must get past this
                pass
            pytest.fail("no Stopped raised")
    # Rule: SIGTERM inside the block raises Stopped(SIGTERM) in the main thread.
    assert caught.value.signum == signal.SIGTERM
    # Rule: after the block the previous handlers are back (not SIG_IGN).
    assert {sig: signal.getsignal(sig) for sig in HANDLED} == before


def test_once_stopping_further_signals_are_ignored_during_clean_up():
    seen = {}
    with pytest.raises(Stopped):
        with stop_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGINT)
            finally:
                # Rule: while unwinding, a second signal must not interrupt the clean-up.
                seen = {sig: signal.getsignal(sig) for sig in HANDLED}
    assert seen == {sig: signal.SIG_IGN for sig in HANDLED}

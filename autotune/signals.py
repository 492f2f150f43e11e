"""SIGTERM and SIGINT end a command cleanly: the running trial goes down with it.

SLURM, Kubernetes and systemd stop a job with SIGTERM; a person with Ctrl-C
(SIGINT). Inside :func:`stop_on_signals` both raise :class:`Stopped` in the main
thread, which unwinds through the monitor (it kills every process of the trial,
msrun workers included) and the sweep (it re-queues the trial so that the next
run retries it first). The command then exits 128 + the signal number: 143 for
SIGTERM, 130 for SIGINT.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

HANDLED = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """The orchestrator was told to stop (a BaseException: ``except Exception`` lets it by)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    def raise_stopped(signum, _frame) -> None:
        # Once stopping, a second signal must not interrupt the clean-up.
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, raise_stopped) for sig in HANDLED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

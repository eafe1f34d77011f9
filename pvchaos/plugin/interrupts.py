"""How each pytest process of a run takes SIGINT and SIGTERM, so an interrupt stops the
run once, tears down its clusters, and says nothing but what was stopped.

- An xdist worker stops at the first signal (KeyboardInterrupt: fixtures tear down, the
  clusters go) and ignores the copies that follow: a terminal, `pvchaos run` and the
  controller may each deliver one. It also dies with the controller (PR_SET_PDEATHSIG),
  so a SIGKILLed run leaves no worker, and so no cluster, running.
- A worker that stopped for a signal ends its session as `--maxfail` would ("interrupted
  by SIGTERM"), not with pytest's keyboard-interrupt status: xdist would take that for a
  crash, report the running test as failed ("worker crashed while running ...") and start
  a replacement worker. The test that was running has no result, as in a one-process run.
- The xdist controller does not stop at the first signal: it passes it to its workers and
  keeps listening until each has reported its end. Stopping at once closed the workers'
  channels while they tore down, and their `pytest_sessionfinish` then failed with
  "OSError: cannot send (already closed?)" (a PluggyTeardownRaisedWarning on the
  terminal). A second signal stops it at once, unless it came with the first (within
  2 s: `timeout` signals pytest and then its whole process group).
- A single-process run (`-n 0`) stops at the first signal, SIGTERM like Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import time
from types import FrameType
from typing import Any

import pytest

from pvchaos.supervise import FORWARDED, children_of, die_with_parent, is_repeat

_DEFAULTS = (signal.SIG_DFL, signal.default_int_handler, None)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


RECEIVED = pytest.StashKey[list[int]]()


def install(config: pytest.Config) -> None:
    """Take over SIGINT and SIGTERM where nobody else has (a host program's handler stays)."""
    if is_worker(config):
        die_with_parent(signal.SIGKILL)
    handler = _Handler(config)
    config.stash[RECEIVED] = handler.received
    for sig in FORWARDED:
        if signal.getsignal(sig) in _DEFAULTS:
            signal.signal(sig, handler)


class _Handler:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.received: list[int] = []
        self.first_at: float | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        now = time.monotonic()
        first = not self.received
        if not first and not is_worker(self.config) and not is_repeat(self.first_at, now):
            return None  # a copy of the first signal, not a second interrupt
        self.received.append(signum)
        if first:
            self.first_at = now
        if is_worker(self.config):
            if first:
                raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
            return None  # a copy of the same interrupt; the teardown goes on
        workers = children_of(os.getpid()) if self._distributed() else []
        if first and workers:
            for pid in workers:
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass
            return None  # xdist stops once every worker reported its end
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    def _distributed(self) -> bool:
        return self.config.pluginmanager.get_plugin("dsession") is not None


def worker_finished(session: pytest.Session, exitstatus: int) -> None:
    """In a worker stopped by a signal: tell the controller "stop, interrupted", the way
    `--maxfail` does, instead of the keyboard-interrupt status it treats as a crash.
    Runs after xdist recorded `workeroutput` and before it sends it."""
    received = session.config.stash.get(RECEIVED, [])
    if not is_worker(session.config) or not received or exitstatus != pytest.ExitCode.INTERRUPTED:
        return
    out = session.config.workeroutput  # type: ignore[attr-defined]  # xdist sets it on its workers
    out["exitstatus"] = int(pytest.ExitCode.TESTS_FAILED)
    out["shouldstop"] = f"interrupted by {signal.Signals(received[0]).name}"

"""Bounded polling for things that cannot be watched (a process's /readyz, a port).

Kubernetes objects are awaited by `kube.wait` with watches; this is only for
process-level readiness, and it shares tenacity as the bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tenacity

from pvchaos.kube import spent
from pvchaos.kube.errors import PollTimeout

T = TypeVar("T")
__all__ = ["PollTimeout", "poll_until"]


def poll_until(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05,
               abort: Callable[[], str | None] | None = None) -> T:
    """Call `check` until it returns a non-None value; `abort` may end the wait early with a reason."""
    last: list[str] = ["never checked"]

    def attempt() -> T:
        if abort is not None and (reason := abort()):
            raise _Aborted(reason)
        try:
            value = check()
        except Exception as exc:  # any failure: we report the last one on timeout
            last[0] = f"{type(exc).__name__}: {exc}"
            raise _NotYet from exc
        if value is None:
            last[0] = "not yet"
            raise _NotYet
        return value

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(interval),
        retry=tenacity.retry_if_exception_type(_NotYet),
        reraise=True,
    )
    try:
        with spent.charged(spent.WAITS):
            return retrying(attempt)
    except _NotYet:
        raise PollTimeout(f"{what}: not reached within {timeout:.0f}s (last: {last[0]})") from None
    except _Aborted as exc:
        raise PollTimeout(f"{what}: {exc}", aborted=True) from None


class _NotYet(Exception):
    pass


class _Aborted(Exception):
    pass

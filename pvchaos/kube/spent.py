"""Where the seconds go: starting and stopping clusters, sitting out a Kubernetes timer,
and the harness's own waits; what is left of a test's time is its body (issue 38).

The waits (`pvchaos.kube.wait`, `pvchaos.kube.poll`) and cluster starts charge their time
here; the pytest plugin reads the totals before and after each test and puts the
difference on the test's report, and the run's summary adds them up per suite. Totals
only grow, so a pytest session started inside a test (pytester) adds to that test's
figures instead of resetting them. Only the outermost charge of the main thread counts:
a poll inside a cluster start is the start's, and a background thread's wait runs beside
the test body rather than taking its time.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping

CLUSTERS = "cluster starts"  # starting (and stopping) a cluster for a test
TIMERS = "Kubernetes timers"  # a wait that sits out an upstream timer: grace period, resync, backoff
WAITS = "harness waits"  # the harness waiting for a state: watches, polls, holds_for windows
BODIES = "test bodies"  # the rest of a test's time (computed, never charged)
CATEGORIES = (CLUSTERS, TIMERS, WAITS)

_TOTALS = dict.fromkeys(CATEGORIES, 0.0)
class _Depth(threading.local):
    inside = False  # a charge of this thread is open


_depth = _Depth()


@contextlib.contextmanager
def charged(category: str) -> Iterator[None]:
    """Charge the block's wall time to `category` (outermost block of the main thread only)."""
    if category not in _TOTALS:
        raise ValueError(f"unknown time category {category!r}; use one of {', '.join(CATEGORIES)}")
    if threading.current_thread() is not threading.main_thread() or _depth.inside:
        yield
        return
    _depth.inside = True
    started = time.monotonic()
    try:
        yield
    finally:
        _depth.inside = False
        _TOTALS[category] += time.monotonic() - started


def totals() -> dict[str, float]:
    """The seconds charged so far in this process, per category (a copy)."""
    return dict(_TOTALS)


def since(before: dict[str, float]) -> dict[str, float]:
    """The seconds charged per category since `totals()` returned `before`."""
    return {c: _TOTALS[c] - before.get(c, 0.0) for c in CATEGORIES}


def split(total_seconds: float, charged_seconds: Mapping[str, float]) -> dict[str, float]:
    """A test's `total_seconds` split into the charged categories and the body (the rest,
    never negative: the categories are timed a little inside the test's own bounds)."""
    parts = {c: max(0.0, charged_seconds.get(c, 0.0)) for c in CATEGORIES}
    parts[BODIES] = max(0.0, total_seconds - sum(parts.values()))
    return parts

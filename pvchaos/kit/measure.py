"""Measurements on the Allure result, recorded one way so history lines up across runs.

allure-pytest hashes every parameter that is not `excluded` into a result's `historyId`;
a recovery time recorded as an ordinary parameter makes every run a new test, and the
report's history and trends never join up. Everything measured goes through here, as
an excluded parameter: shown on the result, read by the summary (`... seconds`), and
left out of the test's identity (tests/report/test_report.py proves it on real results).
"""

from __future__ import annotations

import time

import allure

# What this process's current test measured, as (name, value) pairs: the plugin moves them
# onto the test's report (user_properties), so the session-end table has them under
# plain pytest and across xdist workers too (pvchaos/plugin/summary.py).
RECORDED: list[tuple[str, str]] = []

SECONDS = " seconds"  # the summary reads timings by this suffix (pvchaos.report.summarize)
ASSERTED_MESSAGE = "asserted message "  # + message key; `pvchaos compare` reads wordings by this prefix


def seconds(name: str, value: float, digits: int = 1) -> float:
    """Record a duration; the name ends in " seconds" (added if missing). Returns the value."""
    label = name if name.endswith(SECONDS.strip()) else name + SECONDS
    allure.dynamic.parameter(label, f"{value:.{digits}f}", excluded=True)
    RECORDED.append((label, f"{value:.{digits}f}"))
    return value


def since(name: str, started: float, digits: int = 1) -> float:
    """Record the seconds since `started` (a time.monotonic() reading)."""
    return seconds(name, time.monotonic() - started, digits)


def note(name: str, value: object) -> None:
    """Record an observation that changes between runs (zones used, nodes tainted)."""
    allure.dynamic.parameter(name, value if isinstance(value, str) else str(value), excluded=True)

"""`--quick`: one core test of each suite, for a change's first feedback in about a minute.

A suite marks the one test that shows its core behaviour `quick` (the rest of the suite
checks the variations); `pvchaos run --quick` (or `pytest suites --quick`) deselects every
other test. The full default run stays the gate: the quick tier is a first signal, not a
substitute. tests/unit/test_quick.py checks that every suite of the default run has one.
"""

from __future__ import annotations

import pytest

MARKER = "quick: the suite's core test, what `--quick` runs (a change's first feedback in about a minute)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("quick", False):
        return
    dropped = [i for i in items if i.get_closest_marker("quick") is None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.get_closest_marker("quick") is not None]

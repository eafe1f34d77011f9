"""Tests that take minutes by design (a controller's fixed wait, such as the attach/detach
controller's 6-minute force detach) carry the `long` marker and run only with `--long`:
the default `pvchaos run` stays within its time budget, and a nightly job that wants the
measured figure asks for it. Deselected tests are reported as deselected, never as
skipped-and-passed.
"""

from __future__ import annotations

import pytest

MARKER = "long: takes minutes by design (a controller's fixed wait); runs only with --long"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("pvchaos").addoption(
        "--long", dest="run_long", action="store_true",
        help="also run the tests marked long (minutes each: the 6-minute force detach)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("run_long"):
        return
    dropped = [i for i in items if i.get_closest_marker("long") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.get_closest_marker("long") is None]

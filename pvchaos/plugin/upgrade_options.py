"""The upgrade suite's options and marker: `--upgrade-from/--upgrade-to` choose the
versions, and a test marked `upgrade` is deselected unless `--upgrade-to` is given, so
the default `pvchaos run` (every suite) never upgrades anything.

`--upgrade-from` is the version the cluster starts at, i.e. `--k8s-version`; giving
both with different values is refused. A forbidden skew is refused here, once, before
any cluster starts (`pvchaos upgrade` checks the same before it builds anything).
"""

from __future__ import annotations

import pytest

from pvchaos.tools.versions import DEFAULT_K8S_VERSION, release, skew_refusal

MARKER = "upgrade: upgrades a local cluster in place (suites/test_upgrade.py); runs only with --upgrade-to"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("pvchaos upgrade", "the live upgrade suite (suites/test_upgrade.py)")
    group.addoption("--upgrade-from", dest="upgrade_from", default="",
                    help="the version the cluster starts at (the same as --k8s-version; default: that, or v1.35.4)")
    group.addoption("--upgrade-to", dest="upgrade_to", default="",
                    help="the version to upgrade to; without it the upgrade suite is deselected")
    group.addoption("--upgrade-force-skew", dest="upgrade_force_skew", action="store_true",
                    help="upgrade even when the version-skew policy forbids it (a test of exactly that)")


def versions(config: pytest.Config) -> tuple[str, str]:
    """(from, to) of this run; to is "" when no upgrade was asked for."""
    start = config.getoption("upgrade_from") or config.getoption("k8s_version") or DEFAULT_K8S_VERSION
    return start, config.getoption("upgrade_to") or ""


def configure(config: pytest.Config, check: bool) -> None:
    """Make --upgrade-from the clusters' version, and refuse bad versions in one line."""
    config.addinivalue_line("markers", MARKER)
    start, to = config.getoption("upgrade_from"), config.getoption("upgrade_to")
    k8s = config.getoption("k8s_version")
    if start and k8s and start != k8s:
        raise pytest.UsageError(f"--upgrade-from {start} and --k8s-version {k8s} differ; the cluster starts at one")
    if start:
        config.option.k8s_version = start
    if not check or not to:
        return
    try:
        first, target = versions(config)
        refusal = skew_refusal(first, target)
    except ValueError as exc:
        raise pytest.UsageError(f"--upgrade-to/--upgrade-from: {exc}") from None
    if refusal and not (config.getoption("upgrade_force_skew") and release(first) != release(target)):
        raise pytest.UsageError(refusal)


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --upgrade-to, the tests marked `upgrade` do not run (nor show as skipped)."""
    if config.getoption("upgrade_to"):
        return
    dropped = [i for i in items if i.get_closest_marker("upgrade") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.get_closest_marker("upgrade") is None]

"""Hooks other pytest plugins implement to extend pvchaos, instead of patching it.

The self-checks (tests/selfcheck) break clusters on purpose through these; a team can
use them to start every local or kind cluster with extra flags, or to check a cluster
once up. Each backend has its own pair: its configuration objects differ.
"""

from __future__ import annotations

import pytest

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.kind import KindBackend
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.local.upgrade_plan import UpgradePlan


@pytest.hookspec(firstresult=True)
def pytest_pvchaos_local_config(config: pytest.Config, cluster_config: LocalClusterConfig) -> LocalClusterConfig | None:
    """Return a changed configuration for a local cluster about to start (the first
    non-None answer is used), or None to leave it as it is."""


@pytest.hookspec
def pytest_pvchaos_cluster_started(config: pytest.Config, local: LocalCluster, handle: ClusterHandle) -> None:
    """Called once a local cluster is up, before any test uses it. An exception here
    takes the cluster down again and fails the tests that needed it."""


@pytest.hookspec(firstresult=True)
def pytest_pvchaos_kind_config(config: pytest.Config, backend: KindBackend) -> KindBackend | None:
    """Return a changed backend for a kind cluster about to start (its flags, gates and
    CSI stack options; the first non-None answer is used), or None to leave it. Not called
    for a cluster the run attaches to (`--kind-cluster`)."""


@pytest.hookspec
def pytest_pvchaos_kind_cluster_started(config: pytest.Config, backend: KindBackend, handle: ClusterHandle) -> None:
    """Called once a kind cluster the run started is up, before any test uses it; an
    exception takes it down again and fails the tests that needed it."""


@pytest.hookspec(firstresult=True)
def pytest_pvchaos_upgrade_plan(config: pytest.Config, plan: UpgradePlan) -> UpgradePlan | None:
    """Return a changed plan for an in-place upgrade about to run (suites/test_upgrade.py),
    or None to leave it as it is; the self-checks break upgrades through this."""

"""A pytest plugin that hands the suites deliberately broken local clusters.

Detection-power tests (test_detection_power.py) run the suites in a subprocess with
`-p tests.selfcheck.broken_cluster` and `PVCHAOS_BREAK=<breakage>`; every local cluster
the pvchaos plugin starts in that process, shared or fresh, is then broken the same
way. The suites must fail there, for the right reason. Without PVCHAOS_BREAK the plugin
does nothing, so the same command line gives the healthy control run.

Breakages (what a real cluster gets wrong, made on purpose):
- `volumebinding`: kube-scheduler without its VolumeBinding plugin: pods schedule with no
  regard to PV node affinity or unbound claims, and WaitForFirstConsumer claims never
  get a selected node;
- `pv-binder`: kube-controller-manager without `persistentvolume-binder-controller`
  (the 1.35 name): no claim ever binds, no PVC events, no reclaim;
- `provisioner`: the zonal/local test provisioner is stopped right after the cluster
  starts. The cluster still declares `dynamic-zonal`, as a cluster whose CSI driver
  crashed would: starting it with `provisioner=False` instead would make the dynamic
  tests skip ("backend local: no dynamic-zonal"), which proves nothing;
- `no-reschedule`: the test provisioner never removes `volume.kubernetes.io/selected-node`
  after a failure that asks for another node (`-reschedule=off`). In 1.35 nothing else
  would: the PV controller removes it only for in-tree plugins, so for an external
  provisioner this *is* "the PV controller does not remove the annotation"; disabling
  the PV binder instead would stop provisioning altogether.

The pvchaos plugin is not changed: this plugin implements its hooks
(`pytest_pvchaos_local_config`, `pytest_pvchaos_cluster_started`, pvchaos/plugin/hookspecs.py).
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from clusters.backend import ClusterHandle
from clusters.local.cluster import LocalCluster
from clusters.local.config import LocalClusterConfig

BREAK_ENV = "PVCHAOS_BREAK"
PV_BINDER = "persistentvolume-binder-controller"  # kube-controller-manager 1.35 --controllers name

BREAKAGES: dict[str, str] = {
    "volumebinding": "kube-scheduler without the VolumeBinding plugin",
    "pv-binder": f"kube-controller-manager without {PV_BINDER}",
    "provisioner": "test provisioner stopped after cluster start",
    "no-reschedule": "test provisioner that never removes selected-node after a failure",
}

def breakage() -> str | None:
    """The breakage asked for in the environment; a typo is a usage error, not a no-op."""
    value = os.environ.get(BREAK_ENV, "").strip()
    if not value:
        return None
    if value not in BREAKAGES:
        raise pytest.UsageError(f"{BREAK_ENV}={value!r}: use one of {', '.join(BREAKAGES)}")
    return value


def break_config(cfg: LocalClusterConfig, what: str) -> LocalClusterConfig:
    """The configuration with the scheduler plugin or controller taken out (pure)."""
    if what == "volumebinding":
        return replace(cfg, disabled_scheduler_plugins=tuple(
            dict.fromkeys((*cfg.disabled_scheduler_plugins, "VolumeBinding"))))
    if what == "pv-binder":
        return replace(cfg, disabled_controllers=tuple(dict.fromkeys((*cfg.disabled_controllers, PV_BINDER))))
    if what == "no-reschedule":
        return replace(cfg, provisioner_reschedule="off")
    return cfg


def pytest_configure(config: pytest.Config) -> None:
    breakage()  # a typo in PVCHAOS_BREAK stops the run before anything starts


def pytest_pvchaos_local_config(config: pytest.Config, cluster_config: LocalClusterConfig) -> LocalClusterConfig | None:
    what = breakage()
    return break_config(cluster_config, what) if what else None


def pytest_pvchaos_cluster_started(config: pytest.Config, local: LocalCluster, handle: ClusterHandle) -> None:
    if breakage() == "provisioner" and local.cfg.provisioner:
        local.stop_component("provisioner")


def pytest_report_header(config: pytest.Config) -> str:
    what = breakage()
    if what is None:
        return f"pvchaos broken_cluster: healthy clusters ({BREAK_ENV} unset)"
    return f"pvchaos broken_cluster: {BREAK_ENV}={what}: {BREAKAGES[what]}"

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
- `provisioner`: the external-provisioner (on a test-double cluster, the test
  provisioner) is stopped right after the cluster starts. The cluster still declares
  `dynamic-zonal`, as a cluster whose CSI driver
  crashed would: starting it with `provisioner=False` instead would make the dynamic
  tests skip ("backend local: no dynamic-zonal"), which proves nothing.
- `attacher`: the external-attacher is stopped right after the cluster starts (the
  cluster still declares `attach`): VolumeAttachments are made and never answered;
- `csinode-no-topology`: every CSINode is rewritten right after start with the driver but
  no topology keys, as a node plugin that registers without any would leave it (topology
  keys of a CSINode driver are immutable, so the object is replaced): the
  external-provisioner then fails with "no topology key found for node";
- `nodeaffinity`: kube-scheduler without its NodeAffinity plugin: nodeSelector and node
  affinity of pods are ignored;
- `volumerestrictions`: kube-scheduler without VolumeRestrictions: a ReadWriteOncePod claim
  in use no longer keeps a second pod away (and preemption has no reason to act);
- `volumezone`: kube-scheduler without VolumeZone: the zone labels of PVs without
  nodeAffinity are ignored;
- `noderesourcesfit`: kube-scheduler without NodeResourcesFit: requests beyond a node's
  allocatable (ephemeral storage included) no longer keep a pod off it;
- `attach-detach`: kube-controller-manager without `persistentvolume-attach-detach-controller`:
  no VolumeAttachment is ever created, so CSI volumes are never attached;
- `no-capacity-tracking`: the CSI stack runs without capacity tracking (no
  `--enable-capacity`, `storageCapacity: false`) where a test asked for it;
- `csi-no-topology`: the external-provisioner runs with `--feature-gates=Topology=false`, so
  CreateVolume gets no accessibility requirements (a deployment that forgot the gate);
- `wrong-zone`: the CSI driver's controller runs with `--fault-misplace`: each zonal volume
  goes to an allowed zone other than the selected node's (a driver that ignores the
  preferred topology), so the scheduler then follows the misplaced volume;
- `csi-proxy-inert`: the CSI fault proxy forwards every call and never reads its rules, so a
  fault a test injects into a CSI call never happens;
- `nodevolumelimits`: kube-scheduler without NodeVolumeLimits: CSINode allocatable counts
  are ignored;
- `pod-gc`: kube-controller-manager without `pod-garbage-collector-controller`, which
  force-deletes the pods of a node with the out-of-service taint;
- `zone-threshold`: kube-controller-manager with `--unhealthy-zone-threshold=1`, so a zone
  with 3 of 4 nodes down is never "partially disrupted" and tainting goes on;
- `slow-node-monitor`: kube-controller-manager gets `--node-monitor-grace-period=40s`
  appended behind the harness's back (the last flag wins), five times the 8 s the
  cluster declares: a controller that notices dead nodes far later than configured;
- `gate-on`: clusters asked for with MutablePVNodeAffinity off get it on;
- `apiserver-gate-off`: kube-apiserver is restarted with MutablePVNodeAffinity off right
  after the cluster starts, while the cluster still declares `mutable-pv-affinity` (a
  control plane whose apiserver lost the gate in an upgrade);
- `no-reschedule`: the cluster runs the old test double instead of CSI, and it never removes
  `volume.kubernetes.io/selected-node` after a failure that asks for another node
  (`-reschedule=off`; upstream's external-provisioner has no switch for that). In 1.35 nothing else
  would: the PV controller removes it only for in-tree plugins, so for an external
  provisioner this *is* "the PV controller does not remove the annotation"; disabling
  the PV binder instead would stop provisioning altogether.
- `upgrade-pv-binder`: the cluster starts healthy, but an in-place upgrade
  (suites/test_upgrade.py) starts the new kube-controller-manager without
  `persistentvolume-binder-controller` (the same name in 1.35 to 1.37), as an upgrade
  that dropped a controller from its flags would.

The pvchaos plugin is not changed: this plugin implements its hooks
(`pytest_pvchaos_local_config`, `pytest_pvchaos_cluster_started`, `pytest_pvchaos_upgrade_plan`,
pvchaos/plugin/hookspecs.py).
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.csi import DRIVER_NAME
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.local.upgrade_plan import UpgradePlan
from pvchaos.kube import kinds
from pvchaos.kube.client import connect
from pvchaos.kube.poll import poll_until

BREAK_ENV = "PVCHAOS_BREAK"
PV_BINDER = "persistentvolume-binder-controller"  # kube-controller-manager 1.35 --controllers name

POD_GC = "pod-garbage-collector-controller"
ATTACH_DETACH = "persistentvolume-attach-detach-controller"  # the 1.35 name
GATE = "MutablePVNodeAffinity"

BREAKAGES: dict[str, str] = {
    "volumebinding": "kube-scheduler without the VolumeBinding plugin",
    "pv-binder": f"kube-controller-manager without {PV_BINDER}",
    "provisioner": "external-provisioner (or the test double) stopped after cluster start",
    "attacher": "external-attacher stopped after cluster start",
    "csinode-no-topology": "CSINodes without the driver's topology keys (a node plugin registered without them)",
    "nodeaffinity": "kube-scheduler without the NodeAffinity plugin",
    "noderesourcesfit": "kube-scheduler without the NodeResourcesFit plugin",
    "volumerestrictions": "kube-scheduler without the VolumeRestrictions plugin",
    "volumezone": "kube-scheduler without the VolumeZone plugin",
    "pod-gc": f"kube-controller-manager without {POD_GC}",
    "attach-detach": f"kube-controller-manager without {ATTACH_DETACH}",
    "no-capacity-tracking": "the CSI stack without capacity tracking where a test asked for it",
    "csi-no-topology": "external-provisioner with --feature-gates=Topology=false",
    "wrong-zone": "CSI driver with --fault-misplace: zonal volumes outside the selected node's zone",
    "no-copies": "CSI driver with --snapshots=false and no csi-snapshotter: no snapshots, restores or clones",
    "no-inline": "CSIDriver listing volumeLifecycleModes [Persistent] only: the kubelet refuses inline volumes",
    "nodevolumelimits": "kube-scheduler without the NodeVolumeLimits plugin",
    "csi-proxy-inert": "CSI fault proxy that forwards every call and never reads its rules",
    "zone-threshold": "kube-controller-manager with --unhealthy-zone-threshold=1",
    "slow-node-monitor": "kube-controller-manager with --node-monitor-grace-period=40s appended (8s declared)",
    "gate-on": f"{GATE} on where a test asked for it off",
    "apiserver-gate-off": f"kube-apiserver restarted with {GATE}=false after start",
    "no-reschedule": "test double that never removes selected-node after a failure (in place of CSI)",
    "upgrade-pv-binder": f"kube-controller-manager upgraded without {PV_BINDER}",
}
_SCHEDULER_PLUGIN = {"volumebinding": "VolumeBinding", "nodeaffinity": "NodeAffinity",
                     "noderesourcesfit": "NodeResourcesFit", "volumerestrictions": "VolumeRestrictions",
                     "volumezone": "VolumeZone", "nodevolumelimits": "NodeVolumeLimits"}
_CONTROLLER = {"pv-binder": PV_BINDER, "pod-gc": POD_GC, "attach-detach": ATTACH_DETACH}

def breakage() -> str | None:
    """The breakage asked for in the environment; a typo is a usage error, not a no-op."""
    value = os.environ.get(BREAK_ENV, "").strip()
    if not value:
        return None
    if value not in BREAKAGES:
        raise pytest.UsageError(f"{BREAK_ENV}={value!r}: use one of {', '.join(BREAKAGES)}")
    return value


def break_config(cfg: LocalClusterConfig, what: str) -> LocalClusterConfig:
    """The configuration with the scheduler plugin, controller, flag or gate changed (pure)."""
    if what in _SCHEDULER_PLUGIN:
        return replace(cfg, disabled_scheduler_plugins=tuple(
            dict.fromkeys((*cfg.disabled_scheduler_plugins, _SCHEDULER_PLUGIN[what]))))
    if what in _CONTROLLER:
        return replace(cfg, disabled_controllers=tuple(dict.fromkeys((*cfg.disabled_controllers, _CONTROLLER[what]))))
    if what == "zone-threshold":
        return replace(cfg, extra_kcm_flags=(*cfg.extra_kcm_flags, "--unhealthy-zone-threshold=1"))
    if what == "csi-no-topology":
        return replace(cfg, csi=replace(cfg.csi, topology=False))
    if what == "wrong-zone":
        return replace(cfg, csi=replace(cfg.csi, fault_misplace=True))
    if what == "no-copies":
        return replace(cfg, csi=replace(cfg.csi, fault_no_copies=True))
    if what == "no-inline":
        return replace(cfg, csi=replace(cfg.csi, fault_no_inline=True))
    if what == "csi-proxy-inert":
        return replace(cfg, csi=replace(cfg.csi, proxy_rules=False))
    if what == "no-capacity-tracking":
        return replace(cfg, csi=replace(cfg.csi, capacity_tracking=False))
    if what == "slow-node-monitor":
        return replace(cfg, extra_kcm_flags=(*cfg.extra_kcm_flags, "--node-monitor-grace-period=40s"))
    if what == "gate-on" and cfg.feature_gates.get(GATE) is False:
        return replace(cfg, feature_gates={**cfg.feature_gates, GATE: True})
    if what == "no-reschedule":  # upstream's external-provisioner has no such switch: the double stands in
        return replace(cfg, provisioner_kind="test-double", provisioner_reschedule="off")
    return cfg


def _restart_apiserver_without_gate(local: LocalCluster, handle: ClusterHandle) -> None:
    """Same flags, the gate off; returns once the API answers again."""
    assert local.state is not None
    local.stop_component("kube-apiserver")
    rec = local.state.processes["kube-apiserver"]
    argv = tuple(a.replace(f"{GATE}=true", f"{GATE}=false") if a.startswith("--feature-gates=") else a
                 for a in rec.argv)
    if argv == rec.argv:
        argv = (*argv, f"--feature-gates={GATE}=false")
    local.state.processes["kube-apiserver"] = replace(rec, argv=argv)
    local.start_component("kube-apiserver")
    kube = connect(handle.kubeconfig, handle.context)
    try:
        poll_until(lambda: True if kinds.list_objects(kube, "Node")[0] else None, 60,
                   "kube-apiserver answers after its restart without the gate")
    finally:
        kube.api.close()


def _csinodes_without_topology(handle: ClusterHandle) -> None:
    """Replace each CSINode's entry of our driver by one without topology keys."""
    kube = connect(handle.kubeconfig, handle.context)
    try:
        for csinode in kinds.list_objects(kube, "CSINode")[0]:
            drivers = csinode.get("spec", {}).get("drivers") or []
            if not any(d.get("name") == DRIVER_NAME for d in drivers):
                continue
            name = csinode["metadata"]["name"]
            kinds.delete(kube, "CSINode", name)
            poll_until(lambda n=name: True if kinds.get(kube, "CSINode", n) is None else None, 30,  # type: ignore[misc]
                       f"CSINode {name} deleted")
            kinds.create(kube, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                "metadata": {"name": name, "labels": csinode["metadata"].get("labels") or {}},
                                "spec": {"drivers": [{**d, "topologyKeys": []} if d.get("name") == DRIVER_NAME else d
                                                     for d in drivers]}})
    finally:
        kube.api.close()


def pytest_configure(config: pytest.Config) -> None:
    breakage()  # a typo in PVCHAOS_BREAK stops the run before anything starts


def pytest_pvchaos_local_config(config: pytest.Config, cluster_config: LocalClusterConfig) -> LocalClusterConfig | None:
    what = breakage()
    return break_config(cluster_config, what) if what else None


def pytest_pvchaos_cluster_started(config: pytest.Config, local: LocalCluster, handle: ClusterHandle) -> None:
    what = breakage()
    if what == "provisioner" and local.cfg.provisioner:
        local.stop_component("csi-provisioner" if local.cfg.runs_csi else "provisioner")
    if what == "attacher" and local.cfg.runs_csi:
        local.stop_component("csi-attacher")
    if what == "csinode-no-topology" and local.cfg.runs_csi:
        _csinodes_without_topology(handle)
    if what == "apiserver-gate-off" and handle.feature_gates.get(GATE):
        _restart_apiserver_without_gate(local, handle)


def pytest_pvchaos_upgrade_plan(config: pytest.Config, plan: UpgradePlan) -> UpgradePlan | None:
    if breakage() != "upgrade-pv-binder":
        return None
    return replace(plan, kcm_disabled_controllers=(*plan.kcm_disabled_controllers, PV_BINDER))


def pytest_report_header(config: pytest.Config) -> str:
    what = breakage()
    if what is None:
        return f"pvchaos broken_cluster: healthy clusters ({BREAK_ENV} unset)"
    return f"pvchaos broken_cluster: {BREAK_ENV}={what}: {BREAKAGES[what]}"

"""A pytest plugin that hands the suites deliberately broken local or kind clusters.

Detection-power tests (test_detection_power.py) run the suites in a subprocess with
`-p tests.selfcheck.broken_cluster` and `PVCHAOS_BREAK=<breakage>`; every cluster the
pvchaos plugin starts in that process, shared or fresh, is then broken the same way. The
suites must fail there, for the right reason. Without PVCHAOS_BREAK the plugin does
nothing, so the same command line gives the healthy control run.

The same command line works on both backends that start clusters (`--backend local`, the
default, or `--backend kind`); a breakage the run's backend cannot make is refused before
anything starts (KIND_BREAKAGES, LOCAL_ONLY), never silently skipped. On kind the cluster
is changed before `kind create` (kube-controller-manager's kubeadm extraArgs, feature
gates, the CSI stack's options: pytest_pvchaos_kind_config) or right after it is up
(pytest_pvchaos_kind_cluster_started); a cluster the run attaches to (`--kind-cluster`)
is not the run's to break and is refused.

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
- `resizer`: the external-resizer is stopped right after the cluster starts (the cluster
  still declares `expansion` and `modify-volume`): a grown claim's PV keeps its size and a
  new VolumeAttributesClass never reaches the driver;
- `resizer-no-modify`: the external-resizer runs with
  `--feature-gates=VolumeAttributesClass=false`, as a deployment that turned the gate off
  would: it still grows volumes, but starts no modify controller, so a claim's new
  VolumeAttributesClass is never applied (the cluster still declares `modify-volume`);
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
  are ignored; a cluster whose pvchaos-csi reports no limit gets one of
  BREAKAGE_VOLUME_LIMIT, so a test that judges whatever limit the driver reports applies
  (it skips without one) and meets the broken scheduler;
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
- `attach-anyway`: the CSIDriver says `attachRequired: true` where a test asked pvchaos-csi
  for false (the `csi_attach_required` marker), while the cluster still declares no
  attach: the attach/detach controller then makes VolumeAttachments for its volumes. On
  kind with a vendor package whose CSIDriver says false (`--driver-package`), that
  CSIDriver is replaced right after start by the same one saying true;
- `pv-affinity-denied`: a ValidatingAdmissionPolicy (bound, Deny) refuses every update that
  changes a PersistentVolume's `spec.nodeAffinity`, as a policy engine's rule on a
  platform would: an update Kubernetes' own validation allows is then refused, so a test
  that asserts the API's acceptance fails (made right after start, and in force before
  the first test: a probe PV's update is refused first);
- `pv-affinity-defaulted`: a MutatingAdmissionPolicy (admissionregistration v1beta1, its
  gate and API turned on in kube-apiserver) removes an empty `spec.nodeAffinity` (no
  required terms) from every PersistentVolume update, as a platform's defaulting rule
  might: an update Kubernetes' validation rejects reaches validation already repaired and
  is accepted, so a test that asserts the rejection fails (gate-on clusters only, where
  removing the affinity is valid; in force before the first test: a probe PV's update
  must come back without its affinity first);
- `no-resize-admission`: kube-apiserver without its PersistentVolumeClaimResize admission
  plugin (`--disable-admission-plugins` given again, last flag wins): a claim of a class
  without allowVolumeExpansion may then grow its request;
- `no-mount` (kind only): the node plugin runs with `--fault-no-mount`: NodeStageVolume and
  NodePublishVolume answer OK without looking at the volume, and the pod gets an empty
  scratch directory of its own, new at each publish: a node plugin that never gives the
  pod its volume (no refusal for a volume whose data is not on the node, nothing kept
  across a node's reboot, nothing the pod writes in the volume's directory);
- `fsgroup-ignored` (kind only): the CSIDriver says `fsGroupPolicy: File` and the node
  plugin runs with `--fault-ignore-mount-group`: it advertises VOLUME_MOUNT_GROUP, so the
  kubelet hands it the pod's fsGroup instead of applying it (csi_mounter.go), and ignores
  it: the volume's root keeps its group;
- `block-file` (kind only): the node plugin runs with `--fault-block-file`: NodePublishVolume
  of a block volume bind-mounts its backing file as it is, not a loop device over it, so
  the container runtime refuses the pod's volumeDevices ("not a device node");
- `fs-group-policy-file` (kind only): the CSIDriver says `fsGroupPolicy: File` where a test
  asked for another (the `csi_fs_group_policy` marker), as a deployment whose CSIDriver kept
  an old policy would: the kubelet then gives the volume the fsGroup the test asked to be left;
- `node-plugin-returns` (kind only): a keeper unit on every worker starts the node plugin
  again within a second of any stop (as a DaemonSet's kubelet restarts its pod), so the
  plugin a test stops comes back and registers again: a fault that does not hold;
- `no-distributed-snapshotting` (kind only): where a test asked for snapshots cut on the
  nodes (the `csi_node_snapshots` marker), the snapshot-controller runs without
  `--enable-distributed-snapshotting`, as a cluster add-on deployed without it would: no
  content gets a node's label, so no node's csi-snapshotter takes it;
- `upgrade-pv-binder`: the cluster starts healthy, but an in-place upgrade
  (suites/test_upgrade.py) starts the new kube-controller-manager without
  `persistentvolume-binder-controller` (the same name in 1.35 to 1.37), as an upgrade
  that dropped a controller from its flags would.

On kind (KIND_BREAKAGES): `pv-binder`, `pod-gc`, `attach-detach` (kubeadm's
`--controllers=*,bootstrapsigner,tokencleaner,-<controller>`), `zone-threshold`, the CSI
stack's `csi-no-topology`, `wrong-zone`, `no-copies`, `csi-proxy-inert` (the nodes' proxy
units too), `no-capacity-tracking`, `gate-on`, `no-inline`, `attach-anyway`, `resizer-no-modify`, and
the kind-only ones above. The
others need the local backend's process control (a scheduler config, a stopped host
process at start, a restarted apiserver, the test double, an in-place upgrade).

The pvchaos plugin is not changed: this plugin implements its hooks
(`pytest_pvchaos_local_config`, `pytest_pvchaos_cluster_started`, `pytest_pvchaos_kind_config`,
`pytest_pvchaos_kind_cluster_started`, `pytest_pvchaos_upgrade_plan`, pvchaos/plugin/hookspecs.py).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pvchaos.clusters import kind_csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.clusters.csi import DRIVER_NAME, CsiOptions
from pvchaos.clusters.kind import DEFAULT_KCM_FLAGS, KindBackend, KindFaults, kind_node_names
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.local.upgrade_plan import UpgradePlan
from pvchaos.clusters.storage import HarnessStorage
from pvchaos.kube import builders, kinds
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
    "resizer": "external-resizer stopped after cluster start",
    "resizer-no-modify": "external-resizer with --feature-gates=VolumeAttributesClass=false: no modify controller",
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
    "no-resize-admission": "kube-apiserver without the PersistentVolumeClaimResize admission plugin",
    "pv-affinity-denied": "a ValidatingAdmissionPolicy that refuses any change of a PV's spec.nodeAffinity",
    "pv-affinity-defaulted": "a MutatingAdmissionPolicy that removes an empty spec.nodeAffinity from PV updates",
    "no-mount": "node plugin with --fault-no-mount: stage and publish say OK, the pod gets an empty scratch directory",
    "fsgroup-ignored": "CSIDriver fsGroupPolicy File, node plugin advertising VOLUME_MOUNT_GROUP and ignoring it",
    "node-plugin-returns": "a keeper on every worker restarts the node plugin within a second of any stop",
    "block-file": "node plugin with --fault-block-file: a block volume's backing file published as it is, no device",
    "fs-group-policy-file": "CSIDriver fsGroupPolicy File where a test asked for another",
    "attach-anyway": "CSIDriver attachRequired true where a test asked for false",
    "no-distributed-snapshotting": "snapshot-controller without --enable-distributed-snapshotting where a test "
                                   "asked for snapshots cut on the nodes",
}
# real kubelets: refused on local
KIND_ONLY = ("no-mount", "fsgroup-ignored", "node-plugin-returns", "block-file", "fs-group-policy-file",
             "no-distributed-snapshotting")
KIND_BREAKAGES = ("pv-binder", "pod-gc", "attach-detach", "zone-threshold", "csi-no-topology", "wrong-zone", "no-copies",
                  "csi-proxy-inert", "no-capacity-tracking", "gate-on", "no-inline", "attach-anyway", "resizer-no-modify",
                  *KIND_ONLY)
# kubeadm's own --controllers for kube-controller-manager: the bootstrap signer and token
# cleaner are off by default and kubeadm's join needs the signer; extraArgs replace the value
KUBEADM_CONTROLLERS = "*,bootstrapsigner,tokencleaner"
KEEPER_UNIT = "pvchaos-csi-keeper.service"
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


BREAKAGE_VOLUME_LIMIT = 4  # the nodevolumelimits breakage's CSINode count where the cluster asked for none


def break_config(cfg: LocalClusterConfig, what: str) -> LocalClusterConfig:
    """The configuration with the scheduler plugin, controller, flag or gate changed (pure)."""
    if what == "nodevolumelimits" and cfg.csi.max_volumes_per_node == 0:
        cfg = replace(cfg, csi=replace(cfg.csi, max_volumes_per_node=BREAKAGE_VOLUME_LIMIT))
    if what in _SCHEDULER_PLUGIN:
        return replace(cfg, disabled_scheduler_plugins=tuple(
            dict.fromkeys((*cfg.disabled_scheduler_plugins, _SCHEDULER_PLUGIN[what]))))
    if what in _CONTROLLER:
        return replace(cfg, disabled_controllers=tuple(dict.fromkeys((*cfg.disabled_controllers, _CONTROLLER[what]))))
    if what == "zone-threshold":
        return replace(cfg, extra_kcm_flags=(*cfg.extra_kcm_flags, "--unhealthy-zone-threshold=1"))
    if what in _CSI:
        return replace(cfg, csi=break_csi(cfg.csi, what))
    if what == "no-resize-admission":
        return replace(cfg, extra_apiserver_flags=(
            *cfg.extra_apiserver_flags, "--disable-admission-plugins=ServiceAccount,PersistentVolumeClaimResize"))
    if what == "pv-affinity-defaulted":  # beta and off in 1.34-1.35: its gate and its API version
        return replace(cfg, extra_apiserver_flags=(
            *cfg.extra_apiserver_flags, "--feature-gates=MutatingAdmissionPolicy=true",
            "--runtime-config=admissionregistration.k8s.io/v1beta1=true"))
    if what == "slow-node-monitor":
        return replace(cfg, extra_kcm_flags=(*cfg.extra_kcm_flags, "--node-monitor-grace-period=40s"))
    if what == "gate-on" and cfg.feature_gates.get(GATE) is False:
        return replace(cfg, feature_gates={**cfg.feature_gates, GATE: True})
    if what == "no-reschedule":  # upstream's external-provisioner has no such switch: the double stands in
        return replace(cfg, provisioner_kind="test-double", provisioner_reschedule="off")
    return cfg


_CSI = ("csi-no-topology", "wrong-zone", "no-copies", "csi-proxy-inert", "no-capacity-tracking", "no-mount",
        "fsgroup-ignored", "block-file", "fs-group-policy-file", "no-inline", "attach-anyway", "resizer-no-modify",
        "no-distributed-snapshotting")


def break_csi(options: CsiOptions, what: str) -> CsiOptions:
    """The CSI stack's options with the breakage's switch (pure)."""
    switch = {"csi-no-topology": {"topology": False}, "wrong-zone": {"fault_misplace": True},
              "no-copies": {"fault_no_copies": True}, "csi-proxy-inert": {"proxy_rules": False},
              "no-capacity-tracking": {"capacity_tracking": False}, "no-mount": {"fault_no_mount": True},
              "fsgroup-ignored": {"fault_ignore_mount_group": True}, "block-file": {"fault_block_file": True},
              "fs-group-policy-file": {"fs_group_policy": "File"}, "no-inline": {"fault_no_inline": True},
              "attach-anyway": {"fault_attach_anyway": True},
              "resizer-no-modify": {"fault_resizer_no_modify": True},
              "no-distributed-snapshotting": {"fault_no_distributed_snapshotting": True}}[what]
    return replace(options, **switch)


def break_kind(backend: KindBackend, what: str) -> KindBackend:
    """A kind backend about to start, changed as the breakage says (pure)."""
    kcm = dict(DEFAULT_KCM_FLAGS if backend.kcm_flags is None else backend.kcm_flags)
    if what in _CONTROLLER:
        disabled = [c for c in kcm.get("controllers", KUBEADM_CONTROLLERS).split(",") if c]
        return replace(backend, kcm_flags={**kcm, "controllers": ",".join(dict.fromkeys(
            [*disabled, f"-{_CONTROLLER[what]}"]))})
    if what == "zone-threshold":
        return replace(backend, kcm_flags={**kcm, "unhealthy-zone-threshold": "1"})
    if what == "gate-on" and (backend.feature_gates or {}).get(GATE) is False:
        return replace(backend, feature_gates={**(backend.feature_gates or {}), GATE: True})
    if what == "attach-anyway" and backend.vendor is not None:
        return backend  # the vendor's CSIDriver is replaced once it is applied (pytest_pvchaos_kind_cluster_started)
    if what in _CSI:
        storage = backend.storage
        if not isinstance(storage, HarnessStorage) or storage.test_double:
            raise ClusterError(f"{BREAK_ENV}={what}: kind cluster {backend.cluster} does not run pvchaos-csi "
                               f"(a vendor's package or the test double): the breakage switches pvchaos-csi's stack")
        return replace(backend, storage=replace(storage, csi=break_csi(storage.csi, what)))
    return backend


def _recreate(kube: Any, body: dict[str, Any]) -> None:
    """Replace an object whose fields are immutable (a CSIDriver's attachRequired, a CSINode
    driver's topology keys): delete it, wait until it is gone, create `body`."""
    kind, name = body["kind"], body["metadata"]["name"]
    kinds.delete(kube, kind, name)
    poll_until(lambda: True if kinds.get(kube, kind, name) is None else None, 30, f"{kind} {name} deleted")
    kinds.create(kube, body)


def _vendor_driver_attaches(backend: KindBackend, handle: ClusterHandle) -> None:
    """The vendor package's CSIDriver, applied with attachRequired false, replaced by the
    same object saying true (the field is immutable): the cluster still declares no
    attach, as it read the package, while the attach/detach controller now attaches."""
    assert backend.vendor is not None
    name = backend.vendor.package.driver_name
    kube = connect(handle.kubeconfig, handle.context)
    try:
        driver = kinds.get(kube, "CSIDriver", name)
        if driver is None or driver.get("spec", {}).get("attachRequired"):
            return
        _recreate(kube, {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                         "metadata": {"name": name, "labels": driver["metadata"].get("labels") or {}},
                         "spec": {**driver["spec"], "attachRequired": True}})
    finally:
        kube.api.close()


def _keep_node_plugins(backend: KindBackend, handle: ClusterHandle) -> None:
    """On every worker, a unit that starts the node plugin again whenever it is stopped."""
    faults = handle.faults
    assert isinstance(faults, KindFaults)
    loop = f"while sleep 1; do systemctl is-active -q {kind_csi.UNIT} || systemctl start {kind_csi.UNIT}; done"
    unit = (f"[Unit]\nDescription=pvchaos self-check: restart {kind_csi.UNIT} whenever it stops\n\n"
            f"[Service]\nExecStart=/bin/sh -c '{loop}'\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n")
    for node in kind_node_names(backend.cluster, backend.topology):
        faults.node_exec(node, f"printf '%b' \"{unit}\" > /etc/systemd/system/{KEEPER_UNIT} && systemctl daemon-reload "
                               f"&& systemctl enable --now {KEEPER_UNIT}")


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
            _recreate(kube, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                             "metadata": {"name": csinode["metadata"]["name"],
                                          "labels": csinode["metadata"].get("labels") or {}},
                             "spec": {"drivers": [{**d, "topologyKeys": []} if d.get("name") == DRIVER_NAME else d
                                                  for d in drivers]}})
    finally:
        kube.api.close()


DENY_POLICY = "pvchaos-selfcheck-deny-pv-affinity"


def deny_pv_affinity_policy() -> tuple[dict[str, Any], dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its Deny binding (pure): no update may change a
    PV's spec.nodeAffinity, whatever Kubernetes' validation and feature gates allow."""
    same = ("has(object.spec.nodeAffinity) == has(oldObject.spec.nodeAffinity) && "
            "(!has(object.spec.nodeAffinity) || object.spec.nodeAffinity == oldObject.spec.nodeAffinity)")
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": DENY_POLICY},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["UPDATE"],
                                                               "resources": ["persistentvolumes"]}]},
                       "validations": [{"expression": same,
                                        "message": "pvchaos self-check: PV nodeAffinity changes are refused"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": DENY_POLICY},
               "spec": {"policyName": DENY_POLICY, "validationActions": ["Deny"]}}
    return policy, binding


def _deny_pv_affinity_updates(handle: ClusterHandle) -> None:
    """Create the policy and wait until the API server enforces it: a probe PV without
    affinity is given one (validation allows that with the gate on or off) until the update
    is refused; every probe is deleted."""
    kube = connect(handle.kubeconfig, handle.context)
    admission = client.AdmissionregistrationV1Api(kube.api)
    policy, binding = deny_pv_affinity_policy()
    admission.create_validating_admission_policy(policy)
    admission.create_validating_admission_policy_binding(binding)
    probes: list[str] = []

    def refused() -> bool | None:
        name = f"pvchaos-selfcheck-probe-{len(probes)}"
        kinds.create(kube, builders.persistent_volume(name, "1Gi"))
        probes.append(name)
        try:
            kinds.patch(kube, "PersistentVolume", name, {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pvchaos.dev/probe", "operator": "Exists"}]}]}}}})
        except ApiException as e:
            return True if DENY_POLICY in (e.body or "") else None  # the API server's denial names the policy
        return None

    try:
        poll_until(refused, 30, f"ValidatingAdmissionPolicy {DENY_POLICY} refuses a PV affinity update")
    finally:
        for name in probes:
            kinds.delete(kube, "PersistentVolume", name)
        kube.api.close()


DEFAULTING_POLICY = "pvchaos-selfcheck-drop-empty-pv-affinity"
_EMPTY_AFFINITY = ("has(object.spec.nodeAffinity) && (!has(object.spec.nodeAffinity.required) || "
                   "!has(object.spec.nodeAffinity.required.nodeSelectorTerms) || "
                   "size(object.spec.nodeAffinity.required.nodeSelectorTerms) == 0)")


def drop_empty_pv_affinity_policy() -> tuple[dict[str, Any], dict[str, Any]]:
    """The MutatingAdmissionPolicy and its binding (pure): a PV update whose nodeAffinity
    has no required terms loses the nodeAffinity before validation sees it."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
              "metadata": {"name": DEFAULTING_POLICY},
              "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["UPDATE"],
                                                               "resources": ["persistentvolumes"]}]},
                       "matchConditions": [{"name": "empty-node-affinity", "expression": _EMPTY_AFFINITY}],
                       "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
                           "expression": "[JSONPatch{op: 'remove', path: '/spec/nodeAffinity'}]"}}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": DEFAULTING_POLICY}, "spec": {"policyName": DEFAULTING_POLICY}}
    return policy, binding


def _drop_empty_pv_affinity(handle: ClusterHandle) -> None:
    """Create the policy and wait until the API server applies it: a probe PV with an
    affinity is replaced with an empty one until the stored PV comes back with none (with
    the policy not yet in force the API server rejects the update); every probe is deleted."""
    kube = connect(handle.kubeconfig, handle.context)
    admission = client.AdmissionregistrationV1beta1Api(kube.api)
    policy, binding = drop_empty_pv_affinity_policy()
    admission.create_mutating_admission_policy(policy)
    admission.create_mutating_admission_policy_binding(binding)
    affinity = {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pvchaos.dev/probe", "operator": "Exists"}]}]}}
    probe = "pvchaos-selfcheck-probe-defaulted"
    kinds.create(kube, builders.persistent_volume(probe, "1Gi", affinity=affinity))

    def defaulted() -> bool | None:
        pv = kinds.get(kube, "PersistentVolume", probe) or {}
        try:
            stored = kinds.replace(kube, {**pv, "spec": {**pv["spec"], "nodeAffinity": {}}})
        except ApiException as e:
            if e.status == 422:  # validation saw the empty affinity: the policy is not in force yet
                return None
            raise  # anything else is reported when the wait ends
        return True if "nodeAffinity" not in stored["spec"] else None

    try:
        poll_until(defaulted, 30, f"MutatingAdmissionPolicy {DEFAULTING_POLICY} removes an empty PV affinity")
    finally:
        kinds.delete(kube, "PersistentVolume", probe)
        kube.api.close()


def refusal(what: str, backend: str, attached_kind_cluster: str | None = None) -> str | None:
    """Why this backend cannot make the breakage (one line), or None."""
    if backend == "kind" and attached_kind_cluster:
        return (f"{BREAK_ENV}={what}: --kind-cluster {attached_kind_cluster} is a cluster this run attaches to, not "
                f"one it starts: it cannot be broken (leave --kind-cluster out)")
    if backend == "kind" and what not in KIND_BREAKAGES:
        return (f"{BREAK_ENV}={what}: the kind backend cannot make this breakage (it needs the local backend's "
                f"process control); on kind: {', '.join(KIND_BREAKAGES)}")
    if backend == "local" and what in KIND_ONLY:
        return f"{BREAK_ENV}={what}: needs real kubelets (--backend kind); KWOK nodes mount nothing"
    if backend not in ("local", "kind"):
        return f"{BREAK_ENV}={what}: backend {backend} starts no cluster this plugin could break"
    return None


def pytest_configure(config: pytest.Config) -> None:
    what = breakage()  # a typo in PVCHAOS_BREAK stops the run before anything starts
    if what is None:
        return
    why = refusal(what, str(config.getoption("backend", "local") or "local"), config.getoption("kind_cluster", None))
    if why:
        raise pytest.UsageError(why)


def pytest_pvchaos_local_config(config: pytest.Config, cluster_config: LocalClusterConfig) -> LocalClusterConfig | None:
    what = breakage()
    return break_config(cluster_config, what) if what else None


def pytest_pvchaos_cluster_started(config: pytest.Config, local: LocalCluster, handle: ClusterHandle) -> None:
    what = breakage()
    if what == "provisioner" and local.cfg.provisioner:
        local.stop_component("csi-provisioner" if local.cfg.runs_csi else "provisioner")
    if what == "attacher" and local.cfg.runs_csi:
        local.stop_component("csi-attacher")
    if what == "resizer" and local.cfg.runs_csi:
        local.stop_component("csi-resizer")
    if what == "csinode-no-topology" and local.cfg.runs_csi:
        _csinodes_without_topology(handle)
    if what == "apiserver-gate-off" and handle.feature_gates.get(GATE):
        _restart_apiserver_without_gate(local, handle)
    if what == "pv-affinity-denied":
        _deny_pv_affinity_updates(handle)
    if what == "pv-affinity-defaulted" and handle.feature_gates.get(GATE):
        _drop_empty_pv_affinity(handle)


def pytest_pvchaos_kind_config(config: pytest.Config, backend: KindBackend) -> KindBackend | None:
    what = breakage()
    return break_kind(backend, what) if what else None


def pytest_pvchaos_kind_cluster_started(config: pytest.Config, backend: KindBackend, handle: ClusterHandle) -> None:
    if breakage() == "node-plugin-returns" and backend.runs_csi:
        _keep_node_plugins(backend, handle)
    if breakage() == "attach-anyway" and backend.vendor is not None and not backend.vendor.package.attach_required:
        _vendor_driver_attaches(backend, handle)


def pytest_pvchaos_upgrade_plan(config: pytest.Config, plan: UpgradePlan) -> UpgradePlan | None:
    if breakage() != "upgrade-pv-binder":
        return None
    return replace(plan, kcm_disabled_controllers=(*plan.kcm_disabled_controllers, PV_BINDER))


def pytest_report_header(config: pytest.Config) -> str:
    what = breakage()
    if what is None:
        return f"pvchaos broken_cluster: healthy clusters ({BREAK_ENV} unset)"
    return f"pvchaos broken_cluster: {BREAK_ENV}={what}: {BREAKAGES[what]}"

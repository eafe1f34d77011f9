"""Real CSI in the loop, host side: our driver's controller service and upstream's
external-provisioner, external-attacher and external-resizer, as processes against a
cluster's kubeconfig.

Why: a test double decides rescheduling, retries and event texts itself; with upstream's
sidecars those are upstream's, which is what the suites mean to assert. Shared by the
backends: the local one (KWOK nodes) runs the whole stack here and writes what a kubelet
and its registrar would (`csi_node_object`, `node_annotations`); kind runs the node plugin
in its nodes and only this host-side stack against its own kubeconfig.

The sidecars dial the fault proxy (`pvchaos-csi proxy`, docs/csi-fault-proxy.md), which
forwards to the controller's own socket: always on, since it adds about a tenth of a
millisecond per call (bench/csi_proxy.py), and a test then injects faults into any call
by writing the rules file (pvchaos.chaos.csi_calls) with nothing restarted.

Processes start through a `Starter` the backend gives (the local backend's records every
pid in the cluster's registry, so `cluster down`, the leftover sweep and Ctrl-C stop them);
`ProcessBook` is a ready one for a backend without a registry (kind), keeping the records
in `<dir>/csi/processes.json` (`start_stack` uses it). A component that exits or never
starts is one ClusterError line naming it and its log, and nothing is left running.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from pvchaos.clusters.common.processes import ProcessRecord, log_tail, spawn, stop
from pvchaos.kube.client import Kube
from pvchaos.kube.errors import ClusterError, PollTimeout
from pvchaos.kube.kinds import SNAPSHOT_GROUP
from pvchaos.kube.naming import OWNED_LABEL
from pvchaos.kube.poll import poll_until

DRIVER_NAME = "csi.pvchaos.dev"
ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"
# The driver of static stand-in PVs (kube.builders.persistent_volume): nothing serves it,
# so it gets a CSIDriver without attach where nodes are attach/detach-controller managed.
STATIC_DRIVER = "static.csi.pvchaos.dev"
TOPOLOGY_PARAMETER = "pvchaos.dev/topology"  # StorageClass parameter: zone (default) or node affinity
TOPOLOGY_KEYS = (ZONE_KEY, HOSTNAME_KEY)
NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"
ATTACH_DETACH_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
CONTROLLER, PROVISIONER, ATTACHER = "csi-controller", "csi-provisioner", "csi-attacher"
# upstream's external-resizer: grows volumes (ControllerExpandVolume) and moves them to
# another VolumeAttributesClass (ControllerModifyVolume)
RESIZER = "csi-resizer"
# upstream's external-snapshotter: the sidecar on the driver's socket, and the cluster-wide
# controller that binds VolumeSnapshots to contents (one per cluster, as upstream deploys it)
SNAPSHOTTER, SNAPSHOT_CONTROLLER = "csi-snapshotter", "snapshot-controller"
COMPONENTS = (CONTROLLER, PROVISIONER, ATTACHER, RESIZER, SNAPSHOTTER, SNAPSHOT_CONTROLLER)
PROXY = "csi-proxy"  # between the sidecars and the controller; not a component a test restarts
CAPACITY_NAMESPACE = "kube-system"  # where CSIStorageCapacity objects go (the sidecar's NAMESPACE)
START_TIMEOUT = 60.0
# Retries after a failed CreateVolume/attach: upstream starts at 1 s and doubles up to
# 5 min (--retry-interval-start/-max: the per-claim exponential back-off of the claim
# and VolumeAttachment queues). A test that fails provisioning twice would wait 3 s and a
# long one minutes; 250 ms doubling to 5 s (the old test double's maximum) keeps the
# same shape, in test time.
RETRY_START, RETRY_MAX = "250ms", "5s"
OPERATION_TIMEOUT = "15s"  # per CSI call (--timeout); the attacher's default, above fail-delay knobs
# The external-provisioner's --snapshot-orphan-sweep-interval (upstream 5m): it removes its
# source-protection finalizer from a VolumeSnapshot right after a restore is provisioned,
# and when that update fails (it races the snapshot-controller's status writes) it leaves
# the finalizer to this sweep, so a snapshot deleted then waits for it (docs/findings.md)
SNAPSHOT_ORPHAN_SWEEP_SECONDS = 10
UPSTREAM_SNAPSHOT_ORPHAN_SWEEP_SECONDS = 300
# Client budget of both sidecars: upstream's 5 qps / burst 10 throttles a storm of
# claims; 100/200 is what the old test double used, so the two compare fairly.
API_QPS, API_BURST = 100, 200

Starter = Callable[[str, list[str], dict[str, str] | None], subprocess.Popen[bytes]]


# why a pvchaos-csi cluster asked for attachRequired false lacks `attach` (both backends' skip reason)
NO_ATTACH_ASKED = f"driver {DRIVER_NAME}'s CSIDriver sets attachRequired false (asked for)"

FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")  # CSIDriver spec.fsGroupPolicy


@dataclass(frozen=True)
class CsiOptions:
    """How the stack runs; upstream's defaults except where a test needs otherwise."""

    strict_topology: bool = False  # provisioner --strict-topology (upstream default off)
    immediate_topology: bool = True  # provisioner --immediate-topology (upstream default on)
    capacity_tracking: bool = False  # --enable-capacity, and CSIDriver storageCapacity
    # The node plugin's NodeGetInfo max_volumes_per_node, the CSINode's allocatable.count.
    # 0: no limit (the CSI spec's "unlimited"; the kubelet then writes no count and the
    # NodeVolumeLimits filter counts nothing for this driver). A limit nobody asked for
    # leaves pods Pending with "exceed max volume count" in a big scenario, so only a
    # suite (the csi_max_volumes_per_node cluster marker) or an option sets one.
    max_volumes_per_node: int = 0
    capacity_poll_seconds: int = 2  # --capacity-poll-interval: how stale a CSIStorageCapacity may get
    # --feature-gates=Topology: off, the provisioner sends no accessibility requirements
    # (a deployment that forgot it; only the self-checks turn it off)
    topology: bool = True
    # pvchaos-csi --fault-misplace: zonal volumes in an allowed zone other than the selected
    # node's (a driver bug on purpose; only the self-checks turn it on)
    fault_misplace: bool = False
    # the fault proxy reads its rules file; off, it forwards every call whatever the rules
    # say (a proxy that injects nothing; only the self-checks turn it off)
    proxy_rules: bool = True
    # pvchaos-csi --snapshots=false and no csi-snapshotter, while the cluster still claims
    # snapshots and clones (a driver without copies; only the self-checks turn it on)
    fault_no_copies: bool = False
    # The CSIDriver's fsGroupPolicy: File, as for any driver whose volumes are directories
    # the kubelet can chown (upstream's csi-driver-host-path says the same); None or
    # ReadWriteOnceWithFSType where a test asks (the csi_fs_group_policy cluster marker)
    fs_group_policy: str = "File"
    # The CSIDriver's attachRequired: the attach/detach controller makes a VolumeAttachment
    # per volume and node, and the external-attacher answers it; false where a test asks
    # (the csi_attach_required cluster marker): no VolumeAttachment is made at all
    attach_required: bool = True
    # a CSIDriver that says attachRequired true where the test asked for false, while the
    # cluster still declares no attach (a deployment whose CSIDriver kept the old value;
    # only the self-checks turn it on)
    fault_attach_anyway: bool = False
    # kind's node plugins run with --fault-block-file: a block volume's backing file is
    # bind-mounted as it is, not a loop device over it, so a pod's volumeDevices never
    # starts (a broken node plugin; only the self-checks turn it on)
    fault_block_file: bool = False
    # pvchaos-csi node --fault-no-mount: stage and publish answer OK and the pod gets an
    # empty scratch directory, new at each publish, never the volume (real kubelets only;
    # only the self-checks turn it on)
    fault_no_mount: bool = False
    # pvchaos-csi node --fault-ignore-mount-group, and the CSIDriver's fsGroupPolicy File:
    # the kubelet leaves the pod's fsGroup to a node plugin that ignores it (real kubelets
    # only; only the self-checks turn it on)
    fault_ignore_mount_group: bool = False
    # a CSIDriver that lists the Persistent lifecycle mode only, while the cluster still
    # claims inline-ephemeral: the kubelet refuses every inline volume of the driver
    # (FailedMount 'volume mode "Ephemeral" not supported'; only the self-checks turn it on)
    fault_no_inline: bool = False
    # csi-resizer --feature-gates=VolumeAttributesClass=false: a resizer deployed without its
    # modify controller, while the cluster still claims modify-volume (a claim's new
    # VolumeAttributesClass then never reaches the driver; only the self-checks turn it on)
    fault_resizer_no_modify: bool = False
    # Upstream's distributed snapshotting (the csi_node_snapshots cluster marker): no
    # central csi-snapshotter; one beside each node plugin (--node-deployment, real kubelets
    # only), the node plugin cutting the snapshots (pvchaos-csi node --node-snapshots), and
    # the snapshot-controller labelling each content with the node that cuts it. The only
    # way a node-local volume's bytes can be snapshotted: the controller cannot reach them.
    node_snapshots: bool = False
    # the snapshot-controller without --enable-distributed-snapshotting where node_snapshots
    # asked for it: no content gets a node's label, so no node's csi-snapshotter takes one
    # (only the self-checks turn it on)
    fault_no_distributed_snapshotting: bool = False

    def __post_init__(self) -> None:
        if self.max_volumes_per_node < 0:
            raise ValueError(f"max_volumes_per_node {self.max_volumes_per_node}: use 0 (no limit) or more")
        if self.fs_group_policy not in FS_GROUP_POLICIES:
            raise ValueError(f"fs_group_policy {self.fs_group_policy!r}: use one of {', '.join(FS_GROUP_POLICIES)}")


@dataclass(frozen=True)
class CsiPaths:
    """Where one cluster's stack keeps its sockets, state, calls log and control files."""

    cluster_dir: Path

    @property
    def root(self) -> Path:
        return self.cluster_dir / "csi"

    @property
    def socket(self) -> Path:
        """What the sidecars dial: the fault proxy's socket."""
        return self.root / "c.sock"  # short: a unix socket path has room for 107 bytes

    @property
    def driver_socket(self) -> Path:
        """Where the controller service itself serves, behind the proxy."""
        return self.root / "d.sock"

    @property
    def proxy_rules(self) -> Path:
        """The proxy's rules file (pvchaos.chaos.csi_calls writes it)."""
        return self.root / "proxy-rules.json"

    @property
    def proxy_log(self) -> Path:
        """One JSON line per call through the proxy."""
        return self.root / "proxy-calls.jsonl"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def calls_log(self) -> Path:
        return self.root / "calls.jsonl"

    @property
    def control_dir(self) -> Path:
        return self.root / "control"

    @property
    def data_root(self) -> Path:
        return self.root / "data"

    def log(self, component: str) -> Path:
        """Beside the cluster's other logs, where ClusterHandle.component_log looks."""
        return self.cluster_dir / "logs" / f"{component}.log"


def paths_for(cluster_dir: Path) -> CsiPaths:
    """The stack's paths under a cluster's directory. A unix socket path has room for
    107 bytes; a deeper directory is refused here rather than by the driver."""
    paths = CsiPaths(cluster_dir)
    if len(str(paths.socket).encode()) > 107:
        raise ClusterError(f"CSI socket path {paths.socket} is longer than a unix socket allows; "
                           "use a shorter PVCHAOS_STATE_DIR")
    return paths


# ---- flags (pure) ----------------------------------------------------------------------

def controller_args(driver: Path, paths: CsiPaths, data_root: Path | None = None,
                    options: CsiOptions | None = None) -> list[str]:
    fault = ["--fault-misplace"] if options is not None and options.fault_misplace else []
    fault += ["--snapshots=false"] if options is not None and options.fault_no_copies else []
    return [str(driver), "controller", f"--endpoint=unix://{paths.driver_socket}", f"--driver-name={DRIVER_NAME}",
            f"--state-file={paths.state_file}", f"--calls-log={paths.calls_log}",
            f"--data-root={data_root or paths.data_root}", f"--control-dir={paths.control_dir}", *fault]


def proxy_args(driver: Path, paths: CsiPaths, options: CsiOptions | None = None) -> list[str]:
    """The fault proxy between the sidecars (paths.socket) and the controller."""
    rules = [f"--rules={paths.proxy_rules}"] if options is None or options.proxy_rules else []
    return [str(driver), "proxy", f"--listen=unix://{paths.socket}", f"--target=unix://{paths.driver_socket}",
            *rules, f"--log={paths.proxy_log}"]


def provisioner_args(binary: Path, paths: CsiPaths, kubeconfig: Path, options: CsiOptions) -> list[str]:
    argv = [str(binary), f"--csi-address={paths.socket}", f"--kubeconfig={kubeconfig}", "--leader-election=false",
            f"--feature-gates=Topology={str(options.topology).lower()}",
            f"--strict-topology={str(options.strict_topology).lower()}",
            f"--immediate-topology={str(options.immediate_topology).lower()}", "--extra-create-metadata",
            f"--timeout={OPERATION_TIMEOUT}", f"--retry-interval-start={RETRY_START}",
            f"--retry-interval-max={RETRY_MAX}", f"--kube-api-qps={API_QPS}", f"--kube-api-burst={API_BURST}",
            f"--snapshot-orphan-sweep-interval={SNAPSHOT_ORPHAN_SWEEP_SECONDS}s", "--v=4"]
    if options.capacity_tracking:
        argv += ["--enable-capacity", "--capacity-ownerref-level=-1",
                 f"--capacity-poll-interval={options.capacity_poll_seconds}s"]
    return argv


def snapshotter_args(binary: Path, paths: CsiPaths, kubeconfig: Path) -> list[str]:
    """csi-snapshotter on the proxy's socket, like the other sidecars."""
    return [str(binary), f"--csi-address={paths.socket}", f"--kubeconfig={kubeconfig}", "--leader-election=false",
            f"--timeout={OPERATION_TIMEOUT}", f"--retry-interval-start={RETRY_START}",
            f"--retry-interval-max={RETRY_MAX}", f"--kube-api-qps={API_QPS}", f"--kube-api-burst={API_BURST}",
            "--v=4"]


def snapshot_controller_args(binary: Path, kubeconfig: Path, distributed: bool = False) -> list[str]:
    """The snapshot-controller: cluster-wide, needs no socket. It waits for the CRDs at
    start (up to --retry-crd-interval-max), so they are applied before it is spawned.
    `distributed` (upstream's distributed snapshotting): each new VolumeSnapshotContent is
    labelled `snapshot.storage.kubernetes.io/managed-by: <node>`, the first node matching
    the source PV's nodeAffinity, for the csi-snapshotter of that node."""
    return [str(binary), f"--kubeconfig={kubeconfig}", "--leader-election=false",
            *(["--enable-distributed-snapshotting"] if distributed else []),
            f"--retry-interval-start={RETRY_START}", f"--retry-interval-max={RETRY_MAX}",
            f"--kube-api-qps={API_QPS}", f"--kube-api-burst={API_BURST}", "--v=4"]


def resizer_args(binary: Path, paths: CsiPaths, kubeconfig: Path, options: CsiOptions | None = None) -> list[str]:
    """csi-resizer on the proxy's socket. Its VolumeAttributesClass gate is GA and on, so
    it is left to the resizer's own discovery check unless a self-check turns it off."""
    gate = (["--feature-gates=VolumeAttributesClass=false"]
            if options is not None and options.fault_resizer_no_modify else [])
    return [str(binary), f"--csi-address={paths.socket}", f"--kubeconfig={kubeconfig}", "--leader-election=false",
            f"--timeout={OPERATION_TIMEOUT}", f"--retry-interval-start={RETRY_START}",
            f"--retry-interval-max={RETRY_MAX}", f"--kube-api-qps={API_QPS}", f"--kube-api-burst={API_BURST}",
            *gate, "--v=4"]


def attacher_args(binary: Path, paths: CsiPaths, kubeconfig: Path) -> list[str]:
    return [str(binary), f"--csi-address={paths.socket}", f"--kubeconfig={kubeconfig}", "--leader-election=false",
            f"--timeout={OPERATION_TIMEOUT}", f"--retry-interval-start={RETRY_START}",
            f"--retry-interval-max={RETRY_MAX}", f"--kube-api-qps={API_QPS}", f"--kube-api-burst={API_BURST}",
            "--v=4"]


# ---- objects (pure) --------------------------------------------------------------------

LIFECYCLE_MODES = ("Persistent", "Ephemeral")
# pvchaos-csi's inline volume attribute: a size the node's free space must hold (ephemeral.go)
INLINE_SIZE_ATTRIBUTE = "pvchaos.dev/size"
# pvchaos-csi's one mutable parameter (a VolumeAttributesClass's; controller_expand.go), and
# the values it takes: anything else is INVALID_ARGUMENT at ControllerModifyVolume
MUTABLE_TIER_PARAMETER, MUTABLE_TIERS = "pvchaos.dev/tier", ("standard", "fast")


def csi_driver_object(options: CsiOptions) -> dict[str, Any]:
    """The CSIDriver: attach required unless the options say otherwise (the attach/detach
    controller then makes VolumeAttachments the external-attacher serves; the kubelet never
    attaches an inline volume), both lifecycle modes, and pod info on mount, which is what makes the kubelet
    tell the driver an inline volume from a PV's (volume_context
    csi.storage.k8s.io/ephemeral, pkg/volume/csi getPodInfoAttrs); the fsGroupPolicy the
    options say."""
    modes = ["Persistent"] if options.fault_no_inline else list(LIFECYCLE_MODES)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": DRIVER_NAME, "labels": {OWNED_LABEL: "true"}},
            "spec": {"attachRequired": options.attach_required or options.fault_attach_anyway, "podInfoOnMount": True,
                     "storageCapacity": options.capacity_tracking, "fsGroupPolicy": options.fs_group_policy,
                     "volumeLifecycleModes": modes}}


def csi_node_object(node: str, options: CsiOptions) -> dict[str, Any]:
    """The CSINode a kubelet writes once the registrar reports our node plugin: node id =
    node name, both topology keys, and the volume limit the scheduler counts when there is
    one (the kubelet's nodeinfomanager writes `allocatable` only for a limit above 0)."""
    entry: dict[str, Any] = {"name": DRIVER_NAME, "nodeID": node, "topologyKeys": list(TOPOLOGY_KEYS)}
    if options.max_volumes_per_node > 0:
        entry["allocatable"] = {"count": options.max_volumes_per_node}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": node, "labels": {OWNED_LABEL: "true"}},
            "spec": {"drivers": [entry]}}


def volume_limit_text(options: CsiOptions) -> str:
    """The driver's per-node volume limit as a person reads it."""
    n = options.max_volumes_per_node
    return f"{n} volume{'' if n == 1 else 's'} per node" if n > 0 else "no volume limit (0: unlimited)"


def node_annotations(node: str) -> dict[str, str]:
    """What a kubelet puts on its Node: our driver's node id, and that the attach/detach
    controller (not the kubelet) attaches its volumes, so VolumeAttachments are made."""
    return {NODE_ID_ANNOTATION: json.dumps({DRIVER_NAME: node}, separators=(",", ":")),
            ATTACH_DETACH_ANNOTATION: "true"}


def description(options: CsiOptions, provisioner_version: str, attacher_version: str,
                resizer_version: str) -> dict[str, str]:
    """Rows for the cluster's description (the Allure environment)."""
    return {"provisioner": f"{DRIVER_NAME} (pvchaos-csi) via external-provisioner {provisioner_version}",
            "external-attacher": attacher_version,
            "external-resizer": resizer_version,
            "csi options": (f"strict-topology={options.strict_topology}, immediate-topology={options.immediate_topology}, "
                            f"capacity-tracking={options.capacity_tracking}, "
                            f"max-volumes-per-node={options.max_volumes_per_node}"),
            "csi volume limit": volume_limit_text(options),
            "csi capacity": (f"tracked (CSIStorageCapacity every {options.capacity_poll_seconds}s)"
                             if options.capacity_tracking else "not tracked (CSIDriver storageCapacity: false)"),
            "csi retry interval": f"{RETRY_START} doubling to {RETRY_MAX}",
            "csi snapshots": ("cut on the nodes (distributed snapshotting: csi-snapshotter --node-deployment per node)"
                              if options.node_snapshots else "cut by the controller (one csi-snapshotter)")}


# ---- processes -------------------------------------------------------------------------

def _socket_answers(path: Path) -> bool | None:
    if not path.exists():
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        try:
            s.connect(str(path))
        except OSError:
            return None
    return True


def _log_says(path: Path, text: str) -> bool | None:
    try:
        return True if text in path.read_text(errors="replace") else None
    except OSError:
        return None


# What each component's log says once it serves: the provisioner library's
# "Started provisioner controller", the attacher's "Starting CSI attacher" and the
# resizer's "Starting external resizer" (each after the sidecar probed the driver and read
# its capabilities).
READY_LOG = {PROVISIONER: "Started provisioner controller", ATTACHER: "Starting CSI attacher",
             RESIZER: "Starting external resizer",
             SNAPSHOTTER: "Starting CSI snapshotter", SNAPSHOT_CONTROLLER: "Starting snapshot controller"}


def _await(component: str, proc: subprocess.Popen[bytes], log: Path, ready: Callable[[], bool | None],
           timeout: float) -> None:
    def exited() -> str | None:
        code = proc.poll()
        if code is None:
            return None
        how = f"exit code {code}" if code >= 0 else f"signal {-code}"
        return f"exited at start ({how}): {log_tail(log) or '(empty log)'}"
    try:
        poll_until(ready, timeout, component, interval=0.05, abort=exited)
    except PollTimeout as exc:
        detail = str(exc).removeprefix(f"{component}: ")
        if not exc.aborted:
            detail = f"did not start within {timeout:.0f}s ({log_tail(log) or 'empty log'})"
        raise ClusterError(f"{component} {detail} (log: {log})") from None


@dataclass(frozen=True)
class CsiBinaries:
    driver: Path
    provisioner: Path
    attacher: Path
    resizer: Path
    # external-snapshotter's two components and the VolumeSnapshot CRD files; None: a
    # cluster without snapshots (spawn_snapshots then starts nothing)
    snapshotter: Path | None = None
    snapshot_controller: Path | None = None
    snapshot_crds: tuple[Path, ...] = ()

    @property
    def snapshots(self) -> bool:
        return self.snapshotter is not None and self.snapshot_controller is not None and bool(self.snapshot_crds)


def spawn_stack(paths: CsiPaths, kubeconfig: Path, binaries: CsiBinaries, options: CsiOptions, start: Starter,
                data_root: Path | None = None) -> dict[str, subprocess.Popen[bytes]]:
    """Start the controller service, the fault proxy and the three sidecars without waiting (a
    sidecar waits for the driver's socket itself); `await_stack` then waits for all of them.

    `start(component, argv, env)` must record the process where the backend's teardown
    finds it (the local registry, or a ProcessBook); `data_root` is where the driver keeps
    zonal directories (kind: a directory its nodes mount)."""
    for d in (paths.root, paths.control_dir, paths.log(CONTROLLER).parent, data_root or paths.data_root):
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NAMESPACE=CAPACITY_NAMESPACE) if options.capacity_tracking else None
    return {CONTROLLER: start(CONTROLLER, controller_args(binaries.driver, paths, data_root, options), None),
            PROXY: start(PROXY, proxy_args(binaries.driver, paths, options), None),
            PROVISIONER: start(PROVISIONER, provisioner_args(binaries.provisioner, paths, kubeconfig, options), env),
            ATTACHER: start(ATTACHER, attacher_args(binaries.attacher, paths, kubeconfig), None),
            RESIZER: start(RESIZER, resizer_args(binaries.resizer, paths, kubeconfig, options), None)}


def spawn_snapshots(paths: CsiPaths, kubeconfig: Path, binaries: CsiBinaries, start: Starter,
                    options: CsiOptions | None = None) -> dict[str, subprocess.Popen[bytes]]:
    """csi-snapshotter and the snapshot-controller, once the VolumeSnapshot CRDs are
    established (install_snapshot_api); nothing when the binaries have no snapshots. A
    driver without copies (fault_no_copies) gets no sidecar: csi-snapshotter exits at start
    when the driver does not advertise CREATE_DELETE_SNAPSHOT."""
    if not binaries.snapshots:
        return {}
    assert binaries.snapshotter is not None and binaries.snapshot_controller is not None
    options = options or CsiOptions()
    procs = spawn_snapshot_controller(kubeconfig, binaries.snapshot_controller, start,
                                      options.node_snapshots and not options.fault_no_distributed_snapshotting)
    if not options.node_snapshots and not options.fault_no_copies:  # node snapshots: one sidecar per node instead
        procs[SNAPSHOTTER] = start(SNAPSHOTTER, snapshotter_args(binaries.snapshotter, paths, kubeconfig), None)
    return procs


def spawn_snapshot_controller(kubeconfig: Path, binary: Path, start: Starter,
                              distributed: bool = False) -> dict[str, subprocess.Popen[bytes]]:
    """The cluster's half of snapshots alone (a vendor's package brings its csi-snapshotter);
    `distributed`: contents labelled for the csi-snapshotters that run on nodes."""
    return {SNAPSHOT_CONTROLLER: start(SNAPSHOT_CONTROLLER, snapshot_controller_args(binary, kubeconfig, distributed),
                                       None)}


def install_snapshot_api(kube: Kube, crds: Sequence[Path], timeout: float = START_TIMEOUT) -> None:
    """The VolumeSnapshot CRDs from external-snapshotter's own files (an existing one is
    left as it is), then until the API server serves all of them (Established)."""
    names = []
    for path in crds:
        body = yaml.safe_load(path.read_text())
        body.setdefault("metadata", {}).setdefault("labels", {})[OWNED_LABEL] = "true"
        names.append(body["metadata"]["name"])
        try:
            kube.extensions.create_custom_resource_definition(body=body, _preload_content=False)
        except ApiException as exc:
            if exc.status != 409:
                raise ClusterError(f"VolumeSnapshot CRD {path.name}: {exc.status} {exc.reason}") from None

    def established() -> bool | None:
        for name in names:
            resp = kube.extensions.read_custom_resource_definition(name, _preload_content=False)
            conditions = (json.loads(resp.data).get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return None
        return True
    def discovered() -> bool | None:  # what a component's discovery check asks for (external-provisioner's)
        served = {r.name for r in kube.custom.get_api_resources(SNAPSHOT_GROUP, "v1").resources or []}  # 404: not yet
        return True if {"volumesnapshots", "volumesnapshotcontents", "volumesnapshotclasses"} <= served else None
    try:
        poll_until(established, timeout, f"VolumeSnapshot CRDs {names} established", interval=0.1)
        poll_until(discovered, timeout, f"{SNAPSHOT_GROUP}/v1 in the API server's discovery", interval=0.1)
    except PollTimeout as exc:
        raise ClusterError(str(exc)) from None


def await_stack(paths: CsiPaths, procs: dict[str, subprocess.Popen[bytes]], timeout: float = START_TIMEOUT) -> None:
    """Until the driver's socket answers and each sidecar's log says it started; a
    component that exits or never starts raises one ClusterError line naming it and its
    log (the caller stops the rest)."""
    _await(CONTROLLER, procs[CONTROLLER], paths.log(CONTROLLER), lambda: _socket_answers(paths.driver_socket), timeout)
    _await(PROXY, procs[PROXY], paths.log(PROXY), lambda: _socket_answers(paths.socket), timeout)
    await_logged(paths, procs, timeout)


# external-provisioner v6.4.0 runs its snapshot orphan sweep (--snapshot-orphan-sweep-interval)
# only when the VolumeSnapshot API was served at its start (cmd/csi-provisioner:
# IsVolumeSnapshotV1Available, asked once): a provisioner started before the CRDs never sweeps.
SWEEP_LOG = "Started SnapshotFinalizerProtection controller"


def await_logged(paths: CsiPaths, procs: dict[str, subprocess.Popen[bytes]], timeout: float = START_TIMEOUT) -> None:
    """Until each sidecar or controller among `procs` logs that it started (READY_LOG), and,
    where the stack snapshots (csi-snapshotter among `procs`), until the provisioner logs
    that its orphan sweep runs: the sweep interval the tests' bounds use is then one that runs."""
    for component in (c for c in (PROVISIONER, ATTACHER, RESIZER, SNAPSHOTTER, SNAPSHOT_CONTROLLER) if c in procs):
        log = paths.log(component)
        _await(component, procs[component], log, lambda log=log, c=component: _log_says(log, READY_LOG[c]),  # type: ignore[misc]
               timeout)
    if PROVISIONER in procs and SNAPSHOTTER in procs:
        log = paths.log(PROVISIONER)
        _await(f"{PROVISIONER} snapshot orphan sweep (needs the VolumeSnapshot API served before it starts)",
               procs[PROVISIONER], log, lambda: _log_says(log, SWEEP_LOG), timeout)


def start_stack(paths: CsiPaths, kubeconfig: Path, binaries: CsiBinaries, options: CsiOptions,
                book: ProcessBook, data_root: Path | None = None, timeout: float = START_TIMEOUT) -> None:
    """spawn_stack and await_stack through a ProcessBook; on any failure (Ctrl-C too)
    everything started is stopped before the error goes on."""
    try:
        await_stack(paths, spawn_stack(paths, kubeconfig, binaries, options, book.start, data_root), timeout)
    except BaseException:
        book.stop_all()
        raise


class ProcessBook:
    """A Starter/Stopper pair for a backend without a process registry (kind): records
    in `<csi root>/processes.json`, so `stop_all` finds them from any later process.
    `marker` is a string on every command line (the cluster's directory)."""

    def __init__(self, paths: CsiPaths, marker: str, tie_to_parent: bool = True):
        self.paths, self.marker, self.tie_to_parent = paths, marker, tie_to_parent
        self.file = paths.root / "processes.json"

    def _load(self) -> dict[str, ProcessRecord]:
        try:
            return {k: ProcessRecord.from_json(v) for k, v in json.loads(self.file.read_text()).items()}
        except (OSError, ValueError, KeyError):
            return {}

    def _save(self, records: dict[str, ProcessRecord]) -> None:
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps({k: v.to_json() for k, v in records.items()}))

    def start(self, component: str, argv: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
        proc, record = spawn(component, argv, self.paths.log(component), env=env, tie_to_parent=self.tie_to_parent)
        self._save({**self._load(), component: record})
        return proc

    def stop(self, component: str) -> None:
        records = self._load()
        if component in records:
            stop(records[component], self.marker)

    def stop_all(self) -> None:
        for component in reversed(list(self._load())):
            self.stop(component)

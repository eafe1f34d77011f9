"""What every backend hands the suites: a cluster handle with declared capabilities.

Suites ask for capabilities (STYLE 1); backends declare them. A suite that needs a
capability the cluster lacks skips with "backend X: no Y", it never fails for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pvchaos.kube.errors import ClusterError
from pvchaos.tools.versions import minor_of

__all__ = ["Capability", "CapabilityMissing", "ClusterBackend", "ClusterError", "ClusterHandle", "ComponentLogs",
           "ContainerFaults", "NodeFaults", "NodeStorageFaults"]


class Capability(StrEnum):
    """What a cluster (or a driver) can do. Values are the words suites write in
    `needs(...)`; an unknown word is rejected when tests are collected."""

    ZONES = "zones"  # nodes carry topology.kubernetes.io/zone in >= 2 zones
    DYNAMIC_ZONAL = "dynamic-zonal"  # a provisioner that writes zonal PV affinity
    DYNAMIC_LOCAL = "dynamic-local"  # a provisioner that writes hostname PV affinity
    STATIC_PV = "static-pv"  # the harness may create PVs by hand
    BLOCK = "block"
    RWX = "rwx"
    NODE_FAILURE = "node-failure"  # the harness can stop and restore a node's heartbeat
    NODE_LABELS = "node-labels"  # the harness may change labels and taints of nodes
    COMPONENT_RESTART = "component-restart"  # the harness can restart scheduler/controller-manager
    MUTABLE_PV_AFFINITY = "mutable-pv-affinity"  # MutablePVNodeAffinity gate is on
    OWNED = "owned"  # the harness created this cluster and may disturb it
    EPHEMERAL_STORAGE = "ephemeral-storage"  # nodes report ephemeral-storage allocatable
    REAL_KUBELET = "real-kubelet"  # pods really run and mount their volumes (kind)
    # dynamic volumes go through attach: kube-controller-manager's attach/detach controller
    # creates VolumeAttachments and a CSI attacher attaches them (the harness's CSI stack)
    ATTACH = "attach"
    # the harness's own provisioners, which fail on pvchaos.dev/fail-* class parameters
    # (docs/writing-suites.md#making-provisioning-fail); never a profile's driver
    PROVISIONING_FAILURES = "provisioning-failures"
    # the run's driver is pvchaos-csi itself: a test that reads or writes its control files
    # (capacity knobs, volume moves, its calls log, its node plugin unit) needs it; with a
    # vendor's driver such a test skips naming this, never silently (issue 35)
    HARNESS_DRIVER = "pvchaos-csi-control"
    # the backend can upgrade the running cluster's components in place (local:
    # clusters/local/upgrade.py; the handle's faults are the LocalCluster, see `upgradable`)
    IN_PLACE_UPGRADE = "in-place-upgrade"
    # nodes are containers: a node can crash (its machine stops) or be cut off the network
    # (kind: chaos.nodes.crash_node, partition_node)
    CONTAINER_FAULTS = "container-faults"
    # the CSI fault proxy sits between the controller sidecars and the driver's controller
    # socket (pvchaos-csi proxy; chaos.csi_calls.csi_call_fault with where=None)
    CSI_PROXY = "csi-proxy"
    # ...and that proxy fronts the vendor's driver of the run, not pvchaos-csi: a vendor
    # package on kind whose sockets certify rewired (clusters/vendor_proxy.py), so a
    # driver profile keeps csi-proxy (elsewhere a profile's driver has no proxy in front)
    CSI_PROXY_VENDOR = "csi-proxy-vendor"
    # a node can join the running cluster and leave it (local: chaos.node_join)
    NODE_JOIN = "node-join"
    # not an ability but a limit of the run's driver: it provisions only for the node a pod
    # was scheduled to (a vendor package's per-node provisioning without immediate binding),
    # so a test that needs an Immediate claim of the driver's class is not applicable
    WFFC_ONLY = "wffc-only"
    # the VolumeSnapshot API: upstream's CRDs and snapshot-controller in the cluster, and
    # the driver's csi-snapshotter sidecar (CREATE_DELETE_SNAPSHOT; a claim's dataSource a
    # VolumeSnapshot is restored by the external-provisioner)
    SNAPSHOTS = "snapshots"
    # a claim whose dataSource is another claim is a clone (the driver's CLONE_VOLUME)
    CLONES = "clones"
    # a bound claim's request can grow: the driver's csi-resizer sidecar (upstream's
    # external-resizer) calls ControllerExpandVolume, then the kubelet NodeExpandVolume where
    # the driver asks for it. pvchaos-csi's stack runs one; a vendor package must ship one
    EXPANSION = "expansion"
    # a bound claim's volumeAttributesClassName can change: csi-resizer's ControllerModifyVolume
    # (VolumeAttributesClass, GA in 1.34); the same sidecar as expansion
    MODIFY_VOLUME = "modify-volume"
    # CSI inline ephemeral volumes: a pod's `volumes[].csi` of the driver, no claim, no PV
    # (its CSIDriver's volumeLifecycleModes list Ephemeral; a profile's InlineVolumes)
    INLINE_EPHEMERAL = "inline-ephemeral"


    @classmethod
    def parse(cls, word: str) -> Capability:
        """The capability a `needs(...)` word names, or ValueError listing the known ones."""
        try:
            return cls(word)
        except ValueError:
            known = ", ".join(c.value for c in cls)
            raise ValueError(f"unknown capability {word!r}; known: {known}") from None


# Where volumes live on nodes with real kubelets: the provisioners' -hostpath-root, and
# the directory static stand-in PVs are turned into (kube.builders.mountable).
HOSTPATH_VOLUME_ROOT = "/var/lib/pvchaos/volumes"


@dataclass(frozen=True)
class CapabilityMissing:
    """Why a test skips: the capability, and who lacks it ("backend kind", "driver X").
    Reports read these fields (Allure labels), never the sentence."""

    capability: str
    source: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.source}: no {self.capability}" + (f" ({self.detail})" if self.detail else "")


class NodeFaults(Protocol):
    """How a backend fails and restores nodes and control-plane components."""

    def stop_node(self, node: str) -> None: ...
    def stop_nodes(self, nodes: list[str]) -> None: ...
    def start_node(self, node: str) -> None: ...
    def node_stopped(self, node: str) -> bool: ...
    def stop_component(self, component: str) -> None: ...
    def start_component(self, component: str) -> None: ...


@runtime_checkable
class ContainerFaults(NodeFaults, Protocol):
    """Faults of backends whose nodes are containers (the container-faults capability)."""

    def crash_node(self, node: str) -> None: ...
    def partition_node(self, node: str) -> None: ...


@runtime_checkable
class NodeJoins(Protocol):
    """A backend where a node can join the running cluster (local: a KWOK node created
    through the API, which the CSI registrar then gives the driver) and leave it again."""

    def join_node(self, name: str, zone: str, labels: dict[str, str]) -> None: ...
    def remove_node(self, name: str) -> None: ...


@runtime_checkable
class NodeStorageFaults(Protocol):
    """A node's storage side, where the node's filesystem and the CSI node plugin are real
    (kind): where a PV's data lies on its node and a command to read it, an operator's
    copy of a volume's directory, and the plugin stopped and started."""

    def volume_dir(self, pv: dict[str, Any]) -> str | None: ...
    def node_exec(self, node: str, command: str) -> str: ...

    def copy_between_nodes(self, source: str, target: str, path: str) -> None: ...
    def stop_node_plugin(self, node: str) -> None: ...
    def start_node_plugin(self, node: str) -> None: ...


@runtime_checkable
class ComponentLogs(Protocol):
    """A backend that reads a control-plane component's log where it runs (kind)."""

    def component_log(self, component: str) -> str: ...


@dataclass
class ClusterHandle:
    """A running cluster: where to reach it and what it can do."""

    name: str
    backend: str
    kubeconfig: Path
    context: str | None
    k8s_version: str
    capabilities: frozenset[str]
    feature_gates: dict[str, bool] = field(default_factory=dict)
    zonal_class_provisioner: str | None = None
    local_class_provisioner: str | None = None
    faults: NodeFaults | None = None
    directory: Path | None = None
    description: dict[str, str] = field(default_factory=dict)
    # Real kubelets mount volumes: stand-in CSI sources of static PVs become hostPath.
    mountable_volumes: bool = False

    @property
    def minor(self) -> int:
        """1.35.4 -> 35; 0 when the version is unknown."""
        return minor_of(self.k8s_version) or 0

    def component_log(self, component: str) -> str | None:
        """A control-plane component's log, where the backend can read it (local: its
        file; kind: the static pod's log on the control plane); None elsewhere."""
        if isinstance(self.faults, ComponentLogs):
            return self.faults.component_log(component)
        path = self.directory / "logs" / f"{component}.log" if self.directory else None
        return path.read_text(errors="replace") if path is not None and path.exists() else None

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def missing(self, *capabilities: str) -> list[str]:
        return [c for c in capabilities if c not in self.capabilities]


class ClusterBackend(Protocol):
    """The first sketch of a backend interface, which no backend implemented; backends are
    now `pvchaos.clusters.provider.Provider`s, chosen in `pvchaos.clusters.providers`.
    Kept because it is a public name (pvchaos.api lists this module)."""

    name: str

    def up(self) -> ClusterHandle: ...
    def down(self, handle: ClusterHandle) -> None: ...

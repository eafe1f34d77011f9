"""What a test asks of its cluster (`ClusterRequest`), what a run says for every cluster
(`ClusterDefaults`: topology, gates, version, storage stack), and the one exception a
backend raises for a cluster it cannot provide (`CannotProvide`: a skip with the reason).

Backends provide clusters for these (clusters/provider.py `provide`); the pool
(clusters/pool.py) is the policy on top: shared or fresh, how many at once, close.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pvchaos.clusters.common.gates import parse_feature_gates
from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.storage import HarnessStorage, StorageStack, VendorStorage
from pvchaos.clusters.topology import Topology
from pvchaos.clusters.vendor_package import load_package
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

if TYPE_CHECKING:
    from pvchaos.clusters.options import Options

__all__ = ["SHAPE_FIELDS", "CannotProvide", "ClusterDefaults", "ClusterRequest"]


@dataclass(frozen=True)
class ClusterRequest:
    """What a test asks of its cluster beyond the defaults (the `cluster` marker)."""

    feature_gates: tuple[tuple[str, bool], ...] = ()
    disabled_controllers: tuple[str, ...] = ()
    disabled_scheduler_plugins: tuple[str, ...] = ()
    provisioner: bool = True
    zones: tuple[str, ...] | None = None
    nodes_per_zone: int | None = None
    extra_kcm_flags: tuple[str, ...] = ()
    node_monitor_grace_seconds: int | None = None
    client_qps: int = 0  # kcm and scheduler client QPS/burst (LocalClusterConfig); 0: defaults
    client_burst: int = 0
    nodes_to_score_percent: int = 0  # the scheduler's percentageOfNodesToScore; 0: its default
    # The CSI stack (pvchaos/clusters/csi.py CsiOptions): capacity tracking, the provisioner's
    # --strict-topology and --immediate-topology, and each node's CSINode volume limit.
    csi_capacity_tracking: bool = False
    csi_strict_topology: bool = False
    csi_immediate_topology: bool = True
    csi_max_volumes_per_node: int = 0  # 0: the stack's default
    csi_capacity_poll_seconds: int = 0  # 0: the stack's default
    csi_fs_group_policy: str = ""  # the CSIDriver's fsGroupPolicy; "": the stack's default (File)
    csi_attach_required: bool = True  # the CSIDriver's attachRequired
    # snapshots cut on the nodes (upstream's distributed snapshotting; CsiOptions.node_snapshots)
    csi_node_snapshots: bool = False

    @classmethod
    def from_marker(cls, kwargs: dict[str, Any]) -> ClusterRequest:
        gates = kwargs.pop("feature_gates", {})
        known = set(cls.__dataclass_fields__)
        unknown = set(kwargs) - known
        if unknown:
            raise ValueError(f"cluster marker: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
        norm: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}  # checked by name above
        return cls(feature_gates=tuple(sorted(gates.items())), **norm)

    @property
    def is_default(self) -> bool:
        return self == ClusterRequest()

    def csi_options(self) -> CsiOptions:
        """How this request's CSI stack runs (both backends run the same stack)."""
        return CsiOptions(
            strict_topology=self.csi_strict_topology, immediate_topology=self.csi_immediate_topology,
            capacity_tracking=self.csi_capacity_tracking,
            max_volumes_per_node=self.csi_max_volumes_per_node or CsiOptions().max_volumes_per_node,
            capacity_poll_seconds=self.csi_capacity_poll_seconds or CsiOptions().capacity_poll_seconds,
            fs_group_policy=self.csi_fs_group_policy or CsiOptions().fs_group_policy,
            attach_required=self.csi_attach_required, node_snapshots=self.csi_node_snapshots)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.__dict__.items() if v != getattr(ClusterRequest(), k)]
        return ", ".join(parts) or "defaults"

    def storage(self, defaults: ClusterDefaults) -> StorageStack:
        """The storage stack of this request's cluster: the run's vendor package where it has
        one, else pvchaos-csi run as this request's CSI options say."""
        if defaults.storage is not None:
            return defaults.storage
        return HarnessStorage(self.csi_options())


@dataclass(frozen=True)
class ClusterDefaults:
    """What a cluster request does not say: the run's topology, feature gates, version and
    vendor storage (None: pvchaos-csi), parsed once (`pvchaos.run_config.resolve`)."""

    topology: Topology
    feature_gates: Mapping[str, bool]
    k8s_version: str
    storage: StorageStack | None = None

    @classmethod
    def parse(cls, options: Options) -> ClusterDefaults:
        """For a pool made without a resolved run configuration (tests, scripts)."""
        storage = VendorStorage(load_package(options.driver_package)) if options.driver_package else None
        return cls(Topology.parse(options.zones, options.nodes_per_zone), parse_feature_gates(options.feature_gates),
                   options.k8s_version or DEFAULT_K8S_VERSION, storage)


class CannotProvide(Exception):
    """The backend cannot give this test the cluster it needs: a skip, not a failure."""


# what `shaped-clusters` backends start: the shape, the gates and how the CSI stack runs
SHAPE_FIELDS = ("zones", "nodes_per_zone", "feature_gates", "csi_capacity_tracking", "csi_strict_topology",
                "csi_immediate_topology", "csi_max_volumes_per_node", "csi_capacity_poll_seconds",
                "csi_fs_group_policy", "csi_attach_required", "csi_node_snapshots")

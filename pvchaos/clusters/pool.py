"""Hands each pytest worker its clusters, and takes them all down at the end.

Isolation model (docs/isolation.md):
- non-disruptive tests share one cluster per worker; each test has its own namespace
  and uniquely named cluster-scoped objects;
- a test that needs a differently configured cluster (gate off, a controller or plugin
  disabled) gets one per worker per configuration, shared with tests asking the same;
- a disruptive test (node or zone faults, node label changes, component restarts) gets
  a fresh cluster of its own, destroyed right after it. Local clusters start in a few
  seconds, so this costs less than coordinating faults between tests.
Backends without the `cluster-per-request` feature (clusters/provider.py; today existing
and kind) have one cluster per run, reached through their provider. A backend with the
`shaped-clusters` feature (kind) also starts, one at a time, a cluster of the zones, nodes
per zone and feature gates a test asks for; other configurations, and every one on
backends that cannot start clusters (existing), skip with the reason.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pvchaos.clusters import providers
from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.local.cluster import LocalCluster, local_capabilities, missing_details
from pvchaos.clusters.local.config import LocalClusterConfig, gates_for_version, minor_of, parse_feature_gates, sized
from pvchaos.clusters.options import Options
from pvchaos.clusters.provider import Feature, Teardown
from pvchaos.clusters.topology import Topology
from pvchaos.kube import naming
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

Configure = Callable[[LocalClusterConfig], LocalClusterConfig]  # last word on a local cluster's configuration
Started = Callable[[LocalCluster, ClusterHandle], None]  # told of every local cluster once it is up


def _same(cfg: LocalClusterConfig) -> LocalClusterConfig:
    return cfg


def _nothing(local: LocalCluster, handle: ClusterHandle) -> None:
    return None


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

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.__dict__.items() if v != getattr(ClusterRequest(), k)]
        return ", ".join(parts) or "defaults"


@dataclass
class ClusterPool:
    """The clusters of one worker process."""

    options: Options
    configure: Configure = _same  # the plugin routes these to its hooks (pvchaos.plugin.hookspecs)
    started: Started = _nothing
    _shared: dict[ClusterRequest, tuple[LocalCluster, ClusterHandle]] = field(default_factory=dict)
    _external: ClusterHandle | None = None
    _external_down: Teardown | None = None  # set when the harness created the cluster (kind)
    _shaped: tuple[ClusterRequest, ClusterHandle, Teardown | None] | None = None  # kind: the cluster of a shape

    @property
    def per_request(self) -> bool:
        """The backend starts a cluster per request (the local backend, through this pool)."""
        return providers.has(self.options.backend, Feature.CLUSTER_PER_REQUEST)

    # -- local ----------------------------------------------------------------------------
    def _local_config(self, request: ClusterRequest) -> LocalClusterConfig:
        topo = Topology.parse(self.options.zones, self.options.nodes_per_zone)
        if request.zones is not None or request.nodes_per_zone is not None:
            topo = replace(topo, zones=request.zones or topo.zones,
                           nodes_per_zone=request.nodes_per_zone or topo.nodes_per_zone)
        gates = parse_feature_gates(self.options.feature_gates)
        gates.update(dict(request.feature_gates))
        version = self.options.k8s_version or DEFAULT_K8S_VERSION
        cfg = LocalClusterConfig(
            name=f"{naming.slug(naming.worker_id(), 6)}-{secrets.token_hex(3)}",
            k8s_version=version,
            topology=topo, feature_gates=gates_for_version(gates, minor_of(version)),
            disabled_controllers=request.disabled_controllers,
            disabled_scheduler_plugins=request.disabled_scheduler_plugins,
            provisioner=request.provisioner,
            extra_kcm_flags=request.extra_kcm_flags,
            client_qps=request.client_qps, client_burst=request.client_burst,
            nodes_to_score_percent=request.nodes_to_score_percent,
        )
        cfg = replace(cfg, csi=CsiOptions(
            strict_topology=request.csi_strict_topology, immediate_topology=request.csi_immediate_topology,
            capacity_tracking=request.csi_capacity_tracking,
            max_volumes_per_node=request.csi_max_volumes_per_node or CsiOptions().max_volumes_per_node,
            capacity_poll_seconds=request.csi_capacity_poll_seconds or CsiOptions().capacity_poll_seconds))
        cfg = sized(cfg)
        if request.node_monitor_grace_seconds:
            cfg = replace(cfg, node_monitor_grace_seconds=request.node_monitor_grace_seconds)
        return self.configure(cfg)

    def _start(self, request: ClusterRequest) -> tuple[LocalCluster, ClusterHandle]:
        local = LocalCluster(self._local_config(request))
        handle = local.up()
        try:
            self.started(local, handle)
        except BaseException:
            local.down()
            raise
        return local, handle

    def capabilities(self, request: ClusterRequest) -> frozenset[str]:
        """What the cluster for this request can do, without starting a new one: a local
        configuration's are known in advance; an external cluster is reached once, shared."""
        if self.per_request:
            if request in self._shared:
                return self._shared[request][1].capabilities
            return local_capabilities(self._local_config(request))
        return self._external_for(request).capabilities

    def missing_details(self, request: ClusterRequest) -> dict[str, str]:
        """Capability -> why this request's cluster lacks it, where the backend can say."""
        if self.per_request:
            return missing_details(self._local_config(request))
        return {}

    def shared(self, request: ClusterRequest) -> ClusterHandle:
        """The worker's cluster for this configuration, started on first use."""
        if not self.per_request:
            return self._external_for(request)
        if request not in self._shared:
            self._shared[request] = self._start(request)
        return self._shared[request][1]

    def fresh(self, request: ClusterRequest) -> tuple[ClusterHandle, Teardown | None]:
        """A cluster for one disruptive test and how to down it (None: not ours to down)."""
        if not self.per_request:
            return self._external_for(request), None
        local, handle = self._start(request)
        return handle, local.down

    # -- external ---------------------------------------------------------------------------
    def _external_for(self, request: ClusterRequest) -> ClusterHandle:
        if not request.is_default:
            return self._shaped_for(request)
        if self._external is None:
            self._external, self._external_down = _connect_external(self.options)
        return self._external

    def _shaped_for(self, request: ClusterRequest) -> ClusterHandle:
        """A cluster of the shape and gates this request asks for, from a backend that
        starts one per shape (kind: `shaped-clusters`); one at a time, beside the run's own."""
        options = shaped_options(self.options, request)
        if self._shaped is not None and self._shaped[0] == request:
            return self._shaped[1]
        self._down_shaped()
        handle, down = _connect_external(options)
        self._shaped = (request, handle, down)
        return handle

    def _down_shaped(self) -> None:
        if self._shaped is None:
            return
        _, handle, down = self._shaped
        self._shaped = None
        if down is None:
            return
        if self.options.keep_cluster:
            print(f"[pvchaos] kept cluster {handle.name}: export KUBECONFIG={handle.kubeconfig}")
            return
        down()

    def close(self) -> None:
        """Down every cluster this worker started (unless --keep-cluster)."""
        errors = []
        while self._shared:
            _, (local, handle) = self._shared.popitem()
            if self.options.keep_cluster:
                print(f"[pvchaos] kept cluster {handle.name}: export KUBECONFIG={handle.kubeconfig}")
                continue
            try:
                local.down()
            except Exception as exc:  # noqa: BLE001 - gathered below
                errors.append(exc)
        try:
            self._down_shaped()
        except Exception as exc:  # noqa: BLE001 - gathered below
            errors.append(exc)
        if self._external_down is not None and not self.options.keep_cluster:
            down, self._external_down = self._external_down, None
            try:
                down()
            except Exception as exc:  # noqa: BLE001 - gathered below
                errors.append(exc)
        if errors:
            raise ExceptionGroup("cluster teardown failed", errors)


class CannotProvide(Exception):
    """The backend cannot give this test the cluster it needs: a skip, not a failure."""


SHAPE_FIELDS = ("zones", "nodes_per_zone", "feature_gates")  # what `shaped-clusters` backends start


def shaped_options(options: Options, request: ClusterRequest) -> Options:
    """The run's options for a cluster of the request's zones, nodes per zone and gates
    (the same cluster request a local cluster takes), or CannotProvide with the reason:
    the backend does not start clusters per shape, or the request asks for more."""
    if not providers.has(options.backend, Feature.SHAPED_CLUSTERS):
        raise CannotProvide(f"backend {options.backend}: cannot start a cluster with {request.describe()}")
    rest = replace(request, **{f: getattr(ClusterRequest(), f) for f in SHAPE_FIELDS})
    if not rest.is_default:
        raise CannotProvide(f"backend {options.backend}: cannot start a cluster with {rest.describe()} "
                            f"(it starts clusters of other zones, nodes and feature gates only)")
    gates = {**parse_feature_gates(options.feature_gates), **dict(request.feature_gates)}
    return replace(options,
                   zones=",".join(request.zones) if request.zones is not None else options.zones,
                   nodes_per_zone=request.nodes_per_zone or options.nodes_per_zone,
                   feature_gates=",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items())))


def _connect_external(options: Options) -> tuple[ClusterHandle, Teardown | None]:
    """The handle, and how to delete the cluster when the harness created it (kind)."""
    try:
        backend = providers.provider(options.backend)
    except ValueError as exc:
        raise ClusterError(str(exc)) from None
    return backend.connect(options)


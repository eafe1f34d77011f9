"""The local backend as a `Provider` (clusters/provider.py): a real control plane per
cluster request, processes of this machine, nodes by KWOK."""

from __future__ import annotations

import argparse
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING

from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.clusters.common.gates import check_feature_gates
from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.local.cluster import LocalCluster, local_capabilities, missing_details
from pvchaos.clusters.local.config import LocalClusterConfig, gates_for_version, minor_of, sized
from pvchaos.clusters.local.registry import destroy, list_clusters
from pvchaos.clusters.provider import Feature, ProvideHooks, Teardown
from pvchaos.clusters.request import CannotProvide, ClusterDefaults, ClusterRequest
from pvchaos.clusters.storage import HarnessStorage
from pvchaos.clusters.topology import Topology
from pvchaos.kube import naming
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.csi_driver import ensure_csi_driver
from pvchaos.tools.csi_sidecars import ensure_csi_sidecars
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

if TYPE_CHECKING:
    from pvchaos.clusters.options import Options


class LocalProvider:
    name = "local"
    features = frozenset({Feature.CLUSTER_PER_REQUEST, Feature.HOST_PROCESSES, Feature.STARTS_CLUSTERS})

    def problem(self, options: Options) -> str | None:
        if options.driver_package:
            return ("backend local: --driver-package needs real kubelets to run a vendor's node plugin; "
                    "its nodes are KWOK nodes (use --backend kind)")
        return None

    def prepare(self, options: Options) -> Teardown | None:
        ensure_binaries(options.k8s_version or DEFAULT_K8S_VERSION)
        ensure_csi_sidecars()  # the CSI stack every local cluster runs: built before any worker needs it
        ensure_csi_driver()
        return None

    def connect(self, options: Options, defaults: ClusterDefaults,
                hooks: ProvideHooks | None = None) -> tuple[ClusterHandle, Teardown | None]:
        """A cluster of the run's defaults (the pool asks `provide` per request instead)."""
        return self.provide(options, ClusterRequest(), defaults, hooks or ProvideHooks())

    # -- a cluster per request --------------------------------------------------------------
    def config_for(self, request: ClusterRequest, defaults: ClusterDefaults,
                   hooks: ProvideHooks) -> LocalClusterConfig:
        """The configuration of a local cluster for this request, with the run's last word on
        it (`hooks.configure`); pure but for its random name."""
        storage = request.storage(defaults)
        if not isinstance(storage, HarnessStorage):
            raise CannotProvide(f"backend local: cannot run driver {storage.driver}'s package (KWOK nodes have no "
                                f"kubelet to run its node plugin)")
        if storage.csi.node_snapshots:
            raise CannotProvide("backend local: cannot cut snapshots on the nodes (distributed snapshotting): KWOK "
                                "nodes run no node plugin for a csi-snapshotter to sit beside, and a node-local "
                                "volume has no bytes there; it needs real kubelets (--backend kind)")
        topo = defaults.topology
        if request.zones is not None or request.nodes_per_zone is not None:
            topo = replace(topo, zones=request.zones or topo.zones,
                           nodes_per_zone=request.nodes_per_zone or topo.nodes_per_zone)
        gates = {**defaults.feature_gates, **dict(request.feature_gates)}
        cfg = LocalClusterConfig(
            name=f"{naming.slug(naming.worker_id(), 6)}-{secrets.token_hex(3)}",
            k8s_version=defaults.k8s_version,
            topology=topo, feature_gates=gates_for_version(gates, minor_of(defaults.k8s_version)),
            disabled_controllers=request.disabled_controllers,
            disabled_scheduler_plugins=request.disabled_scheduler_plugins,
            provisioner=request.provisioner,
            extra_kcm_flags=request.extra_kcm_flags,
            client_qps=request.client_qps, client_burst=request.client_burst,
            nodes_to_score_percent=request.nodes_to_score_percent,
            csi=storage.csi,
        )
        cfg = sized(cfg)
        if request.node_monitor_grace_seconds:
            cfg = replace(cfg, node_monitor_grace_seconds=request.node_monitor_grace_seconds)
        configured: LocalClusterConfig = hooks.configure(cfg)
        return configured

    def capabilities(self, request: ClusterRequest, defaults: ClusterDefaults,
                     hooks: ProvideHooks) -> frozenset[str]:
        return local_capabilities(self.config_for(request, defaults, hooks))

    def missing_details(self, request: ClusterRequest, defaults: ClusterDefaults,
                        hooks: ProvideHooks) -> dict[str, str]:
        return missing_details(self.config_for(request, defaults, hooks))

    def provide(self, options: Options, request: ClusterRequest, defaults: ClusterDefaults,
                hooks: ProvideHooks) -> tuple[ClusterHandle, Teardown | None]:
        """A new local cluster: the request's configuration, the run's last word on it
        (`hooks.configure`), up, and `hooks.started` told of it."""
        local = LocalCluster(self.config_for(request, defaults, hooks))
        handle = local.up()
        try:
            hooks.started(local, handle)
        except BaseException:
            local.down()
            raise
        return handle, local.down

    def cluster_up(self, args: argparse.Namespace) -> ClusterHandle:
        cfg = LocalClusterConfig(
            name=args.name, k8s_version=args.k8s_version,
            topology=Topology.parse(args.zones, args.nodes_per_zone),
            feature_gates=check_feature_gates(args.feature_gates, args.k8s_version),
            disabled_controllers=tuple(args.disable_controller),
            disabled_scheduler_plugins=tuple(args.disable_scheduler_plugin),
            extra_kcm_flags=tuple(args.kcm_flag),
            provisioner=not args.no_provisioner, provisioner_kind=args.provisioner,
            csi=CsiOptions(max_volumes_per_node=args.csi_max_volumes_per_node),
        )
        return LocalCluster(cfg, detached=True).up()

    def cluster_down(self, name: str | None) -> list[str]:
        states = list_clusters()
        chosen = states if name is None else [s for s in states if s.name == name]
        if name is not None and not chosen:
            raise ClusterError(f"no local cluster named {name!r}; see: pvchaos cluster list")
        for state in chosen:
            destroy(state)
        return [f"removed cluster {s.name}" for s in chosen]

    def cluster_list(self) -> list[str]:
        states = list_clusters()
        lines = [] if states else ["no local clusters"]
        for s in states:
            alive = s.alive_components()
            health = "running" if len(alive) == len(s.processes) else f"{len(alive)}/{len(s.processes)} processes alive"
            owner = "detached" if s.detached else f"owned by pid {s.owner_pid}" + ("" if s.owner_alive() else " (dead)")
            lines.append(f"{s.name}\t{s.k8s_version}\t{health}\t{owner}\t{s.directory / 'kubeconfig'}")
        return lines


PROVIDER = LocalProvider()

"""The local backend as a `Provider` (clusters/provider.py): a real control plane per
cluster request, processes of this machine, nodes by KWOK."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.clusters.common.gates import check_feature_gates
from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.local.registry import destroy, list_clusters
from pvchaos.clusters.provider import Feature, Teardown
from pvchaos.clusters.topology import Topology
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
        return None

    def prepare(self, options: Options) -> Teardown | None:
        ensure_binaries(options.k8s_version or DEFAULT_K8S_VERSION)
        ensure_csi_sidecars()  # the CSI stack every local cluster runs: built before any worker needs it
        ensure_csi_driver()
        return None

    def connect(self, options: Options) -> tuple[ClusterHandle, Teardown | None]:
        raise ClusterError("backend local: the pool starts a cluster per request (clusters/pool.py)")

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

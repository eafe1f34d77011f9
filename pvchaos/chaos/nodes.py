"""Node failure and zone outage through the backend's NodeFaults (local: stop the
node's KWOK controller, so its Lease expires as with a dead kubelet)."""

from __future__ import annotations

from functools import partial

import allure

from pvchaos.clusters.backend import ClusterHandle, NodeFaults
from pvchaos.clusters.topology import ZONE_KEY
from pvchaos.conformance.types import NodeName, ZoneName
from pvchaos.kube import kinds
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube
from pvchaos.kube.objects import name, zone


def _faults(cluster: ClusterHandle) -> NodeFaults:
    if cluster.faults is None:
        raise RuntimeError(f"backend {cluster.backend} cannot fail nodes (no node-failure capability)")
    return cluster.faults


@allure.step("fail node {node}")
def fail_node(cleanup: Cleanup, cluster: ClusterHandle, node: str) -> NodeName:
    """Stop the node's heartbeat; its return is registered first."""
    faults = _faults(cluster)
    cleanup.push(f"restore node {node}", lambda: faults.start_node(node))
    faults.stop_node(node)
    return NodeName(node)


def _container_fault(cleanup: Cleanup, cluster: ClusterHandle, node: str, fault: str, undo: str) -> NodeName:
    """A fault only container backends have (kind); the node's return is registered first."""
    faults = _faults(cluster)
    inject = getattr(faults, fault, None)
    if inject is None:
        raise RuntimeError(f"backend {cluster.backend} has no {fault.replace('_', ' ')} (it needs containers: kind)")
    cleanup.push(f"{undo} {node}", lambda: faults.start_node(node))
    inject(node)
    return NodeName(node)


@allure.step("crash node {node} (its kubelet, runtime and containers stop)")
def crash_node(cleanup: Cleanup, cluster: ClusterHandle, node: str) -> NodeName:
    """Stop the node's machine, not only its heartbeat."""
    return _container_fault(cleanup, cluster, node, "crash_node", "boot again node")


@allure.step("partition node {node} from the cluster network")
def partition_node(cleanup: Cleanup, cluster: ClusterHandle, node: str) -> NodeName:
    """Disconnect the node's network; it keeps running and keeps its pods."""
    return _container_fault(cleanup, cluster, node, "partition_node", "reconnect node")


@allure.step("restore node {node}")
def restore_node(cluster: ClusterHandle, node: str) -> NodeName:
    _faults(cluster).start_node(node)
    return NodeName(node)


def nodes_in_zone(kube: Kube, zone: str) -> list[NodeName]:
    nodes, _ = kinds.list_objects(kube, "Node", label_selector=f"{ZONE_KEY}={zone}")
    return sorted(NodeName(n["metadata"]["name"]) for n in nodes)


@allure.step("take zone {zone} down")
def zone_outage(cleanup: Cleanup, cluster: ClusterHandle, kube: Kube, zone: str) -> list[NodeName]:
    """Fail every node of one zone; all returns are registered before the first failure."""
    nodes = nodes_in_zone(kube, zone)
    if not nodes:
        raise ValueError(f"zone {zone!r} has no nodes")
    return fail_nodes(cleanup, cluster, nodes, f"zone {zone}")


@allure.step("fail nodes {nodes} at once")
def fail_nodes(cleanup: Cleanup, cluster: ClusterHandle, nodes: list[NodeName], what: str = "outage") -> list[NodeName]:
    """Fail several nodes at the same instant; every return is registered first."""
    faults = _faults(cluster)
    for n in nodes:
        cleanup.push(f"restore node {n} ({what})", partial(faults.start_node, n))
    faults.stop_nodes(list(nodes))
    still_up = [n for n in nodes if not faults.node_stopped(n)]
    if still_up:
        raise RuntimeError(f"{what}: nodes {still_up} could not be failed")
    return list(nodes)


@allure.step("take every zone down")
def cluster_outage(cleanup: Cleanup, cluster: ClusterHandle, kube: Kube) -> list[NodeName]:
    """Every node of every zone (a control-plane Node, in no zone, keeps running)."""
    nodes, _ = kinds.list_objects(kube, "Node")
    zonal = [n for n in nodes if zone(n)]
    return fail_nodes(cleanup, cluster, sorted(NodeName(name(n)) for n in zonal), "every zone")


def zones(kube: Kube) -> list[ZoneName]:
    nodes, _ = kinds.list_objects(kube, "Node")
    return sorted({ZoneName(z) for n in nodes if (z := (n["metadata"].get("labels") or {}).get(ZONE_KEY))})

"""Node failure and zone outage through the backend's NodeFaults (local: stop the
node's KWOK controller, so its Lease expires as with a dead kubelet).

Every injector takes the workspace (chaos/fault.py `Target`), registers each node's
return before it acts, and returns a `Fault` whose `restore()` brings exactly those nodes
back and takes their returns off the cleanup stack. Crashing and partitioning a node need
the container-faults capability (kind), found by type (`ContainerFaults`), not by name.
"""

from __future__ import annotations

from functools import partial

import allure

from pvchaos.chaos.fault import Fault, Target, apply, combine, register
from pvchaos.chaos.old_forms import old_form, returns_node, returns_touched
from pvchaos.clusters.backend import Capability, ClusterHandle, ContainerFaults, NodeFaults, NodeStorageFaults
from pvchaos.clusters.topology import ZONE_KEY
from pvchaos.conformance.types import NodeName, ZoneName
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube
from pvchaos.kube.objects import name, zone


def _faults(cluster: ClusterHandle) -> NodeFaults:
    if cluster.faults is None:
        raise RuntimeError(f"backend {cluster.backend} cannot fail nodes (no node-failure capability)")
    return cluster.faults


@old_form(("cleanup", "cluster"), returns_node)
@allure.step("fail node {node}")
def fail_node(ws: Target, node: str) -> Fault:
    """Stop the node's heartbeat; its return is registered first."""
    faults = _faults(ws.cluster)
    return apply(ws.cleanup, f"fail node {node}", (NodeName(node),), partial(faults.stop_node, node),
                 partial(faults.start_node, node), f"restore node {node}")


def _container_faults(cluster: ClusterHandle, fault: str) -> ContainerFaults:
    faults = _faults(cluster)
    if not cluster.has(Capability.CONTAINER_FAULTS) or not isinstance(faults, ContainerFaults):
        raise RuntimeError(f"backend {cluster.backend}: no {Capability.CONTAINER_FAULTS} ({fault} needs nodes "
                           "that are containers: kind)")
    return faults


@old_form(("cleanup", "cluster"), returns_node)
@allure.step("crash node {node} (its kubelet, runtime and containers stop)")
def crash_node(ws: Target, node: str) -> Fault:
    """Stop the node's machine, not only its heartbeat; restoring boots it again."""
    faults = _container_faults(ws.cluster, "crash node")
    return apply(ws.cleanup, f"crash node {node}", (NodeName(node),), partial(faults.crash_node, node),
                 partial(faults.start_node, node), f"boot again node {node}")


@allure.step("stop the kubelet of node {node} (the node and its containers keep running)")
def stop_kubelet(ws: Target, node: str) -> Fault:
    """Only the kubelet stops: pods bound to the node are not started until `restore()`
    starts it again, which then admits each of them as a kubelet does at start-up."""
    faults = ws.cluster.faults
    if not isinstance(faults, NodeStorageFaults):
        raise RuntimeError(f"backend {ws.cluster.backend}: no kubelet to stop (real-kubelet: kind)")
    return apply(ws.cleanup, f"stop kubelet {node}", (NodeName(node),),
                 partial(faults.node_exec, node, "systemctl stop kubelet"),
                 partial(faults.node_exec, node, "systemctl start kubelet"), f"start the kubelet of {node}")


@old_form(("cleanup", "cluster"), returns_node)
@allure.step("partition node {node} from the cluster network")
def partition_node(ws: Target, node: str) -> Fault:
    """Disconnect the node's network; it keeps running and keeps its pods."""
    faults = _container_faults(ws.cluster, "partition node")
    return apply(ws.cleanup, f"partition node {node}", (NodeName(node),), partial(faults.partition_node, node),
                 partial(faults.start_node, node), f"reconnect node {node}")


@allure.step("restore node {node}")
def restore_node(cluster: ClusterHandle, node: str) -> NodeName:
    """Bring a node back that no handle holds (a fault's own `restore()` is the rule)."""
    _faults(cluster).start_node(node)
    return NodeName(node)


def nodes_in_zone(kube: Kube, zone: str) -> list[NodeName]:
    nodes, _ = kinds.list_objects(kube, "Node", label_selector=f"{ZONE_KEY}={zone}")
    return sorted(NodeName(n["metadata"]["name"]) for n in nodes)


@old_form(("cleanup", "cluster", "kube"), returns_touched)
@allure.step("take zone {zone} down")
def zone_outage(ws: Target, zone: str) -> Fault:
    """Fail every node of one zone; all returns are registered before the first failure."""
    nodes = nodes_in_zone(ws.kube, zone)
    if not nodes:
        raise ValueError(f"zone {zone!r} has no nodes")
    return fail_nodes(ws, nodes, f"zone {zone}")


@old_form(("cleanup", "cluster"), returns_touched)
@allure.step("fail nodes {nodes} at once")
def fail_nodes(ws: Target, nodes: list[NodeName], what: str = "outage") -> Fault:
    """Fail several nodes at the same instant; every return is registered first. The
    handle has one part per node, each restorable on its own."""
    faults = _faults(ws.cluster)
    parts = [register(ws.cleanup, f"fail node {n}", (n,), partial(faults.start_node, n), f"restore node {n} ({what})")
             for n in nodes]
    faults.stop_nodes(list(nodes))
    still_up = [n for n in nodes if not faults.node_stopped(n)]
    if still_up:
        raise RuntimeError(f"{what}: nodes {still_up} could not be failed")
    return combine(what, parts)


@old_form(("cleanup", "cluster", "kube"), returns_touched)
@allure.step("take every zone down")
def cluster_outage(ws: Target) -> Fault:
    """Every node of every zone (a control-plane Node, in no zone, keeps running)."""
    nodes, _ = kinds.list_objects(ws.kube, "Node")
    zonal = [n for n in nodes if zone(n)]
    return fail_nodes(ws, sorted(NodeName(name(n)) for n in zonal), "every zone")


def zones(kube: Kube) -> list[ZoneName]:
    nodes, _ = kinds.list_objects(kube, "Node")
    return sorted({ZoneName(z) for n in nodes if (z := (n["metadata"].get("labels") or {}).get(ZONE_KEY))})

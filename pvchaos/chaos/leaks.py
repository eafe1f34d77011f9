"""Proof that a disruptive test left no fault behind: after its cleanup, every node runs
again (its heartbeat controller is up, its Lease renewed, Ready) with exactly the labels
and taints it had before the test."""

from __future__ import annotations

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import State, wait_for_state

NodeState = dict[str, tuple[dict[str, str], list[tuple[str, str, str]]]]
_CONTROLLER_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


def _taints(node: Obj) -> list[tuple[str, str, str]]:
    return sorted((t.get("key", ""), t.get("value", "") or "", t.get("effect", ""))
                  for t in (node.get("spec") or {}).get("taints") or [])


def node_state(kube: Kube) -> NodeState:
    """Labels and taints of every node, to compare after the test."""
    nodes, _ = kinds.list_objects(kube, "Node")
    return {n["metadata"]["name"]: (dict(n["metadata"].get("labels") or {}), _taints(n)) for n in nodes}


def assert_restored(kube: Kube, cluster: ClusterHandle, before: NodeState, timeout: float = 20) -> None:
    """Raise AssertionError naming every node still failed, relabelled or tainted."""
    stopped = [n for n in before if cluster.faults is not None and cluster.faults.node_stopped(n)]
    if stopped:
        raise AssertionError(f"fault left injected: nodes {stopped} still have no heartbeat after cleanup")

    def differences(state: State) -> list[str]:
        out = []
        for name, (labels, taints) in before.items():
            node = state.get(name)
            if node is None:
                out.append(f"{name}: deleted")
                continue
            if o.ready(node) != "True":
                out.append(f"{name}: not Ready")
            if dict(node["metadata"].get("labels") or {}) != labels:
                out.append(f"{name}: labels {node['metadata'].get('labels')} != {labels}")
            now = [t for t in _taints(node) if t[0] not in _CONTROLLER_TAINTS]
            if now != [t for t in taints if t[0] not in _CONTROLLER_TAINTS] or any(
                    t[0] in _CONTROLLER_TAINTS for t in _taints(node)):
                out.append(f"{name}: taints {_taints(node)} != {taints}")
        return out

    last: list[list[str]] = [[]]

    def restored(state: State) -> bool | None:
        last[0] = differences(state)
        return True if not last[0] else None

    try:
        wait_for_state(kube, "Node", restored, "every node restored as before the test", timeout=timeout)
    except AssertionError:
        raise AssertionError("fault left injected after cleanup: " + "; ".join(last[0])) from None

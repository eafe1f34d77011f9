"""Observing node health: Ready condition and taints, awaited through the one wait helper."""

from __future__ import annotations

import allure

from pvchaos.conformance import messages
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import NOT_READY, UNREACHABLE, has_taint
from pvchaos.kube.wait import wait_for

__all__ = ["NOT_READY", "UNREACHABLE", "has_taint", "wait_node_ready", "wait_node_unreachable", "wait_taint_gone"]


@allure.step("node {node} turns Unknown and unreachable-tainted")
def wait_node_unreachable(ws: Workspace, node: str, timeout: float = 60) -> Obj:
    """Ready=Unknown with the controller's message, and both unreachable taints. The node
    lifecycle controller adds the NoExecute taint (eviction) and the NoSchedule one
    (scheduling) in separate passes: in between, a pod that tolerates the NoExecute taint
    (every pod does, for 300 s by default) can still be scheduled onto the dead node, and a
    test that goes on after the first taint alone races the second."""
    got = wait_for(ws.kube, "Node", node, lambda n: o.ready(n) == "Unknown" and has_taint(n, UNREACHABLE, "NoExecute")
                   and has_taint(n, UNREACHABLE, "NoSchedule"),
                   "Ready=Unknown and taints node.kubernetes.io/unreachable:NoExecute and :NoSchedule", None, timeout,
                   timer="node-monitor-grace-period")
    wanted = messages.any_of("NODE_UNREACHABLE_MESSAGE")
    assert any(w in o.ready_message(got) for w in wanted), f"Ready message {o.ready_message(got)!r}, expected {wanted}"
    return got


@allure.step("node {node} is Ready again")
def wait_node_ready(ws: Workspace, node: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "Node", node, lambda n: o.ready(n) == "True", "Ready=True", None, timeout)


@allure.step("taint {key} leaves node {node}")
def wait_taint_gone(ws: Workspace, node: str, key: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "Node", node, lambda n: not has_taint(n, key), f"no {key} taint", None, timeout)

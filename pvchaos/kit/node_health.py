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
    """Ready=Unknown with the controller's message, and the NoExecute unreachable taint."""
    got = wait_for(ws.kube, "Node", node, lambda n: o.ready(n) == "Unknown" and has_taint(n, UNREACHABLE, "NoExecute"),
                   "Ready=Unknown and taint node.kubernetes.io/unreachable:NoExecute", None, timeout)
    wanted = messages.any_of("NODE_UNREACHABLE_MESSAGE")
    assert any(w in o.ready_message(got) for w in wanted), f"Ready message {o.ready_message(got)!r}, expected {wanted}"
    return got


@allure.step("node {node} is Ready again")
def wait_node_ready(ws: Workspace, node: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "Node", node, lambda n: o.ready(n) == "True", "Ready=True", None, timeout)


@allure.step("taint {key} leaves node {node}")
def wait_taint_gone(ws: Workspace, node: str, key: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "Node", node, lambda n: not has_taint(n, key), f"no {key} taint", None, timeout)

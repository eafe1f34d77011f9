"""Observing node health: Ready condition and taints, awaited through the one wait helper."""

from __future__ import annotations

from typing import Any

import allure

from conformance import messages
from pvchaos.resources import Obj
from pvchaos.waiting import wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


def node_ready_status(node: Obj | None) -> str | None:
    for c in ((node or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def ready_message(node: Obj | None) -> str:
    for c in ((node or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("message") or "")
    return ""


def has_taint(node: Obj | None, key: str, effect: str) -> bool:
    return any(t.get("key") == key and t.get("effect") == effect
               for t in ((node or {}).get("spec") or {}).get("taints") or [])


@allure.step("node {node} turns Unknown and unreachable-tainted")
def wait_node_unreachable(ws: Any, node: str, timeout: float = 60) -> Obj:
    """Ready=Unknown with the controller's message, and the NoExecute unreachable taint."""
    got = wait_for(ws.kube, "Node", node,
                   lambda o: node_ready_status(o) == "Unknown" and has_taint(o, UNREACHABLE, "NoExecute"),
                   "Ready=Unknown and taint node.kubernetes.io/unreachable:NoExecute", None, timeout)
    assert got is not None
    wanted = messages.any_of("NODE_UNREACHABLE_MESSAGE")
    assert any(w in ready_message(got) for w in wanted), f"Ready message {ready_message(got)!r}, expected {wanted}"
    return got


@allure.step("node {node} is Ready again")
def wait_node_ready(ws: Any, node: str, timeout: float = 60) -> Obj:
    got = wait_for(ws.kube, "Node", node, lambda o: node_ready_status(o) == "True", "Ready=True", None, timeout)
    assert got is not None
    return got


@allure.step("taint {key} leaves node {node}")
def wait_taint_gone(ws: Any, node: str, key: str, timeout: float = 60) -> Obj:
    got = wait_for(ws.kube, "Node", node,
                   lambda o: o is not None and not any(t.get("key") == key for t in (o.get("spec") or {}).get("taints") or []),
                   f"no {key} taint", None, timeout)
    assert got is not None
    return got

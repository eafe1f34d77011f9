"""Node label and taint changes, each restoring the node's previous value afterwards:
a `Fault` (chaos/fault.py) whose `restore()` puts it back and takes its undo off the stack."""

from __future__ import annotations

from typing import Any

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


@allure.step("set labels {changes} on node {node}")
def set_node_labels(ws: Target, node: str, changes: dict[str, str | None]) -> Fault:
    """Apply label changes (None removes); the previous values come back on restore."""
    kube = ws.kube
    current = ((kinds.get(kube, "Node", node) or {}).get("metadata") or {}).get("labels") or {}
    previous = {k: current.get(k) for k in changes}
    return apply(ws.cleanup, f"set labels {changes} on node {node}", (node,),
                 lambda: kinds.patch(kube, "Node", node, {"metadata": {"labels": changes}}),
                 lambda: kinds.patch(kube, "Node", node, {"metadata": {"labels": previous}}),
                 f"restore labels {previous} on node {node}")


@allure.step("taint node {node} with {taint}")
def add_taint(ws: Target, node: str, taint: dict[str, Any]) -> Fault:
    """Add a taint; restoring removes it again (by key and effect)."""
    kube = ws.kube

    def inject() -> None:
        obj = kinds.get(kube, "Node", node) or {}
        taints = [t for t in (obj.get("spec") or {}).get("taints") or []
                  if (t["key"], t["effect"]) != (taint["key"], taint["effect"])]
        kinds.patch(kube, "Node", node, {"spec": {"taints": [*taints, taint]}})

    return apply(ws.cleanup, f"taint node {node} with {taint['key']}", (node,), inject,
                 lambda: remove_taint(kube, node, taint), f"remove taint {taint['key']} from node {node}")


@allure.step("remove taint {taint} from node {node}")
def remove_taint(kube: Kube, node: str, taint: dict[str, Any]) -> None:
    obj = kinds.get(kube, "Node", node) or {}
    taints = [t for t in (obj.get("spec") or {}).get("taints") or []
              if (t["key"], t["effect"]) != (taint["key"], taint["effect"])]
    kinds.patch(kube, "Node", node, {"spec": {"taints": taints}})


@allure.step("cordon node {node}")
def cordon(ws: Target, node: str) -> Fault:
    """Mark the node unschedulable, as `kubectl cordon` (the first half of a drain);
    restoring uncordons it."""
    kube = ws.kube
    return apply(ws.cleanup, f"cordon node {node}", (node,),
                 lambda: kinds.patch(kube, "Node", node, {"spec": {"unschedulable": True}}),
                 lambda: kinds.patch(kube, "Node", node, {"spec": {"unschedulable": None}}), f"uncordon node {node}")

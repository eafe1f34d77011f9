"""Node label and taint changes, each restoring the node's previous value afterwards:
a `Fault` (chaos/fault.py) whose `restore()` puts it back and takes its undo off the stack.
The 0.1 call forms (`cleanup, kube, ...`) still work through 0.2, with a warning
(chaos/old_forms.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.chaos.old_forms import old_form, returns_nothing
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


def _previous_labels(kube: Kube, node: str, changes: dict[str, str | None]) -> dict[str, str | None]:
    current = ((kinds.get(kube, "Node", node) or {}).get("metadata") or {}).get("labels") or {}
    return {k: current.get(k) for k in changes}


def _other_taints(kube: Kube, node: str, taint: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's taints but ``taint`` (by key and effect)."""
    obj = kinds.get(kube, "Node", node) or {}
    return [t for t in (obj.get("spec") or {}).get("taints") or []
            if (t["key"], t["effect"]) != (taint["key"], taint["effect"])]


def _set_node_labels_0_1(new: Callable[..., Fault], ws: Target, node: str,
                         changes: dict[str, str | None]) -> dict[str, str | None]:
    """0.1 returned the previous values."""
    previous = _previous_labels(ws.kube, node, changes)
    new(ws, node, changes)
    return previous


def _add_taint_0_1(new: Callable[..., Fault], ws: Target, node: str, taint: dict[str, Any]) -> list[dict[str, Any]]:
    """0.1 returned the node's other taints, as they were before."""
    others = _other_taints(ws.kube, node, taint)
    new(ws, node, taint)
    return others


@old_form(("cleanup", "kube"), _set_node_labels_0_1)
@allure.step("set labels {changes} on node {node}")
def set_node_labels(ws: Target, node: str, changes: dict[str, str | None]) -> Fault:
    """Apply label changes (None removes); the previous values come back on restore."""
    kube = ws.kube
    previous = _previous_labels(kube, node, changes)
    return apply(ws.cleanup, f"set labels {changes} on node {node}", (node,),
                 lambda: kinds.patch(kube, "Node", node, {"metadata": {"labels": changes}}),
                 lambda: kinds.patch(kube, "Node", node, {"metadata": {"labels": previous}}),
                 f"restore labels {previous} on node {node}")


@old_form(("cleanup", "kube"), _add_taint_0_1)
@allure.step("taint node {node} with {taint}")
def add_taint(ws: Target, node: str, taint: dict[str, Any]) -> Fault:
    """Add a taint; restoring removes it again (by key and effect)."""
    kube = ws.kube

    def inject() -> None:
        kinds.patch(kube, "Node", node, {"spec": {"taints": [*_other_taints(kube, node, taint), taint]}})

    return apply(ws.cleanup, f"taint node {node} with {taint['key']}", (node,), inject,
                 lambda: remove_taint(kube, node, taint), f"remove taint {taint['key']} from node {node}")


@allure.step("remove taint {taint} from node {node}")
def remove_taint(kube: Kube, node: str, taint: dict[str, Any]) -> None:
    kinds.patch(kube, "Node", node, {"spec": {"taints": _other_taints(kube, node, taint)}})


@old_form(("cleanup", "kube"), returns_nothing)
@allure.step("cordon node {node}")
def cordon(ws: Target, node: str) -> Fault:
    """Mark the node unschedulable, as `kubectl cordon` (the first half of a drain);
    restoring uncordons it."""
    kube = ws.kube
    return apply(ws.cleanup, f"cordon node {node}", (node,),
                 lambda: kinds.patch(kube, "Node", node, {"spec": {"unschedulable": True}}),
                 lambda: kinds.patch(kube, "Node", node, {"spec": {"unschedulable": None}}), f"uncordon node {node}")

"""Node label and taint changes, each restoring the node's previous value afterwards."""

from __future__ import annotations

from typing import Any

import allure

from pvchaos.kube import kinds
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


@allure.step("set labels {changes} on node {node}")
def set_node_labels(cleanup: Cleanup, kube: Kube, node: str, changes: dict[str, str | None]) -> dict[str, str | None]:
    """Apply label changes (None removes); returns the previous values, restored at cleanup."""
    current = ((kinds.get(kube, "Node", node) or {}).get("metadata") or {}).get("labels") or {}
    previous = {k: current.get(k) for k in changes}
    cleanup.push(f"restore labels {previous} on node {node}",
                 lambda: kinds.patch(kube, "Node", node, {"metadata": {"labels": previous}}))
    kinds.patch(kube, "Node", node, {"metadata": {"labels": changes}})
    return previous


@allure.step("taint node {node} with {taint}")
def add_taint(cleanup: Cleanup, kube: Kube, node: str, taint: dict[str, Any]) -> list[dict[str, Any]]:
    """Add a taint; the node's taint list without it is restored at cleanup (by key and effect)."""
    cleanup.push(f"remove taint {taint['key']} from node {node}", lambda: remove_taint(kube, node, taint))
    obj = kinds.get(kube, "Node", node) or {}
    taints = [t for t in (obj.get("spec") or {}).get("taints") or []
              if (t["key"], t["effect"]) != (taint["key"], taint["effect"])]
    kinds.patch(kube, "Node", node, {"spec": {"taints": [*taints, taint]}})
    return taints


@allure.step("remove taint {taint} from node {node}")
def remove_taint(kube: Kube, node: str, taint: dict[str, Any]) -> None:
    obj = kinds.get(kube, "Node", node) or {}
    taints = [t for t in (obj.get("spec") or {}).get("taints") or []
              if (t["key"], t["effect"]) != (taint["key"], taint["effect"])]
    kinds.patch(kube, "Node", node, {"spec": {"taints": taints}})


@allure.step("cordon node {node}")
def cordon(cleanup: Cleanup, kube: Kube, node: str) -> None:
    """Mark the node unschedulable, as `kubectl cordon` (the first half of a drain); it is
    uncordoned at cleanup."""
    cleanup.push(f"uncordon node {node}", lambda: kinds.patch(kube, "Node", node, {"spec": {"unschedulable": None}}))
    kinds.patch(kube, "Node", node, {"spec": {"unschedulable": True}})

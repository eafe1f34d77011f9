"""Typed accessors over Kubernetes JSON: one reading of each field the harness asks about.

Objects stay dicts (what the API server sends and what `conformance/` reads), but no
caller digs `["metadata"]["name"]` or `.get("status", {})` by hand: Ready, a taint, a
zone or a condition are read here, once, and tolerate missing fields and None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
View = Mapping[str, Any]  # what the readers below accept: a dict, or a snapshot's read-only object

ZONE_KEY = "topology.kubernetes.io/zone"
REGION_KEY = "topology.kubernetes.io/region"
HOSTNAME_KEY = "kubernetes.io/hostname"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"


def _section(obj: View | None, key: str) -> dict[str, Any]:
    return ((obj or {}).get(key) or {}) if isinstance((obj or {}).get(key) or {}, dict) else {}


def meta(obj: View | None) -> dict[str, Any]:
    return _section(obj, "metadata")


def spec(obj: View | None) -> dict[str, Any]:
    return _section(obj, "spec")


def status(obj: View | None) -> dict[str, Any]:
    return _section(obj, "status")


def name(obj: View | None) -> str:
    return str(meta(obj).get("name") or "")


def namespace(obj: View | None) -> str | None:
    ns = meta(obj).get("namespace")
    return str(ns) if ns else None


def uid(obj: View | None) -> str:
    return str(meta(obj).get("uid") or "")


def labels(obj: View | None) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def label(obj: View | None, key: str) -> str | None:
    return labels(obj).get(key)


def annotation(obj: View | None, key: str) -> str | None:
    return (meta(obj).get("annotations") or {}).get(key)


def terminating(obj: View | None) -> bool:
    """Being deleted (a deletionTimestamp is set)."""
    return bool(meta(obj).get("deletionTimestamp"))


def gone_or_terminating(obj: View | None) -> bool:
    """Deleted, or on its way (with no kubelet, an evicted pod stays Terminating)."""
    return obj is None or terminating(obj)


def phase(obj: View | None) -> str | None:
    value = status(obj).get("phase")
    return str(value) if value else None


def node_name(pod: View | None) -> str | None:
    return spec(pod).get("nodeName") or None


def zone(node: View | None) -> str | None:
    return label(node, ZONE_KEY)


def is_control_plane(node: View | None) -> bool:
    """A control-plane Node (kubeadm labels it; kind clusters have one, local ones none)."""
    return CONTROL_PLANE_ROLE in labels(node)


def hostname(node: View) -> str:
    """The kubernetes.io/hostname label, which may differ from the node's name."""
    return label(node, HOSTNAME_KEY) or name(node)


def condition(obj: View | None, kind: str) -> dict[str, Any] | None:
    for c in status(obj).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def ready(node: View | None) -> str | None:
    """The status of the Ready condition: "True", "False", "Unknown", or None if absent."""
    c = condition(node, "Ready")
    return str(c.get("status")) if c else None


def ready_message(node: View | None) -> str:
    c = condition(node, "Ready")
    return str((c or {}).get("message") or "")


def taints(node: View | None) -> list[dict[str, Any]]:
    return list(spec(node).get("taints") or [])


def has_taint(node: View | None, key: str, effect: str | None = None) -> bool:
    return any(t.get("key") == key and (effect is None or t.get("effect") == effect) for t in taints(node))


def unschedulable(pod: View | None) -> bool:
    """The scheduler's verdict as upstream asserts it: PodScheduled=False, reason Unschedulable."""
    c = condition(pod, "PodScheduled")
    return c is not None and c.get("status") == "False" and c.get("reason") == "Unschedulable"


def scheduled(pod: View | None) -> bool:
    """The scheduler placed the pod (nodeName set); not the same as Running."""
    return node_name(pod) is not None


def ready_replicas(sts: View | None) -> int:
    return int(status(sts).get("readyReplicas") or 0)


def pv_zones(pv: View | None) -> set[str]:
    """Zones a PV's nodeAffinity allows through `In` expressions on the zone key."""
    return pv_label_values(pv, ZONE_KEY)


def pv_label_values(pv: View | None, key: str) -> set[str]:
    out: set[str] = set()
    required = (spec(pv).get("nodeAffinity") or {}).get("required") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == key and expr.get("operator") == "In":
                out |= set(expr.get("values") or [])
    return out

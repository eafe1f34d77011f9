"""Kinds the harness reads, and raw JSON access to them through the official client.

One table maps a kind to its list/read calls, so waits, snapshots and evidence all
read objects the same way: as Kubernetes JSON dicts, with their resourceVersion.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from clusters.kube import Kube

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """How to list (and watch) one kind, namespaced or not."""

    name: str
    namespaced: bool
    lister: Callable[[Kube], Callable[..., Any]]


KINDS: dict[str, Kind] = {
    "Pod": Kind("Pod", True, lambda k: k.core.list_namespaced_pod),
    "PersistentVolumeClaim": Kind("PersistentVolumeClaim", True,
                                  lambda k: k.core.list_namespaced_persistent_volume_claim),
    "PersistentVolume": Kind("PersistentVolume", False, lambda k: k.core.list_persistent_volume),
    "Node": Kind("Node", False, lambda k: k.core.list_node),
    "StatefulSet": Kind("StatefulSet", True, lambda k: k.apps.list_namespaced_stateful_set),
    "Event": Kind("Event", True, lambda k: k.core.list_namespaced_event),
    "StorageClass": Kind("StorageClass", False, lambda k: k.storage.list_storage_class),
    "Lease": Kind("Lease", True, lambda k: k.coordination.list_namespaced_lease),
}


def kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown kind {name!r}; known: {sorted(KINDS)}") from None


def list_raw(kube: Kube, kind_name: str, namespace: str | None = None, **kw: Any) -> tuple[list[Obj], str]:
    """Items as dicts and the list's resourceVersion (to start a watch from)."""
    k = kind(kind_name)
    fn = k.lister(kube)
    args = (namespace,) if k.namespaced else ()
    resp = fn(*args, _preload_content=False, **kw)
    data = json.loads(resp.data)
    items = data.get("items") or []
    for item in items:  # list items carry no kind; add it for messages and evidence
        item.setdefault("kind", kind_name)
    return items, data["metadata"]["resourceVersion"]


def get_raw(kube: Kube, kind_name: str, name: str, namespace: str | None = None) -> Obj | None:
    """One object as a dict, or None if it does not exist."""
    items, _ = list_raw(kube, kind_name, namespace, field_selector=f"metadata.name={name}")
    return items[0] if items else None


def events_for(kube: Kube, obj: Obj) -> list[Obj]:
    """Events about one object, oldest first (namespace of the object, or default)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    selector = f"involvedObject.name={meta.get('name')}"
    if obj.get("kind"):
        selector += f",involvedObject.kind={obj['kind']}"
    try:
        items, _ = list_raw(kube, "Event", namespace, field_selector=selector)
    except ApiException:
        return []
    return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


def event_lines(events: list[Obj]) -> list[str]:
    return [f"{e.get('type')} {e.get('reason')}: {e.get('message', '').strip()}" for e in events]

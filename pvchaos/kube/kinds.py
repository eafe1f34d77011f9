"""The one table of kinds the harness touches, and raw JSON access to them.

Each kind is one row (API group, snake name, namespaced or not); the official client's
method names follow from it (`list_namespaced_pod`, `patch_persistent_volume`...), so a
new kind is one line here and every verb works for it: list (and watch), read, create,
replace, delete, merge-patch. Kinds a CRD defines (the VolumeSnapshot API) are rows too,
with their API group, version and plural: `CustomObjectsApi` takes those first and the
name after the scope, so `Kind.call` hands out an adapter with the typed methods' order.
Objects go in and come out as Kubernetes JSON dicts with their `kind` set, which is what
the pure oracle in `conformance/` reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from pvchaos.kube.client import Kube

Obj = dict[str, Any]
SNAPSHOT_GROUP = "snapshot.storage.k8s.io"  # the VolumeSnapshot CRDs (external-snapshotter)
ApiCall = Callable[..., Any]  # a method of the generated client; its signature varies by verb


@dataclass(frozen=True)
class Kind:
    """One kind: its API group on `Kube` and the snake-case name the client uses; for a
    kind a CRD defines, `custom` is (API group, version, plural) and `group` is "custom"."""

    name: str
    group: str  # attribute of Kube: core, storage, apps, coordination, custom
    snake: str
    namespaced: bool
    custom: tuple[str, str, str] | None = None

    def call(self, kube: Kube, verb: str, all_namespaces: bool = False) -> ApiCall:
        """The client method for `verb` (list, read, create, replace, delete, patch)."""
        if self.custom is not None:
            return _custom_call(kube, self, verb, all_namespaces)
        api = getattr(kube, self.group)
        scope = "namespaced_" if self.namespaced else ""
        name = f"{verb}_{self.snake}_for_all_namespaces" if self.namespaced and all_namespaces else f"{verb}_{scope}{self.snake}"
        method: ApiCall = getattr(api, name)
        return method


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("Namespace", "core", "namespace", False),
    Kind("Node", "core", "node", False),
    Kind("PersistentVolume", "core", "persistent_volume", False),
    Kind("PersistentVolumeClaim", "core", "persistent_volume_claim", True),
    Kind("Pod", "core", "pod", True),
    Kind("Event", "core", "event", True),
    Kind("StorageClass", "storage", "storage_class", False),
    Kind("CSIDriver", "storage", "csi_driver", False),
    Kind("CSINode", "storage", "csi_node", False),
    Kind("VolumeAttachment", "storage", "volume_attachment", False),
    Kind("CSIStorageCapacity", "storage", "csi_storage_capacity", True),
    Kind("VolumeAttributesClass", "storage", "volume_attributes_class", False),
    Kind("StatefulSet", "apps", "stateful_set", True),
    Kind("Deployment", "apps", "deployment", True),
    Kind("Lease", "coordination", "lease", True),
    Kind("PriorityClass", "scheduling", "priority_class", False),
    Kind("VolumeSnapshot", "custom", "volume_snapshot", True, (SNAPSHOT_GROUP, "v1", "volumesnapshots")),
    Kind("VolumeSnapshotContent", "custom", "volume_snapshot_content", False,
         (SNAPSHOT_GROUP, "v1", "volumesnapshotcontents")),
    Kind("VolumeSnapshotClass", "custom", "volume_snapshot_class", False,
         (SNAPSHOT_GROUP, "v1", "volumesnapshotclasses")),
)}


def _custom_call(kube: Kube, k: Kind, verb: str, all_namespaces: bool) -> ApiCall:
    """A CustomObjectsApi method behind the typed methods' argument order: list(*scope),
    read/delete(name, *scope), create(*scope, body), replace/patch(name, *scope, body)."""
    assert k.custom is not None
    group, version, plural = k.custom
    api = kube.custom
    scope = "namespaced" if k.namespaced else "cluster"
    if verb == "list":
        method = api.list_custom_object_for_all_namespaces if all_namespaces else getattr(api, f"list_{scope}_custom_object")

        def list_custom_object(*ns: str, **kw: Any) -> Any:  # watch.Watch streams it like a typed list
            return method(group, version, *ns, plural, **kw)
        return list_custom_object
    method = getattr(api, f"{'get' if verb == 'read' else verb}_{scope}_custom_object")
    if verb == "create":
        return lambda *args, **kw: method(group, version, *args[:-1], plural, args[-1], **kw)
    if verb in ("replace", "patch"):
        return lambda name, *args, **kw: method(group, version, *args[:-1], plural, name, args[-1], **kw)
    return lambda name, *ns, **kw: method(group, version, *ns, plural, name, **kw)


def kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown kind {name!r}; known: {sorted(KINDS)}") from None


def _scope(k: Kind, namespace: str | None) -> tuple[str, ...]:
    if k.namespaced and namespace is None:
        raise ValueError(f"{k.name} is namespaced: give a namespace")
    return (namespace,) if k.namespaced and namespace is not None else ()


def _load(resp: urllib3.BaseHTTPResponse, kind_name: str) -> Obj:
    obj: Obj = json.loads(resp.data)
    obj.setdefault("kind", kind_name)
    return obj


def list_objects(kube: Kube, kind_name: str, namespace: str | None = None, **selectors: Any) -> tuple[list[Obj], str]:
    """Items as dicts and the list's resourceVersion (to start a watch from). A namespaced
    kind without a namespace is listed across all namespaces."""
    k = kind(kind_name)
    every = k.namespaced and namespace is None
    resp = k.call(kube, "list", every)(*(() if every else _scope(k, namespace)), _preload_content=False, **selectors)
    data = json.loads(resp.data)
    items = data.get("items") or []
    for item in items:  # list items carry no kind; add it for messages and evidence
        item.setdefault("kind", kind_name)
    return items, data["metadata"]["resourceVersion"]


def watch_objects(kube: Kube, kind_name: str, namespace: str | None, resource_version: str | None,
                  timeout_seconds: int, **selectors: Any) -> Iterator[tuple[str, Obj]]:
    """(event type, object) from a watch; ends on timeout or an ERROR event (re-list then)."""
    k = kind(kind_name)
    every = k.namespaced and namespace is None
    w = watch.Watch()
    extra = {"resource_version": resource_version} if resource_version else {}
    try:
        for event in w.stream(k.call(kube, "list", every), *(() if every else _scope(k, namespace)),
                              deserialize=False, timeout_seconds=timeout_seconds, allow_watch_bookmarks=False,
                              **extra, **selectors):
            if event["type"] == "ERROR":
                return
            obj = event.get("raw_object") or event["object"]
            obj.setdefault("kind", kind_name)
            yield event["type"], obj
    finally:
        w.stop()


def get(kube: Kube, kind_name: str, name: str, namespace: str | None = None) -> Obj | None:
    """One object as a dict, or None if it does not exist."""
    k = kind(kind_name)
    try:
        return _load(k.call(kube, "read")(name, *_scope(k, namespace), _preload_content=False), kind_name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def create(kube: Kube, obj: Obj, namespace: str | None = None) -> Obj:
    """Create any object of the table and return it as the server stored it."""
    k = kind(obj["kind"])
    return _load(k.call(kube, "create")(*_scope(k, namespace), obj, _preload_content=False), k.name)


def replace(kube: Kube, obj: Obj, namespace: str | None = None) -> Obj:
    """A full update (PUT): what a merge patch cannot do, such as emptying a map."""
    k = kind(obj["kind"])
    name = obj["metadata"]["name"]
    return _load(k.call(kube, "replace")(name, *_scope(k, namespace), obj, _preload_content=False), k.name)


def delete(kube: Kube, kind_name: str, name: str, namespace: str | None = None, grace: int | None = 0) -> None:
    """Delete, treating 'already gone' as success."""
    k = kind(kind_name)
    kwargs: dict[str, Any] = {"propagation_policy": "Background"}
    if grace is not None and kind_name == "Pod":
        kwargs["grace_period_seconds"] = grace
    try:
        k.call(kube, "delete")(name, *_scope(k, namespace), **kwargs)
    except ApiException as exc:
        if exc.status != 404:
            raise


def patch(kube: Kube, kind_name: str, name: str, body: Obj, namespace: str | None = None,
          dry_run: bool = False) -> Obj:
    """A merge patch, exactly what `kubectl patch --type merge` sends; `dry_run` asks the
    server to validate only."""
    k = kind(kind_name)
    kwargs: dict[str, Any] = {"_preload_content": False, "_content_type": "application/merge-patch+json"}
    if dry_run:
        kwargs["dry_run"] = "All"
    return _load(k.call(kube, "patch")(name, *_scope(k, namespace), body, **kwargs), kind_name)


def events_for(kube: Kube, obj: Obj) -> list[Obj]:
    """Events about one object, oldest first (namespace of the object, or default)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    selector = f"involvedObject.name={meta.get('name')}"
    if obj.get("kind"):
        selector += f",involvedObject.kind={obj['kind']}"
    try:
        items, _ = list_objects(kube, "Event", namespace, field_selector=selector)
    except ApiException:
        return []
    return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


def pod_log(kube: Kube, name: str, namespace: str, container: str | None = None, previous: bool = False) -> str:
    """What a pod's container printed (the previous instance's with `previous`), as its
    kubelet serves it: what the pod itself read and wrote, a driver-generic witness, where
    a node's directory only shows what lies there."""
    kwargs: dict[str, Any] = {"container": container} if container else {}
    if previous:
        kwargs["previous"] = True
    resp = kube.core.read_namespaced_pod_log(name, namespace, _preload_content=False, **kwargs)
    return str(resp.data.decode(errors="replace"))


def event_lines(events: list[Obj]) -> list[str]:
    return [f"{e.get('type')} {e.get('reason')}: {e.get('message', '').strip()}" for e in events]


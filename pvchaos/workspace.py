"""A test's corner of a cluster: its namespace, the objects it created, their cleanup.

Every object is labelled as the harness's (so a sweeper finds leftovers) and its
deletion is registered the moment it exists. Reads return Kubernetes JSON dicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from clusters.backend import HOSTPATH_VOLUME_ROOT, ClusterHandle
from clusters.kube import Kube
from pvchaos import builders, naming
from pvchaos.cleanup import Cleanup
from pvchaos.resources import Obj, get_raw, list_raw
from pvchaos.waiting import wait_for

Creator = Callable[..., Any]


def _creators(kube: Kube) -> dict[str, tuple[bool, Creator, Creator]]:
    """kind -> (namespaced, create, delete)."""
    c, s, a = kube.core, kube.storage, kube.apps
    return {
        "Namespace": (False, c.create_namespace, c.delete_namespace),
        "PersistentVolume": (False, c.create_persistent_volume, c.delete_persistent_volume),
        "StorageClass": (False, s.create_storage_class, s.delete_storage_class),
        "PersistentVolumeClaim": (True, c.create_namespaced_persistent_volume_claim,
                                  c.delete_namespaced_persistent_volume_claim),
        "Pod": (True, c.create_namespaced_pod, c.delete_namespaced_pod),
        "StatefulSet": (True, a.create_namespaced_stateful_set, a.delete_namespaced_stateful_set),
    }


def create_raw(kube: Kube, obj: Obj, namespace: str | None = None) -> Obj:
    """Create any supported object and return it as the server stored it."""
    kind = obj["kind"]
    namespaced, create, _ = _creators(kube)[kind]
    args = (namespace, obj) if namespaced else (obj,)
    resp = create(*args, _preload_content=False)
    created = json.loads(resp.data)
    created.setdefault("kind", kind)
    return created


def delete_raw(kube: Kube, kind: str, name: str, namespace: str | None = None, grace: int | None = 0) -> None:
    """Delete, treating 'already gone' as success."""
    namespaced, _, delete = _creators(kube)[kind]
    args = (name, namespace) if namespaced else (name,)
    kwargs: dict[str, Any] = {"propagation_policy": "Background"}
    if grace is not None and kind == "Pod":
        kwargs["grace_period_seconds"] = grace
    try:
        delete(*args, **kwargs)
    except ApiException as exc:
        if exc.status != 404:
            raise


class Workspace:
    """Creates objects for one test and guarantees they are deleted afterwards."""

    def __init__(self, kube: Kube, cluster: ClusterHandle, test_name: str, cleanup: Cleanup):
        self.kube = kube
        self.cluster = cluster
        self.test_name = test_name
        self.cleanup = cleanup
        self.labels = naming.owned_labels(test_name)
        self.namespace = naming.unique(test_name)
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        self.cluster_scoped: list[tuple[str, str]] = []
        self.exempt_pods: set[str] = set()  # "ns/name" of pods that knowingly break invariants

    @property
    def case_labels(self) -> dict[str, str]:
        """A label unique to this test, to keep class-less PVs of parallel tests apart."""
        return {"pvchaos.dev/case": self.namespace[-20:].strip("-.")}

    def name(self, hint: str) -> str:
        """A cluster-unique name for a cluster-scoped object (PV, StorageClass)."""
        return naming.unique(hint)

    def create(self, obj: Obj) -> Obj:
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        meta["labels"] = {**self.labels, **(meta.get("labels") or {})}
        namespaced = _creators(self.kube)[kind][0]
        namespace = self.namespace if namespaced else None
        if kind == "PersistentVolume" and self.cluster.mountable_volumes:
            obj = builders.mountable(obj, HOSTPATH_VOLUME_ROOT)
        created = create_raw(self.kube, obj, namespace)
        name = created["metadata"]["name"]
        if kind != "Namespace":
            self.cleanup.push(f"delete {kind} {name}", lambda: delete_raw(self.kube, kind, name, namespace))
        else:
            self.cleanup.push(f"delete Namespace {name}", lambda: delete_raw(self.kube, kind, name))
        if not namespaced and kind != "Namespace":
            self.cluster_scoped.append((kind, name))
        return created

    def get(self, kind: str, name: str) -> Obj | None:
        namespaced = kind not in ("PersistentVolume", "StorageClass", "Node", "Namespace")
        return get_raw(self.kube, kind, name, self.namespace if namespaced else None)

    def list(self, kind: str, **selectors: Any) -> list[Obj]:
        return list_raw(self.kube, kind, self.namespace, **selectors)[0]

    def delete(self, kind: str, name: str, wait: bool = True, timeout: float = 60) -> None:
        namespaced = _creators(self.kube)[kind][0]
        namespace = self.namespace if namespaced else None
        delete_raw(self.kube, kind, name, namespace)
        if wait:
            wait_for(self.kube, kind, name, lambda o: o is None, "deleted", namespace, timeout)

    def patch(self, kind: str, name: str, body: Obj, dry_run: bool = False) -> Obj:
        """A merge patch, exactly what `kubectl patch --type merge` sends."""
        return patch_raw(self.kube, kind, name, body, self.namespace, dry_run)


def patch_raw(kube: Kube, kind: str, name: str, body: Obj, namespace: str | None = None,
              dry_run: bool = False) -> Obj:
    """Merge-patch any supported object; `dry_run` asks the server to validate only."""
    c = kube.core
    fns: dict[str, Callable[..., Any]] = {
        "PersistentVolume": lambda **kw: c.patch_persistent_volume(name, body, **kw),
        "PersistentVolumeClaim": lambda **kw: c.patch_namespaced_persistent_volume_claim(name, namespace, body, **kw),
        "StatefulSet": lambda **kw: kube.apps.patch_namespaced_stateful_set(name, namespace, body, **kw),
        "Node": lambda **kw: c.patch_node(name, body, **kw),
    }
    kwargs: dict[str, Any] = {"_preload_content": False, "_content_type": "application/merge-patch+json"}
    if dry_run:
        kwargs["dry_run"] = "All"
    resp = fns[kind](**kwargs)
    return json.loads(resp.data)

"""A test's corner of a cluster: its namespace, the objects it created, their cleanup.

Every object is labelled as the harness's (so a sweeper finds leftovers) and its
deletion is registered the moment it exists. Reads return Kubernetes JSON dicts.
"""

from __future__ import annotations

from typing import Any

from clusters.backend import ClusterHandle
from kube import kinds, naming
from kube.cleanup import Cleanup
from kube.client import Kube
from kube.kinds import Obj
from kube.wait import wait_gone


class Workspace:
    """Creates objects for one test and guarantees they are deleted afterwards."""

    def __init__(self, kube: Kube, cluster: ClusterHandle, test_name: str, cleanup: Cleanup):
        self.kube = kube
        self.cluster = cluster
        self.test_name = test_name
        self.cleanup = cleanup
        self.labels = naming.owned_labels(test_name)
        self.namespace = naming.unique(test_name)
        self.cluster_scoped: list[tuple[str, str]] = []
        self.exempt_pods: set[str] = set()  # "ns/name" of pods that knowingly break invariants
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})

    @property
    def case_labels(self) -> dict[str, str]:
        """A label unique to this test, to keep class-less PVs of parallel tests apart."""
        return {"pvchaos.dev/case": self.namespace[-20:].strip("-.")}

    def name(self, hint: str) -> str:
        """A cluster-unique name for a cluster-scoped object (PV, StorageClass)."""
        return naming.unique(hint)

    def _ns(self, kind: str) -> str | None:
        return self.namespace if kinds.kind(kind).namespaced else None

    def create(self, obj: Obj) -> Obj:
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        meta["labels"] = {**self.labels, **(meta.get("labels") or {})}
        namespace = self._ns(kind)
        created = kinds.create(self.kube, obj, namespace)
        name = created["metadata"]["name"]
        self.cleanup.push(f"delete {kind} {name}", lambda: kinds.delete(self.kube, kind, name, namespace))
        if namespace is None and kind != "Namespace":
            self.cluster_scoped.append((kind, name))
        return created

    def get(self, kind: str, name: str) -> Obj | None:
        return kinds.get(self.kube, kind, name, self._ns(kind))

    def list(self, kind: str, **selectors: Any) -> list[Obj]:
        """Objects of a kind in this test's namespace (cluster-wide for a cluster-scoped kind)."""
        return kinds.list_objects(self.kube, kind, self._ns(kind), **selectors)[0]

    def delete(self, kind: str, name: str, wait: bool = True, timeout: float = 60) -> None:
        kinds.delete(self.kube, kind, name, self._ns(kind))
        if wait:
            wait_gone(self.kube, kind, name, self._ns(kind), timeout)

    def patch(self, kind: str, name: str, body: Obj, dry_run: bool = False) -> Obj:
        """A merge patch, exactly what `kubectl patch --type merge` sends."""
        return kinds.patch(self.kube, kind, name, body, self._ns(kind), dry_run)

    def replace(self, obj: Obj) -> Obj:
        """A full update (PUT), for changes a merge patch cannot express."""
        return kinds.replace(self.kube, obj, self._ns(obj["kind"]))

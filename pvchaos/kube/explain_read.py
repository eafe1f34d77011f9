"""What `pvchaos explain` reads: a few list calls, never a per-node call, never a write.

Pods and events of the namespace (or of every namespace), claims, PVs, classes and
nodes: six list calls whatever the cluster's size, plus ``GET /version`` for the
message wording. A refusal names the verb and the resource, so a user with a narrow
role knows what to ask for; an API server that does not answer is one line too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from pvchaos.conformance.claims import claim_key
from pvchaos.conformance.verdicts import Scene
from pvchaos.kube.client import Kube
from pvchaos.kube.errors import ApiUnreachable, InfrastructureError
from pvchaos.kube.kinds import Obj, kind, list_objects

PLURALS = {"Pod": "pods", "Event": "events", "PersistentVolumeClaim": "persistentvolumeclaims",
           "PersistentVolume": "persistentvolumes", "StorageClass": "storageclasses.storage.k8s.io", "Node": "nodes",
           "VolumeAttachment": "volumeattachments.storage.k8s.io", "CSINode": "csinodes.storage.k8s.io"}


class AccessDenied(InfrastructureError):
    """The API server refused a read; the message names the verb and resource."""


@dataclass(frozen=True)
class ClusterView:
    """The objects every explanation of one namespace (or all) needs, read once."""

    pods: list[Obj]
    claims: dict[str, Obj]
    pvs: list[Obj]
    classes: dict[str, Obj]
    nodes: list[Obj]
    events: list[Obj]
    minor: int | None
    attachments: list[Obj] = field(default_factory=list)
    csinodes: list[Obj] = field(default_factory=list)

    def scene(self, pod: Obj) -> Scene:
        namespace = (pod.get("metadata") or {}).get("namespace")
        events = [e for e in self.events if (e.get("involvedObject") or {}).get("namespace") in (namespace, None)]
        return Scene(pod=pod, nodes=self.nodes, claims=self.claims, pvs=self.pvs, classes=self.classes,
                     events=events, minor=self.minor, attachments=self.attachments, csinodes=self.csinodes)


def _guarded(call: Callable[[], Any], what: str, server: str) -> Any:
    try:
        return call()
    except ApiException as exc:
        if exc.status == 403:
            raise AccessDenied(f"permission denied: cannot {what} (HTTP 403; explain needs get/list on pods, "
                               "events, persistentvolumeclaims, persistentvolumes, storageclasses, nodes)") from None
        if exc.status == 401:
            raise AccessDenied(f"unauthorized at {server}: the kubeconfig's credentials were rejected (HTTP 401)") from None
        raise ApiUnreachable(f"API server {server} answered {exc.status} {exc.reason} to {what}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        cause = getattr(exc, "reason", None) or exc
        text = str(cause).split(": ", 1)[-1] if ": " in str(cause) else type(cause).__name__
        raise ApiUnreachable(f"cannot reach the API server at {server}: {text}") from None


def _list(kube: Kube, kind_name: str, namespace: str | None, **selectors: Any) -> list[Obj]:
    scope = f"in namespace {namespace}" if namespace and kind(kind_name).namespaced else "at cluster scope"
    server = kube.api.configuration.host
    return list(_guarded(lambda: list_objects(kube, kind_name, namespace, **selectors)[0],
                         f"list {PLURALS[kind_name]} {scope}", server))


def server_minor(kube: Kube) -> int | None:
    """The API server's minor version ("35", "35+"), or None when it does not say."""
    try:
        info = kube.version.get_code()
    except (ApiException, urllib3.exceptions.HTTPError, OSError):
        return None
    digits = "".join(ch for ch in str(info.minor) if ch.isdigit())
    return int(digits) if digits else None


def read_view(kube: Kube, namespace: str | None, pod_name: str | None = None) -> ClusterView:
    """One pod (by a field selector on the list), or every pod of ``namespace`` (None: all)."""
    selectors = {"field_selector": f"metadata.name={pod_name}"} if pod_name else {}
    pods = _list(kube, "Pod", namespace, **selectors)
    claims = {claim_key(c): c for c in _list(kube, "PersistentVolumeClaim", namespace)}
    return ClusterView(pods=pods, claims=claims, pvs=_list(kube, "PersistentVolume", None),
                       classes={c["metadata"]["name"]: c for c in _list(kube, "StorageClass", None)},
                       nodes=_list(kube, "Node", None), events=_list(kube, "Event", namespace),
                       minor=server_minor(kube), attachments=_optional(kube, "VolumeAttachment"),
                       csinodes=_optional(kube, "CSINode"))


def _optional(kube: Kube, kind_name: str) -> list[Obj]:
    """A cluster-scoped read that sharpens a diagnosis (who holds a volume, which node
    lacks a driver) but is not needed for one: a role without it still gets the rest."""
    try:
        return _list(kube, kind_name, None)
    except AccessDenied:
        return []

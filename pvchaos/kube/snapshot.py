"""Read the whole cluster state the invariant checker needs, in one place."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from pvchaos.conformance.invariants import Snapshot
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube
from pvchaos.kube.kinds import list_objects


def _readable(kube: Kube, kind: str) -> list[dict[str, Any]]:
    """The kind's objects; none where the credentials may not list them (a shared cluster's
    read-only account), so that invariant is not judged there rather than failing every test."""
    try:
        return list_objects(kube, kind)[0]
    except ApiException as exc:
        if exc.status in (401, 403):
            return []
        raise


def take(kube: Kube) -> Snapshot:
    """Pods and PVCs of every namespace, every PV and Node, VolumeAttachment and CSINode."""
    namespaces = list_objects(kube, "Namespace")[0]
    terminating = frozenset(o.name(n) for n in namespaces if o.terminating(n) or o.phase(n) == "Terminating")
    return Snapshot(pods=list_objects(kube, "Pod")[0], claims=list_objects(kube, "PersistentVolumeClaim")[0],
                    volumes=list_objects(kube, "PersistentVolume")[0], nodes=list_objects(kube, "Node")[0],
                    terminating_namespaces=terminating, attachments=_readable(kube, "VolumeAttachment"),
                    csi_nodes=_readable(kube, "CSINode"))

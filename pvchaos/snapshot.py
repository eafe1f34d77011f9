"""Read the whole cluster state the invariant checker needs, in one place."""

from __future__ import annotations

import json

from clusters.kube import Kube
from conformance.invariants import Snapshot
from pvchaos.resources import list_raw


def take(kube: Kube) -> Snapshot:
    """Pods and PVCs of every namespace, every PV and Node."""
    core = kube.core
    pods = json.loads(core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
    claims = json.loads(core.list_persistent_volume_claim_for_all_namespaces(_preload_content=False).data)["items"]
    namespaces = json.loads(core.list_namespace(_preload_content=False).data)["items"]
    terminating = frozenset(n["metadata"]["name"] for n in namespaces
                            if n["metadata"].get("deletionTimestamp") or n.get("status", {}).get("phase") == "Terminating")
    return Snapshot(pods=pods, claims=claims, volumes=list_raw(kube, "PersistentVolume")[0],
                    nodes=list_raw(kube, "Node")[0], terminating_namespaces=terminating)

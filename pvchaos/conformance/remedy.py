"""What fixes a root cause: plain words, each with the command or manifest change.

Keyed by ``Cause.code`` (conformance.causes); the facts fill in names. Fixes that lose
data say so: a claim bound to a PV holds the data of that PV, and deleting it (with a
Delete reclaim policy) deletes the volume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pvchaos.conformance.causes import Cause


@dataclass(frozen=True)
class Fix:
    """One remedy: what to do, why, and the commands or manifest change that do it."""

    text: str
    commands: tuple[str, ...] = ()


def _ns(f: Mapping[str, Any]) -> str:
    return f"-n {f.get('namespace', 'default')}"


def _pod_name(f: Mapping[str, Any]) -> str:
    return str(f.get("pod", "/")).split("/", 1)[1]


def _recreate_claim(f: Mapping[str, Any], manifest_change: str, note: str = "") -> Fix:
    return Fix(f"recreate claim {f.get('claim')} with {manifest_change}{note} (a claim's class and binding are "
               "immutable; deleting it releases its PV and, with reclaimPolicy Delete, its data)",
               (f"kubectl get pvc {f.get('claim')} {_ns(f)} -o yaml > {f.get('claim')}.yaml   # edit: {manifest_change}",
                f"kubectl delete pod {_pod_name(f)} {_ns(f)} && kubectl delete pvc {f.get('claim')} {_ns(f)}",
                f"kubectl apply -f {f.get('claim')}.yaml   # then recreate the pod"))


def _class_missing(f: Mapping[str, Any]) -> list[Fix]:
    wanted = f.get("suggestion") or "<an existing class>"
    return [_recreate_claim(f, f"spec.storageClassName: {wanted}"),
            Fix(f"or create the class {f.get('storage_class')!r} the claim asks for",
                ("kubectl get storageclass", f"kubectl apply -f - <<< '<StorageClass named {f.get('storage_class')}>'"))]


def _immediate_wrong_zone(f: Mapping[str, Any]) -> list[Fix]:
    return [
        Fix("use a WaitForFirstConsumer class, so the volume is created where the pod is scheduled "
            "(volumeBindingMode: WaitForFirstConsumer)",
            (f"kubectl get storageclass {f.get('storage_class')} -o yaml   # copy it with "
             "volumeBindingMode: WaitForFirstConsumer under a new name",)),
        _recreate_claim(f, "spec.storageClassName: <the WaitForFirstConsumer class>",
                        f"; the data of PV {f.get('pv')} in {', '.join(f.get('volume_zones', [])) or 'its zone'} "
                        "stays behind"),
        Fix(f"or let the pod run where the volume is ({', '.join(f.get('volume_zones', []) or f.get('volume_nodes', []))})"
            ": change the pod's nodeSelector/affinity", (f"kubectl edit pod {_pod_name(f)} {_ns(f)}   # or its owner",)),
    ]


def _local_node_gone(f: Mapping[str, Any]) -> list[Fix]:
    pv, claim = f.get("pv"), f.get("claim")
    return [
        Fix(f"bring node {', '.join(f.get('hosts', []))} back: the data of PV {pv} exists only there"),
        Fix("or give up the data: delete the claim and the PV, and let the pod get a new volume",
            (f"kubectl delete pvc {claim} {_ns(f)}", f"kubectl delete pv {pv}",
             f"kubectl delete pod {_pod_name(f)} {_ns(f)}   # its controller recreates pod and claim")),
        Fix("or, if the data really moved to another node and the MutablePVNodeAffinity gate is on, update the PV's "
            "affinity to that node",
            (f"kubectl patch pv {pv} --type merge -p '{{\"spec\":{{\"nodeAffinity\":{{\"required\":"
             "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/hostname\","
             "\"operator\":\"In\",\"values\":[\"<new-node>\"]}]}]}}}}'",)),
    ]


def _zone_without_nodes(f: Mapping[str, Any]) -> list[Fix]:
    return [
        Fix(f"add nodes to zone {', '.join(f.get('zones', []))}, or wait for the zone to come back"),
        Fix("or restore the data elsewhere and recreate the claim (the PV's data is in that zone only)",
            (f"kubectl delete pvc {f.get('claim')} {_ns(f)}",)),
    ]


def _provisioner(f: Mapping[str, Any]) -> list[Fix]:
    p = f.get("provisioner")
    return [Fix(f"check that provisioner {p} runs and is registered (a CSI driver's external-provisioner "
                "sidecar watches claims of its class)",
                (f"kubectl get csidriver {p}", "kubectl get pods -A | grep -i provisioner",
                 f"kubectl describe pvc {f.get('claim')} {_ns(f)}")),
            Fix(f"or check the class's provisioner name for a typo (class {f.get('storage_class')})",
                (f"kubectl get storageclass {f.get('storage_class')} -o jsonpath='{{.provisioner}}'",))]


def _no_pv(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("create a PersistentVolume that fits the claim (size, access modes, volumeMode, class, "
                "selector labels, and a node affinity the pod's nodes satisfy)", ("kubectl get pv",)),
            _recreate_claim(f, "a request the existing PVs satisfy, or a class with a provisioner")]


def _taints(f: Mapping[str, Any]) -> list[Fix]:
    fixes = []
    if f.get("cordoned"):
        fixes.append(Fix("uncordon the node(s), if they are healthy",
                         tuple(f"kubectl uncordon {n}" for n in f["cordoned"])))
    if f.get("taints"):
        unreachable = [t for t in f["taints"] if t.startswith("node.kubernetes.io/")]
        if unreachable:
            fixes.append(Fix("the node(s) are not ready (node.kubernetes.io taints are set by the node lifecycle "
                             "controller): bring them back; with a volume tied to them, the pod must wait for them"))
        fixes.append(Fix("or tolerate the taint in the pod spec, if it may run there",
                         (f"kubectl edit pod {_pod_name(f)} {_ns(f)}   # spec.tolerations: key {f['taints'][0]}",)))
    return fixes


FIXES: Mapping[str, Callable[[Mapping[str, Any]], list[Fix]]] = {
    "CLAIM_MISSING": lambda f: [Fix(f"create claim {f.get('claim')}, or fix the claimName in the pod's volumes",
                                    (f"kubectl get pvc {_ns(f)}",))],
    "CLAIM_TERMINATING": lambda f: [Fix("wait for the deletion to finish (a pod still using it keeps it: "
                                        "kubernetes.io/pvc-protection), then recreate the claim",
                                        (f"kubectl get pods {_ns(f)} -o wide",))],
    "CLASS_MISSING": _class_missing,
    "VOLUME_NAME_MISFIT": lambda f: [_recreate_claim(f, f"a spec.volumeName that fits, or none (PV {f.get('pv')} "
                                                        "does not fit; see the reason above)")],
    "PROVISIONING_PENDING": _provisioner,
    "PROVISIONER_SILENT": _provisioner,
    "NO_PV_FOR_CLAIM": _no_pv,
    "PV_GONE": lambda f: [Fix(f"restore PV {f.get('pv')} (same name, claimRef to the claim) from a backup or the "
                              "storage system", (f"kubectl get pv {f.get('pv')}",)),
                          Fix("or delete the Lost claim and recreate it (the data of the lost PV is not in the "
                              "cluster any more)", (f"kubectl delete pvc {f.get('claim')} {_ns(f)}",))],
    "LOCAL_PV_NODE_GONE": _local_node_gone,
    "ZONE_WITHOUT_NODES": _zone_without_nodes,
    "PV_AFFINITY_MATCHES_NO_NODE": lambda f: [
        Fix("label a node as the PV's affinity asks, or (MutablePVNodeAffinity on, data reachable there) update "
            "the PV's affinity", (f"kubectl get pv {f.get('pv')} -o jsonpath='{{.spec.nodeAffinity}}'",))],
    "CLASS_TOPOLOGY_MATCHES_NO_NODE": lambda f: [
        Fix(f"fix class {f.get('storage_class')}'s allowedTopologies (a class is immutable: recreate it) to name "
            "labels nodes have", (f"kubectl get storageclass {f.get('storage_class')} -o yaml",
                                  "kubectl get nodes --show-labels"))],
    "IMMEDIATE_BINDING_WRONG_ZONE": _immediate_wrong_zone,
    "POD_PINNED_AWAY_FROM_VOLUME": lambda f: [
        Fix(f"let the pod run where its volume is ({', '.join(f.get('volume_zones') or f.get('volume_nodes', []))}):"
            " change its nodeSelector/affinity", (f"kubectl edit pod {_pod_name(f)} {_ns(f)}   # or its owner",)),
        _recreate_claim(f, "spec.storageClassName: <a WaitForFirstConsumer class>", ", if the data need not be kept")],
    "PINNED_OUTSIDE_ALLOWED_TOPOLOGIES": lambda f: [
        Fix(f"use a class whose allowedTopologies include {', '.join(f.get('pod_zones') or f.get('pod_nodes', []))}",
            ("kubectl get storageclass -o custom-columns=NAME:.metadata.name,TOPOLOGIES:.allowedTopologies",)),
        Fix("or let the pod run where the class provisions: change its nodeSelector/affinity")],
    "VOLUMES_DISJOINT": lambda f: [Fix("the pod's volumes are reachable from disjoint nodes: keep them in one "
                                       "zone (one WaitForFirstConsumer class for all), or split the pod")],
    "POD_SELECTOR_MATCHES_NO_NODE": lambda f: [
        Fix("fix the pod's nodeSelector/affinity, or label a node to match",
            ("kubectl get nodes --show-labels", f"kubectl edit pod {_pod_name(f)} {_ns(f)}   # or its owner"))],
    "VOLUME_NODES_UNAVAILABLE": _taints,
    "NODES_UNAVAILABLE": _taints,
    "NO_NODES": lambda f: [Fix("add nodes")],
    "SCHEDULABLE": lambda f: [],
}


def fixes(cause: Cause) -> list[Fix]:
    """The fixes for a cause, most direct first; [] when nothing needs fixing."""
    make = FIXES.get(cause.code)
    return make(cause.facts) if make else []

"""Nodes a pending pod may land on, judged by the scheduler filters that storage touches.

Modelled filters (kube-scheduler plugins): NodeName, NodeUnschedulable (as the taint
node.kubernetes.io/unschedulable:NoSchedule), NodeAffinity (spec.nodeSelector and
required node affinity), TaintToleration (NoSchedule and NoExecute), VolumeZone (zone
and region labels of bound PVs) and VolumeBinding:

- a bound claim (its "namespace/name" in ``pvs_by_claim``) needs its PV's node affinity;
- an unbound claim whose class is missing, unset or Immediate makes the pod unschedulable
  everywhere ("pod has unbound immediate PersistentVolumeClaims");
- an unbound WaitForFirstConsumer claim fits a node when a static PV from
  ``unbound_pvs`` matches there (claims taken smallest request first, each PV used once),
  or else when the class can provision there: a real provisioner (not
  kubernetes.io/no-provisioner) and a node matching ``allowedTopologies``. A claim that
  already carries volume.kubernetes.io/selected-node fits that node only.

Not modelled: resources, ports, pod (anti-)affinity, topology spread, volume limits,
CSIStorageCapacity, in-tree-to-CSI translation of PV topology.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pvchaos.conformance.affinity import (
    node_matches_pv_affinity,
    node_matches_topology_terms,
    pod_node_affinity_matches,
    tolerates,
    toleration_tolerates_taint,
)
from pvchaos.conformance.claims import claim_class, find_matching_volume, requested_storage
from pvchaos.conformance.types import KubeObject, NodeName, PVName, dig

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
_GA_TOPOLOGY = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
_TOPOLOGY_LABELS = (*_GA_TOPOLOGY, *_GA_TOPOLOGY.values())


def pod_claim_keys(pod: KubeObject) -> list[str]:
    """The "namespace/name" of every claim the pod uses, generic ephemeral volumes included."""
    namespace = dig(pod, "metadata", "namespace", default="default")
    pod_name = dig(pod, "metadata", "name", default="")
    keys = []
    for volume in dig(pod, "spec", "volumes", default=[]):
        claim = dig(volume, "persistentVolumeClaim", "claimName")
        if claim is None and dig(volume, "ephemeral") is not None:
            claim = f"{pod_name}-{dig(volume, 'name', default='')}"
        if claim is not None:
            keys.append(f"{namespace}/{claim}")
    return keys


def _node_name(node: KubeObject) -> NodeName:
    return NodeName(dig(node, "metadata", "name", default=""))


def node_admits_pod(pod: KubeObject, node: KubeObject) -> bool:
    """The node-only filters: NodeName, NodeUnschedulable, NodeAffinity, TaintToleration."""
    wanted = dig(pod, "spec", "nodeName", default="")
    if wanted and wanted != _node_name(node):
        return False
    tolerations = dig(pod, "spec", "tolerations", default=[])
    if dig(node, "spec", "unschedulable", default=False) and not any(
        toleration_tolerates_taint(tol, UNSCHEDULABLE_TAINT) for tol in tolerations
    ):
        return False
    if not pod_node_affinity_matches(node, pod):
        return False
    return tolerates(dig(node, "spec", "taints", default=[]), tolerations)


def _zone_values(pv: KubeObject) -> list[tuple[str, set[str]]]:
    """(label key, allowed values) for each topology label on a PV; "__" joins zones."""
    labels = dig(pv, "metadata", "labels", default={})
    return [(key, set(labels[key].split("__"))) for key in _TOPOLOGY_LABELS if key in labels]


def volume_zone_ok(node: KubeObject, bound: Sequence[KubeObject]) -> bool:
    """VolumeZone filter; nodes with no topology labels at all pass (single-zone clusters)."""
    labels = dig(node, "metadata", "labels", default={})
    if not any(key in labels for key in _TOPOLOGY_LABELS):
        return True
    for pv in bound:
        for key, allowed in _zone_values(pv):
            value = labels.get(key, labels.get(_GA_TOPOLOGY.get(key, key)))
            if value not in allowed:
                return False
    return True


def can_provision(node: KubeObject, storage_class: KubeObject) -> bool:
    """``checkVolumeProvisions``: a real provisioner and the class's allowedTopologies."""
    provisioner = dig(storage_class, "provisioner", default="")
    if not provisioner or provisioner == NO_PROVISIONER:
        return False
    return node_matches_topology_terms(node, dig(storage_class, "allowedTopologies", default=[]))


def _delayed_claims_fit(
    node: KubeObject,
    delayed: Sequence[tuple[KubeObject, KubeObject]],
    unbound_pvs: Sequence[KubeObject],
) -> bool:
    """``FindPodVolumes`` for WaitForFirstConsumer claims: static PVs first, then provisioning."""
    to_match, to_provision = [], []
    for pvc, storage_class in delayed:
        selected = dig(pvc, "metadata", "annotations", SELECTED_NODE_ANNOTATION)
        if selected is None:
            to_match.append((pvc, storage_class))
        elif selected != _node_name(node):
            return False
        else:
            to_provision.append(storage_class)
    chosen: set[str] = set()
    for pvc, storage_class in sorted(to_match, key=lambda item: requested_storage(item[0])):
        pv = find_matching_volume(pvc, unbound_pvs, node, delay_binding=True, excluded=chosen)
        if pv is None:
            to_provision.append(storage_class)
        else:
            chosen.add(dig(pv, "metadata", "name", default=""))
    return all(can_provision(node, storage_class) for storage_class in to_provision)


def _split_claims(
    pod: KubeObject,
    pvs_by_claim: Mapping[str, KubeObject | None],
    classes_by_name: Mapping[str, KubeObject] | None,
    claims: Mapping[str, KubeObject] | None,
) -> tuple[list[KubeObject], list[tuple[KubeObject, KubeObject]]] | None:
    """(bound PVs, unbound delayed claims with their class), or None if no node can fit."""
    bound, delayed = [], []
    for key in pod_claim_keys(pod):
        pv = pvs_by_claim.get(key)
        if pv is not None:
            bound.append(pv)
            continue
        if claims is None or classes_by_name is None:
            raise ValueError(f"claim {key} is unbound: pass claims= and classes_by_name= to judge it")
        pvc = claims.get(key)
        if pvc is None or dig(pvc, "metadata", "deletionTimestamp") is not None:
            return None  # upstream PreFilter: claim not found / being deleted
        storage_class = classes_by_name.get(claim_class(pvc))
        if storage_class is None or dig(storage_class, "volumeBindingMode") != "WaitForFirstConsumer":
            return None  # unbound immediate claim (no class, unknown class, or Immediate)
        delayed.append((pvc, storage_class))
    return bound, delayed


def feasible_nodes(
    pod: KubeObject,
    nodes: Iterable[KubeObject],
    pvs_by_claim: Mapping[str, KubeObject | None],
    classes_by_name: Mapping[str, KubeObject] | None = None,
    *,
    claims: Mapping[str, KubeObject] | None = None,
    unbound_pvs: Sequence[KubeObject] = (),
) -> set[NodeName]:
    """Names of the nodes where ``pod`` passes every modelled filter.

    ``pvs_by_claim`` maps "namespace/name" of bound claims to their PV. Unbound claims
    need their PVC in ``claims`` (same keys) and their StorageClass in
    ``classes_by_name``; ValueError if either mapping is missing, since the answer
    would be a guess. A claim absent from a given ``claims`` is taken as not existing.
    """
    split = _split_claims(pod, pvs_by_claim, classes_by_name, claims)
    if split is None:
        return set()
    bound, delayed = split
    return {
        _node_name(node)
        for node in nodes
        if node_admits_pod(pod, node)
        and volume_zone_ok(node, bound)
        and all(node_matches_pv_affinity(node, pv) for pv in bound)
        and _delayed_claims_fit(node, delayed, unbound_pvs)
    }


def pv_violations(pod: KubeObject, node: KubeObject, pvs: Iterable[KubeObject] | Mapping[str, Any]) -> list[PVName]:
    """Names of the pod's PVs (claimRef to one of its claims) whose affinity excludes ``node``.

    For invariant checks after a placement: a non-empty answer means the pod runs, or
    was placed, where its volume may not be reachable. ``pvs`` may be a list or a
    ``pvs_by_claim`` mapping.
    """
    candidates = pvs.values() if isinstance(pvs, Mapping) else pvs
    keys = set(pod_claim_keys(pod))
    return [
        PVName(dig(pv, "metadata", "name", default=""))
        for pv in candidates
        if pv is not None and _claim_ref_key(pv) in keys and not node_matches_pv_affinity(node, pv)
    ]


def _claim_ref_key(pv: KubeObject) -> str | None:
    """The "namespace/name" the PV's claimRef points at, None when it has none."""
    ref = dig(pv, "spec", "claimRef")
    if ref is None:
        return None
    return f"{dig(ref, 'namespace', default='default')}/{dig(ref, 'name', default='')}"


SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


def _affinity_owner(pv: KubeObject) -> tuple[str | None, str | None]:
    """(manager owning spec.nodeAffinity, manager owning the provisioned-by annotation),
    from managedFields: they differ once someone else rewrote the affinity."""
    affinity = annotation = None
    for entry in (pv.get("metadata") or {}).get("managedFields") or []:
        fields = entry.get("fieldsV1") or {}
        spec = fields.get("f:spec") or {}
        notes = (fields.get("f:metadata") or {}).get("f:annotations") or {}
        if "f:nodeAffinity" in spec:
            affinity = entry.get("manager")
        if f"f:{PROVISIONED_BY}" in notes:
            annotation = entry.get("manager")
    return affinity, annotation


def provisioned_away_from_selected(claim: KubeObject, pv: KubeObject, node: KubeObject | None) -> str | None:
    """Where a WaitForFirstConsumer volume landed, against where it was asked for: the
    scheduler selected ``node`` (the claim's selected-node annotation) and the
    provisioner must create a volume that node can reach, so the PV's nodeAffinity, as
    the provisioner wrote it, admits the node. None when it does, or when there is
    nothing to judge: no selected node (Immediate, static), not provisioned, the node
    gone, the affinity since rewritten by someone else (MutablePVNodeAffinity), or a copy:
    a claim with a dataSource (a restore or a clone) may land where its source is, since the
    provisioner's requisite (without --strict-topology) lists every domain and a copy of a
    zonal or node-local volume can often only be made beside it (suites/test_snapshots.py)."""
    spec = claim.get("spec") or {}
    if spec.get("dataSource") or spec.get("dataSourceRef"):
        return None
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    selected = annotations.get(SELECTED_NODE)
    pv_notes = (pv.get("metadata") or {}).get("annotations") or {}
    if not selected or node is None or PROVISIONED_BY not in pv_notes:
        return None
    affinity_owner, provisioner = _affinity_owner(pv)
    if affinity_owner is not None and provisioner is not None and affinity_owner != provisioner:
        return None
    if node_matches_pv_affinity(node, pv):
        return None
    labels = (node.get("metadata") or {}).get("labels") or {}
    return (f"PV {(pv.get('metadata') or {}).get('name')} was provisioned by {pv_notes[PROVISIONED_BY]} for node "
            f"{selected} (zone {labels.get('topology.kubernetes.io/zone', '?')}), the node the scheduler selected, "
            f"but its nodeAffinity {(pv.get('spec') or {}).get('nodeAffinity')} excludes that node")

"""Invariants that must hold on any cluster at any quiet moment (pure).

Checked after every suite test over a snapshot of the cluster:
1. every scheduled pod sits on a node satisfying the nodeAffinity of every PV it uses;
2. every Bound PVC and its PV point at each other;
3. no PV is claimed by two PVCs;
4. no node has more of a CSI driver's volumes attached than the driver's CSINode
   allocatable count (volume_limits.py).
A test that knowingly produced a violation (the tightening race) names the pods to exempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.conformance.volume_limits import over_limit

KubeObject = Mapping[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """What the checker reads: pods, claims, volumes, nodes, VolumeAttachments and CSINodes
    as Kubernetes JSON."""

    pods: Sequence[KubeObject] = field(default_factory=list)
    claims: Sequence[KubeObject] = field(default_factory=list)
    volumes: Sequence[KubeObject] = field(default_factory=list)
    nodes: Sequence[KubeObject] = field(default_factory=list)
    terminating_namespaces: frozenset[str] = frozenset()
    attachments: Sequence[KubeObject] = field(default_factory=list)
    csi_nodes: Sequence[KubeObject] = field(default_factory=list)


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    objects: tuple[str, ...]

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


def _meta(o: KubeObject) -> Mapping[str, Any]:
    return o.get("metadata") or {}


def _key(o: KubeObject) -> str:
    m = _meta(o)
    return f"{m.get('namespace')}/{m.get('name')}" if m.get("namespace") else str(m.get("name"))


def check(snapshot: Snapshot, exempt_pods: Iterable[str] = ()) -> list[Violation]:
    """All violations in the snapshot; `exempt_pods` are "namespace/name" keys."""
    exempt = set(exempt_pods)
    gone = snapshot.terminating_namespaces

    def settled(o: KubeObject) -> bool:
        """Objects on their way out (or in a namespace being deleted) are between states."""
        return not _meta(o).get("deletionTimestamp") and _meta(o).get("namespace") not in gone

    claims = {_key(c): c for c in snapshot.claims if settled(c)}
    volumes = {str(_meta(v).get("name")): v for v in snapshot.volumes}
    nodes = {str(_meta(n).get("name")): n for n in snapshot.nodes}
    out: list[Violation] = []

    for pod in snapshot.pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or _key(pod) in exempt or not settled(pod):
            continue
        node = nodes.get(node_name)
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim_name = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim_name:
                continue
            claim = claims.get(f"{_meta(pod).get('namespace')}/{claim_name}")
            pv_name = (claim or {}).get("spec", {}).get("volumeName")
            pv = volumes.get(pv_name or "")
            if pv is None or node is None:
                continue
            if not node_matches_pv_affinity(node, pv):
                out.append(Violation(
                    "pod-on-pv-affinity",
                    f"pod {_key(pod)} runs on node {node_name} (labels {_meta(node).get('labels')}), which PV "
                    f"{pv_name}'s nodeAffinity {(pv.get('spec') or {}).get('nodeAffinity')} excludes",
                    (f"Pod/{_key(pod)}", f"Node/{node_name}", f"PersistentVolume/{pv_name}")))

    for key, claim in claims.items():
        status = (claim.get("status") or {}).get("phase")
        pv_name = (claim.get("spec") or {}).get("volumeName")
        if status != "Bound":
            continue
        pv = volumes.get(pv_name or "")
        ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
        if pv is None:
            out.append(Violation("bound-pair", f"PVC {key} is Bound to PV {pv_name!r}, which does not exist",
                                 (f"PersistentVolumeClaim/{key}",)))
        elif f"{ref.get('namespace')}/{ref.get('name')}" != key or (
                ref.get("uid") and ref.get("uid") != _meta(claim).get("uid")):
            out.append(Violation("bound-pair", f"PVC {key} is Bound to PV {pv_name}, whose claimRef is "
                                 f"{ref.get('namespace')}/{ref.get('name')} (uid {ref.get('uid')})",
                                 (f"PersistentVolumeClaim/{key}", f"PersistentVolume/{pv_name}")))

    owners: dict[str, list[str]] = {}
    for key, claim in claims.items():
        pv_name = (claim.get("spec") or {}).get("volumeName")
        if pv_name and (claim.get("status") or {}).get("phase") == "Bound":
            owners.setdefault(pv_name, []).append(key)
    for pv_name, keys in sorted(owners.items()):
        if len(keys) > 1:
            out.append(Violation("claimed-twice", f"PV {pv_name} is claimed by {len(keys)} PVCs: {sorted(keys)}",
                                 (f"PersistentVolume/{pv_name}", *(f"PersistentVolumeClaim/{k}" for k in keys))))

    for node_name, driver, count, limit, handles in over_limit(snapshot.attachments, snapshot.volumes,
                                                                snapshot.nodes, snapshot.csi_nodes):
        out.append(Violation("volume-limit", f"node {node_name} has {count} volumes of driver {driver} attached, "
                             f"more than its CSINode allocatable count {limit}: {handles}",
                             (f"Node/{node_name}", f"CSINode/{node_name}")))
    return out

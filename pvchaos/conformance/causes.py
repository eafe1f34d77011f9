"""The root cause of a Pending pod, from its node verdicts and claim states.

Three node sets decide it: the nodes the pod itself allows (nodeSelector, node
affinity), the nodes its volumes allow (VolumeBinding, VolumeZone) and the nodes that
take pods at all (not cordoned, no untolerated taint). A claim problem that blocks
every node comes first; then a volume that no node can reach (a local PV whose node is
gone, a zone without nodes, a class whose topology matches nothing); then a pod that
matches no node; then pod and volume wanting disjoint nodes (the Immediate cross-zone
incident); last, nodes that would fit but are tainted or cordoned.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pvchaos.conformance.affinity import node_matches_topology_terms
from pvchaos.conformance.types import KubeObject, dig
from pvchaos.conformance.verdicts import (
    HOSTNAME_KEY,
    NODE_STATE_FILTERS,
    POD_FILTERS,
    VOLUME_FILTERS,
    WFFC,
    ZONE_KEYS,
    ClaimState,
    Exclusion,
    NodeVerdict,
    Scene,
    nodes_passing,
    pod_key,
)


@dataclass(frozen=True)
class Cause:
    """The root cause, in plain words, with the facts a fix needs (``conformance.remedy``)."""

    code: str
    summary: str
    details: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)


def _name(obj: KubeObject | None) -> str:
    return str(dig(obj, "metadata", "name", default=""))


def _shown(class_name: str | None) -> str:
    """A class name as people write it; "" is the class-less case."""
    return class_name or '""'


def _claim_name(key: str) -> str:
    return key.split("/", 1)[1]


def _facts(scene: Scene, claim: ClaimState | None = None, **more: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"pod": pod_key(scene.pod), "namespace": dig(scene.pod, "metadata", "namespace",
                                                                          default="default")}
    if claim is not None:
        facts.update(claim=_claim_name(claim.key), storage_class=claim.storage_class,
                     binding_mode=claim.binding_mode, pv=claim.pv)
        storage_class = scene.classes.get(claim.storage_class or "")
        if storage_class is not None:
            facts["provisioner"] = dig(storage_class, "provisioner", default="")
    facts.update({k: v for k, v in more.items() if v is not None})
    return facts


def _affinity_values(pv: KubeObject, keys: Sequence[str]) -> set[str]:
    """Values an In expression on one of ``keys`` asks for, across the PV's terms."""
    out: set[str] = set()
    for term in dig(pv, "spec", "nodeAffinity", "required", "nodeSelectorTerms", default=[]):
        for expr in dig(term, "matchExpressions", default=[]):
            if dig(expr, "key") in keys and dig(expr, "operator") == "In":
                out |= set(dig(expr, "values", default=[]))
    return out


def _label_values(nodes: Sequence[KubeObject], keys: Sequence[str]) -> set[str]:
    return {labels[k] for n in nodes for k in keys if k in (labels := dig(n, "metadata", "labels", default={}))}


def _claim_wide(scene: Scene, claims: Sequence[ClaimState], pod_wide: Exclusion) -> Cause:
    """Causes that block every node: missing, deleted, mistyped-class or unbound Immediate claims."""
    claim = next(c for c in claims if c.key == pod_wide.claim)
    if claim.status == "missing":
        return Cause("CLAIM_MISSING", f"the pod uses claim {claim.key}, which does not exist", (claim.detail,),
                     _facts(scene, claim))
    if claim.status == "terminating":
        return Cause("CLAIM_TERMINATING", f"claim {claim.key} is being deleted; a pod cannot start on it",
                     (claim.detail,), _facts(scene, claim))
    if claim.status == "pv-gone":
        return Cause("PV_GONE", f"claim {claim.key} is bound to PV {claim.pv}, which no longer exists "
                     "(the claim is Lost)", (claim.detail,), _facts(scene, claim))
    if claim.status == "class-missing":
        known = sorted(scene.classes)
        close = difflib.get_close_matches(claim.storage_class or "", known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return Cause("CLASS_MISSING", f"claim {claim.key} asks for StorageClass {claim.storage_class!r}, which does "
                     f"not exist{hint}; the claim can never bind", (claim.detail, f"classes: {', '.join(known) or 'none'}"),
                     _facts(scene, claim, suggestion=close[0] if close else None))
    pvc = scene.claims[claim.key]
    if dig(pvc, "spec", "volumeName"):
        return Cause("VOLUME_NAME_MISFIT", f"claim {claim.key} names a PV that cannot bind it",
                     (claim.detail,), _facts(scene, claim, pv=dig(pvc, "spec", "volumeName")))
    provisioner = _facts(scene, claim).get("provisioner", "")
    if provisioner and provisioner != "kubernetes.io/no-provisioner":
        return Cause("PROVISIONING_PENDING", f"claim {claim.key} (Immediate) is unbound: {claim.detail.split(': ', 1)[1]}",
                     (claim.detail,), _facts(scene, claim))
    return Cause("NO_PV_FOR_CLAIM", f"claim {claim.key} is unbound (class {_shown(claim.storage_class)}, "
                 f"{claim.binding_mode or 'no class'}): no PersistentVolume fits it", (claim.detail,), _facts(scene, claim))


def _unreachable_volume(scene: Scene, verdicts: Sequence[NodeVerdict], claim: ClaimState) -> Cause:
    """One claim's volume fits no node of the cluster."""
    detail = next((e.detail for v in verdicts for e in v.exclusions if e.claim == claim.key), "")
    if claim.status == "bound":
        pv = next(p for p in scene.pvs if _name(p) == claim.pv)
        hosts = _affinity_values(pv, (HOSTNAME_KEY,))
        missing_hosts = sorted(hosts - _label_values(scene.nodes, (HOSTNAME_KEY,)))
        if hosts and missing_hosts and len(missing_hosts) == len(hosts):
            return Cause("LOCAL_PV_NODE_GONE", f"PV {claim.pv} (claim {claim.key}) lives on node "
                         f"{', '.join(missing_hosts)}, which is no longer in the cluster; its data is only there",
                         (detail,), _facts(scene, claim, hosts=missing_hosts))
        zones = _affinity_values(pv, ZONE_KEYS)
        missing_zones = sorted(zones - _label_values(scene.nodes, ZONE_KEYS))
        if zones and len(missing_zones) == len(zones):
            return Cause("ZONE_WITHOUT_NODES", f"PV {claim.pv} (claim {claim.key}) is in zone "
                         f"{', '.join(missing_zones)}, which has no nodes", (detail,),
                         _facts(scene, claim, zones=missing_zones))
        return Cause("PV_AFFINITY_MATCHES_NO_NODE", f"PV {claim.pv} (claim {claim.key}) has a node affinity no node "
                     "satisfies", (detail,), _facts(scene, claim))
    storage_class = scene.classes.get(claim.storage_class or "", {})
    terms = dig(storage_class, "allowedTopologies", default=[])
    if terms and not any(node_matches_topology_terms(n, terms) for n in scene.nodes):
        return Cause("CLASS_TOPOLOGY_MATCHES_NO_NODE", f"class {claim.storage_class} allows topologies no node has, "
                     f"so claim {claim.key} cannot be provisioned anywhere", (detail,), _facts(scene, claim))
    return Cause("NO_PV_FOR_CLAIM", f"no PersistentVolume fits claim {claim.key} on any node, and its class "
                 f"{claim.storage_class} cannot provision one", (detail,), _facts(scene, claim))


def _conflict(scene: Scene, verdicts: Sequence[NodeVerdict], claim: ClaimState, pod_nodes: set[str]) -> Cause:
    """The pod's own constraints and one claim's volume want disjoint nodes."""
    allowed = sorted(nodes_passing(verdicts, VOLUME_FILTERS, claim.key))
    zones = sorted({v.zone for v in verdicts if v.node in allowed and v.zone})
    pod_zones = sorted({v.zone for v in verdicts if v.node in pod_nodes and v.zone})
    detail = next((e.detail for v in verdicts if v.node in pod_nodes for e in v.exclusions if e.claim == claim.key), "")
    facts = _facts(scene, claim, volume_nodes=allowed, volume_zones=zones, pod_nodes=sorted(pod_nodes),
                   pod_zones=pod_zones)
    where = f"zone {', '.join(zones)}" if zones else f"node {', '.join(allowed)}"
    pod_where = f"zone {', '.join(pod_zones)}" if pod_zones else f"node {', '.join(sorted(pod_nodes))}"
    if claim.status == "bound" and claim.binding_mode != WFFC:
        how = (f"through the Immediate class {claim.storage_class}" if claim.storage_class
               else "without a class (static binding is immediate)")
        return Cause("IMMEDIATE_BINDING_WRONG_ZONE",
                     f"claim {claim.key} was bound {how} to PV {claim.pv} in {where}, before the pod was "
                     f"scheduled; the pod may only run in {pod_where}", (detail,), facts)
    if claim.status == "bound":
        return Cause("POD_PINNED_AWAY_FROM_VOLUME", f"PV {claim.pv} (claim {claim.key}) is reachable only from "
                     f"{where}, but the pod's nodeSelector/affinity allow only {pod_where}", (detail,), facts)
    storage_class = scene.classes.get(claim.storage_class or "", {})
    if dig(storage_class, "allowedTopologies"):
        return Cause("PINNED_OUTSIDE_ALLOWED_TOPOLOGIES", f"class {claim.storage_class} may provision only in "
                     f"{where}, but the pod may only run in {pod_where}", (detail,), facts)
    return Cause("NO_PV_FOR_CLAIM", f"no PersistentVolume fits claim {claim.key} on the nodes the pod allows "
                 f"({pod_where}), and class {claim.storage_class} cannot provision", (detail,), facts)


def _unavailable(scene: Scene, verdicts: Sequence[NodeVerdict], candidates: set[str], volume_bound: bool) -> Cause:
    """Nodes that would fit the pod and its volumes are tainted or cordoned."""
    lines = tuple(f"{v.node}: {e.detail}" for v in verdicts if v.node in candidates for e in v.exclusions
                  if e.filter in NODE_STATE_FILTERS)
    taints = sorted({e.label for v in verdicts if v.node in candidates for e in v.exclusions
                     if e.filter == "TaintToleration" and e.label})
    cordoned = sorted(v.node for v in verdicts if v.node in candidates
                      for e in v.exclusions if e.filter == "NodeUnschedulable")
    facts = _facts(scene, None, nodes=sorted(candidates), taints=taints, cordoned=cordoned)
    what = "the only node(s) its volumes allow" if volume_bound else "every node the pod allows"
    return Cause("VOLUME_NODES_UNAVAILABLE" if volume_bound else "NODES_UNAVAILABLE",
                 f"{what} ({', '.join(sorted(candidates))}) cannot take pods: " + "; ".join(lines), lines, facts)


def root_cause(scene: Scene, verdicts: Sequence[NodeVerdict], claims: Sequence[ClaimState],
               pod_wide: Exclusion | None) -> Cause:
    """The one cause to fix first; see the module docstring for the order."""
    if pod_wide is not None:
        return _claim_wide(scene, claims, pod_wide)
    everyone = {v.node for v in verdicts}
    fitting = {v.node for v in verdicts if v.fits}
    if fitting:
        for claim in claims:
            selected = dig(scene.claims.get(claim.key), "metadata", "annotations", "volume.kubernetes.io/selected-node")
            if claim.status == "unbound-delayed" and selected in fitting:
                return Cause("PROVISIONER_SILENT", f"the scheduler picked node {selected} and asked for a volume for "
                             f"claim {claim.key}; provisioner {_facts(scene, claim).get('provisioner')} has not created "
                             "it, so the pod waits", (claim.detail,), _facts(scene, claim, node=selected))
        return Cause("SCHEDULABLE", f"the pod fits {len(fitting)} node(s): {', '.join(sorted(fitting))}",
                     facts=_facts(scene, None, nodes=sorted(fitting)))
    if not everyone:
        return Cause("NO_NODES", "the cluster has no nodes", facts=_facts(scene, None))
    volume_nodes = nodes_passing(verdicts, VOLUME_FILTERS)
    pod_nodes = nodes_passing(verdicts, POD_FILTERS)
    volume_claims = [c for c in claims if c.status in ("bound", "unbound-delayed")]
    if not volume_nodes:
        for claim in volume_claims:
            if not nodes_passing(verdicts, VOLUME_FILTERS, claim.key):
                return _unreachable_volume(scene, verdicts, claim)
        return Cause("VOLUMES_DISJOINT", "each volume is reachable somewhere, but no node reaches all of them: "
                     + "; ".join(f"{c.key} -> {', '.join(sorted(nodes_passing(verdicts, VOLUME_FILTERS, c.key)))}"
                                 for c in volume_claims), facts=_facts(scene, None))
    if not pod_nodes:
        detail = next((e.detail for v in verdicts for e in v.exclusions if e.filter in POD_FILTERS), "")
        return Cause("POD_SELECTOR_MATCHES_NO_NODE", "the pod's nodeSelector/node affinity match no node",
                     (detail,), _facts(scene, None))
    if not pod_nodes & volume_nodes:
        for claim in volume_claims:
            if not pod_nodes & nodes_passing(verdicts, VOLUME_FILTERS, claim.key):
                return _conflict(scene, verdicts, claim, pod_nodes)
    return _unavailable(scene, verdicts, pod_nodes & volume_nodes, volume_nodes != everyone)

"""The causes of a Pending pod, root first, from its node verdicts, claim states and the
scheduler's latest message.

Every independent cause is kept (two broken claims are two causes), so fixing the
first is not followed by a surprise. Three node sets decide the per-node ones: the nodes the pod itself allows (nodeSelector, node
affinity), the nodes its volumes allow (VolumeBinding, VolumeZone) and the nodes that
take pods at all (not cordoned, no untolerated taint). A claim problem that blocks
every node comes first; then a volume that no node can reach (a local PV whose node is
gone, a zone without nodes, a class whose topology matches nothing); then a pod that
matches no node; then pod and volume wanting disjoint nodes (the Immediate cross-zone
incident); last, nodes that would fit but are tainted or cordoned. Before all of them
comes what keeps the scheduler away (a nodeName of a missing node, gates, a
schedulerName nobody serves); after them, filters only the scheduler's message reports
(resources held by other pods, inter-pod affinity, topology spread, any other), so a
pod the scheduler rejects is never called schedulable.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pvchaos.conformance.affinity import node_matches_topology_terms, untolerated_taints
from pvchaos.conformance.claims import explain_mismatch, find_matching_volume
from pvchaos.conformance.csi_nodes import csinode_gaps
from pvchaos.conformance.placement import UNSCHEDULABLE_TAINT
from pvchaos.conformance.scheduler_message import SchedulerMessage, unmodeled_code, unmodeled_pod_wide_plugin
from pvchaos.conformance.types import KubeObject, dig
from pvchaos.conformance.verdicts import (
    HOSTNAME_KEY,
    NODE_STATE_FILTERS,
    POD_FILTERS,
    RESOURCE_FILTERS,
    VOLUME_FILTERS,
    WFFC,
    ZONE_KEYS,
    ClaimState,
    Exclusion,
    NodeVerdict,
    Scene,
    nodes_passing,
    pod_key,
    pod_requests,
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
    if _owner(scene.pod):
        facts["owner"] = _owner(scene.pod)
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


def released_fit(scene: Scene, pvc: KubeObject) -> KubeObject | None:
    """A Released PV that would bind ``pvc`` but for the claimRef its old claim left: with
    reclaimPolicy Retain the PV controller never reuses it until ``spec.claimRef`` is cleared."""
    named = dig(pvc, "spec", "volumeName")
    released = [pv for pv in scene.pvs if dig(pv, "status", "phase") == "Released"
                and (not named or _name(pv) == named)]
    freed = [{**pv, "spec": {k: v for k, v in pv["spec"].items() if k != "claimRef"}, "status": {"phase": "Available"}}
             for pv in released]
    if named:
        return released[0] if freed and not explain_mismatch(pvc, freed[0]) else None
    found = find_matching_volume(pvc, freed)
    return next((pv for pv in released if found is not None and _name(pv) == _name(found)), None)


def provisioning_failures(scene: Scene, claim_name: str) -> list[str]:
    """The provisioner's own words: the messages of the claim's ProvisioningFailed events, newest last."""
    found = [e for e in scene.events if dig(e, "reason") == "ProvisioningFailed"
             and dig(e, "involvedObject", "kind") == "PersistentVolumeClaim"
             and dig(e, "involvedObject", "name") == claim_name]
    found.sort(key=lambda e: str(dig(e, "lastTimestamp") or dig(e, "eventTime") or ""))
    return [str(dig(e, "message", default="")).strip() for e in found]


NO_AVAILABLE_TOPOLOGY = "no available topology found"  # external-provisioner controller/topology.go


def _no_available_topology(scene: Scene, claim: ClaimState, errors: Sequence[str], provisioner: str) -> Cause:
    """The external-provisioner found no node whose CSINode lists the driver with its
    topology keys: the fix is on the nodes (the node plugin, its registration), not in
    the claim; the CSINodes are the evidence."""
    gaps = csinode_gaps(scene.csinodes, scene.nodes, provisioner)
    shown = "; ".join(f"{node}: {gap}" for node, gap in sorted(gaps.items())[:6])
    seen = (f"; of {len(scene.nodes)} node(s), {len(gaps)} lack it ({shown})" if scene.csinodes
            else "; CSINodes were not read")
    return Cause("NO_AVAILABLE_TOPOLOGY", f"provisioner {provisioner} cannot create the volume of claim {claim.key}: "
                 f"no node's CSINode lists driver {provisioner} with topology keys{seen}",
                 (claim.detail, errors[-1]), _facts(scene, claim, error=errors[-1], gaps=dict(gaps)))


def _provisioning_failed(scene: Scene, claim: ClaimState, errors: Sequence[str]) -> Cause:
    """The provisioner ran and refused: its last error is the evidence, and the fix is for it."""
    provisioner = _facts(scene, claim).get("provisioner", "")
    if NO_AVAILABLE_TOPOLOGY in errors[-1]:
        return _no_available_topology(scene, claim, errors, str(provisioner))
    return Cause("PROVISIONING_FAILED", f"provisioner {provisioner} failed to create the volume of claim {claim.key}: "
                 f"{errors[-1]}", (claim.detail, f"{len(errors)} ProvisioningFailed event(s)"),
                 _facts(scene, claim, error=errors[-1]))


def _released(scene: Scene, claim: ClaimState, pv: KubeObject) -> Cause:
    old = dig(pv, "spec", "claimRef", default={}) or {}
    return Cause("PV_RELEASED", f"PV {_name(pv)} would fit claim {claim.key}, but it is Released (reclaimPolicy "
                 f"{dig(pv, 'spec', 'persistentVolumeReclaimPolicy', default='Retain')}): its spec.claimRef still names "
                 f"the deleted claim {old.get('namespace', '?')}/{old.get('name', '?')}", (claim.detail,),
                 _facts(scene, claim, pv=_name(pv)))


def _claim_wide(scene: Scene, claim: ClaimState) -> Cause:
    """Causes that block every node: missing, deleted, mistyped-class or unbound Immediate claims."""
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
    return _unbound_immediate(scene, claim)


def _unbound_immediate(scene: Scene, claim: ClaimState) -> Cause:
    """Why an Immediate claim stays unbound, at its root: a Released PV that would fit, a
    volumeName that does not, the provisioner's own error, a silent provisioner, no PV."""
    pvc = scene.claims[claim.key]
    released = released_fit(scene, pvc)
    if released is not None:
        return _released(scene, claim, released)
    if dig(pvc, "spec", "volumeName"):
        return Cause("VOLUME_NAME_MISFIT", f"claim {claim.key} names a PV that cannot bind it",
                     (claim.detail,), _facts(scene, claim, pv=dig(pvc, "spec", "volumeName")))
    provisioner = _facts(scene, claim).get("provisioner", "")
    if provisioner and provisioner != "kubernetes.io/no-provisioner":
        errors = provisioning_failures(scene, _claim_name(claim.key))
        if errors:
            return _provisioning_failed(scene, claim, errors)
        return Cause("PROVISIONING_PENDING", f"claim {claim.key} (Immediate) is unbound: {claim.detail.split(': ', 1)[1]}",
                     (claim.detail,), _facts(scene, claim))
    return Cause("NO_PV_FOR_CLAIM", f"claim {claim.key} is unbound (class {_shown(claim.storage_class)}, "
                 f"{claim.binding_mode or 'no class'}): no PersistentVolume fits it", (claim.detail,), _facts(scene, claim))


def _hostname_is_a_node_name(scene: Scene, claim: ClaimState, hosts: set[str], detail: str) -> Cause | None:
    """The PV names a node by ``metadata.name`` where the scheduler matches the node's
    kubernetes.io/hostname label, and the two differ: the node is there, the label is not."""
    by_name = {_name(n): n for n in scene.nodes}
    named = sorted(h for h in hosts if h in by_name)
    if not named or hosts - _label_values(scene.nodes, (HOSTNAME_KEY,)) != hosts:
        return None
    labels = {h: dig(by_name[h], "metadata", "labels", HOSTNAME_KEY, default="") for h in named}
    shown = ", ".join(f"node {h} has {HOSTNAME_KEY}={labels[h] or '(none)'}" for h in named)
    return Cause("PV_HOSTNAME_IS_NODE_NAME", f"PV {claim.pv} (claim {claim.key}) asks for {HOSTNAME_KEY} In "
                 f"[{', '.join(sorted(hosts))}], the node's name; the scheduler matches the label, and {shown}",
                 (detail,), _facts(scene, claim, nodes=named, hostnames=[labels[h] for h in named]))


def _zone_without_nodes(scene: Scene, claim: ClaimState, zones: list[str], detail: str) -> Cause:
    """A PV in a zone with no nodes; when its class may provision only in such zones, the
    class is the root (a new claim would land there again)."""
    storage_class = scene.classes.get(claim.storage_class or "", {})
    terms = dig(storage_class, "allowedTopologies", default=[])
    class_root = bool(terms) and not any(node_matches_topology_terms(n, terms) for n in scene.nodes)
    why = f"; class {claim.storage_class} may provision only there (allowedTopologies)" if class_root else ""
    return Cause("ZONE_WITHOUT_NODES", f"PV {claim.pv} (claim {claim.key}) is in zone {', '.join(zones)}, which has "
                 f"no nodes{why}", (detail,),
                 _facts(scene, claim, zones=zones, class_root=class_root or None,
                        node_zones=sorted(_label_values(scene.nodes, ZONE_KEYS))))


def _unreachable_volume(scene: Scene, verdicts: Sequence[NodeVerdict], claim: ClaimState) -> Cause:
    """One claim's volume fits no node of the cluster."""
    detail = next((e.detail for v in verdicts for e in v.exclusions if e.claim == claim.key), "")
    if claim.status == "bound":
        pv = next(p for p in scene.pvs if _name(p) == claim.pv)
        hosts = _affinity_values(pv, (HOSTNAME_KEY,))
        by_name = _hostname_is_a_node_name(scene, claim, hosts, detail) if hosts else None
        if by_name is not None:
            return by_name
        missing_hosts = sorted(hosts - _label_values(scene.nodes, (HOSTNAME_KEY,)))
        if hosts and missing_hosts and len(missing_hosts) == len(hosts):
            return Cause("LOCAL_PV_NODE_GONE", f"PV {claim.pv} (claim {claim.key}) lives on node "
                         f"{', '.join(missing_hosts)}, which is no longer in the cluster; its data is only there",
                         (detail,), _facts(scene, claim, hosts=missing_hosts))
        zones = _affinity_values(pv, ZONE_KEYS)
        missing_zones = sorted(zones - _label_values(scene.nodes, ZONE_KEYS))
        if zones and len(missing_zones) == len(zones):
            return _zone_without_nodes(scene, claim, missing_zones, detail)
        return Cause("PV_AFFINITY_MATCHES_NO_NODE", f"PV {claim.pv} (claim {claim.key}) has a node affinity no node "
                     "satisfies", (detail,), _facts(scene, claim))
    storage_class = scene.classes.get(claim.storage_class or "", {})
    terms = dig(storage_class, "allowedTopologies", default=[])
    if terms and not any(node_matches_topology_terms(n, terms) for n in scene.nodes):
        return Cause("CLASS_TOPOLOGY_MATCHES_NO_NODE", f"class {claim.storage_class} allows topologies no node has, "
                     f"so claim {claim.key} cannot be provisioned anywhere", (detail,), _facts(scene, claim))
    released = released_fit(scene, scene.claims[claim.key])
    if released is not None:
        return _released(scene, claim, released)
    return Cause("NO_PV_FOR_CLAIM", f"no PersistentVolume fits claim {claim.key} on any node, and its class "
                 f"{claim.storage_class} cannot provision one", (detail,), _facts(scene, claim))


def _where(zones: Sequence[str], nodes: Sequence[str], level: str) -> str:
    return f"zone {', '.join(zones)}" if level == "zone" else f"node {', '.join(nodes)}"


def _conflict(scene: Scene, verdicts: Sequence[NodeVerdict], claim: ClaimState, pod_nodes: set[str]) -> Cause:
    """The pod's own constraints and one claim's volume want disjoint nodes, said at the
    level where they part: zones when they share none, else nodes (a hostname pin inside
    one zone is not fixed by "run in that zone")."""
    allowed = sorted(nodes_passing(verdicts, VOLUME_FILTERS, claim.key))
    zones = sorted({v.zone for v in verdicts if v.node in allowed and v.zone})
    pod_zones = sorted({v.zone for v in verdicts if v.node in pod_nodes and v.zone})
    level = "zone" if zones and pod_zones and not set(zones) & set(pod_zones) else "node"
    detail = next((e.detail for v in verdicts if v.node in pod_nodes for e in v.exclusions if e.claim == claim.key), "")
    where, pod_where = _where(zones, allowed, level), _where(pod_zones, sorted(pod_nodes), level)
    facts = _facts(scene, claim, volume_nodes=allowed, volume_zones=zones, pod_nodes=sorted(pod_nodes),
                   pod_zones=pod_zones, level=level, volume_where=where, pod_where=pod_where)
    if claim.status == "bound" and claim.binding_mode != WFFC:
        how = (f"through the Immediate class {claim.storage_class}" if claim.storage_class
               else "without a class (static binding is immediate)")
        pv = next((p for p in scene.pvs if _name(p) == claim.pv), {})
        provisioner = _facts(scene, claim).get("provisioner", "")
        static = not dig(pv, "metadata", "annotations", "pv.kubernetes.io/provisioned-by") and (
            not provisioner or provisioner == "kubernetes.io/no-provisioner")
        facts["static"] = static
        return Cause("IMMEDIATE_BINDING_WRONG_ZONE",
                     f"claim {claim.key} was bound {how} to {'the existing ' if static else ''}PV {claim.pv} in "
                     f"{where}, before the pod was scheduled; the pod may only run in {pod_where}", (detail,), facts)
    if claim.status == "bound":
        return Cause("POD_PINNED_AWAY_FROM_VOLUME", f"PV {claim.pv} (claim {claim.key}) is reachable only from "
                     f"{where}, but the pod's nodeSelector/affinity allow only {pod_where}", (detail,), facts)
    storage_class = scene.classes.get(claim.storage_class or "", {})
    if dig(storage_class, "allowedTopologies"):
        return Cause("PINNED_OUTSIDE_ALLOWED_TOPOLOGIES", f"class {claim.storage_class} may provision only in "
                     f"{where}, but the pod may only run in {pod_where}", (detail,), facts)
    released = released_fit(scene, scene.claims[claim.key])
    if released is not None:
        return _released(scene, claim, released)
    return Cause("NO_PV_FOR_CLAIM", f"no PersistentVolume fits claim {claim.key} on the nodes the pod allows "
                 f"({pod_where}), and class {claim.storage_class} cannot provision", (detail,), facts)


def _node_taints(scene: Scene, nodes: set[str]) -> list[dict[str, str]]:
    """The untolerated taints of ``nodes`` (cordoning's own taint left to "uncordon")."""
    tolerations = dig(scene.pod, "spec", "tolerations", default=[]) or []
    out = []
    for n in scene.nodes:
        if _name(n) in nodes:
            for t in untolerated_taints(dig(n, "spec", "taints", default=[]), tolerations):
                if dig(t, "key") != UNSCHEDULABLE_TAINT["key"]:
                    out.append({"node": _name(n), "key": str(dig(t, "key", default="")),
                                "value": str(dig(t, "value", default="")), "effect": str(dig(t, "effect", default=""))})
    return out


def _wrong_effects(scene: Scene, taints: Sequence[Mapping[str, str]]) -> list[str]:
    """Tolerations the pod has for a taint's key, but with another effect (they do not count)."""
    out = []
    for tol in dig(scene.pod, "spec", "tolerations", default=[]) or []:
        for t in taints:
            if dig(tol, "key") == t["key"] and dig(tol, "effect") and dig(tol, "effect") != t["effect"]:
                out.append(f"the pod tolerates {t['key']} only with effect {dig(tol, 'effect')}; the taint has "
                           f"effect {t['effect']}")
    return sorted(set(out))


def _unavailable(scene: Scene, verdicts: Sequence[NodeVerdict], candidates: set[str], volume_bound: bool) -> Cause:
    """Nodes that would fit the pod and its volumes are tainted or cordoned."""
    lines = tuple(f"{v.node}: {e.detail}" for v in verdicts if v.node in candidates for e in v.exclusions
                  if e.filter in NODE_STATE_FILTERS)
    taints = _node_taints(scene, candidates)
    cordoned = sorted(v.node for v in verdicts if v.node in candidates
                      for e in v.exclusions if e.filter == "NodeUnschedulable")
    wrong = _wrong_effects(scene, taints)
    facts = _facts(scene, None, nodes=sorted(candidates), taints=taints, cordoned=cordoned,
                   tolerations=dig(scene.pod, "spec", "tolerations", default=[]) or [])
    what = "the only node(s) its volumes allow" if volume_bound else "every node the pod allows"
    return Cause("VOLUME_NODES_UNAVAILABLE" if volume_bound else "NODES_UNAVAILABLE",
                 f"{what} ({', '.join(sorted(candidates))}) cannot take pods: " + "; ".join(lines),
                 lines + tuple(wrong), facts)


def _too_big(scene: Scene, verdicts: Sequence[NodeVerdict], nodes: set[str]) -> Cause:
    """The pod requests more than the whole allocatable of every node it could use."""
    lines = tuple(f"{v.node}: {e.detail}" for v in verdicts if v.node in nodes for e in v.exclusions
                  if e.filter in RESOURCE_FILTERS)
    resources = sorted({e.label for v in verdicts if v.node in nodes for e in v.exclusions
                        if e.filter in RESOURCE_FILTERS and e.label})
    return Cause("INSUFFICIENT_RESOURCES", f"the pod requests more {', '.join(resources)} than any of "
                 f"{len(nodes)} node(s) it may use has allocatable", lines[:6],
                 _facts(scene, None, resources=resources, nodes=sorted(nodes), owner=_owner(scene.pod)))


def _owner(pod: KubeObject) -> str | None:
    refs = dig(pod, "metadata", "ownerReferences", default=[]) or []
    return f"{refs[0].get('kind', '')}/{refs[0].get('name', '')}" if refs else None


def _node_causes(scene: Scene, verdicts: Sequence[NodeVerdict], claims: Sequence[ClaimState]) -> list[Cause]:
    """Every independent per-node cause, root first: unreachable volumes, volumes that
    share no node, a pod that matches no node, requests no node holds, pod and volume
    apart; last, fitting nodes that are tainted, cordoned or too small."""
    everyone = {v.node for v in verdicts}
    if any(v.fits for v in verdicts):
        return []
    if not everyone:
        return [Cause("NO_NODES", "the cluster has no nodes", facts=_facts(scene, None))]
    volume_nodes = nodes_passing(verdicts, VOLUME_FILTERS)
    pod_nodes = nodes_passing(verdicts, POD_FILTERS)
    res_nodes = nodes_passing(verdicts, RESOURCE_FILTERS)
    volume_claims = [c for c in claims if c.status in ("bound", "unbound-delayed")]
    unreachable = [c for c in volume_claims if not nodes_passing(verdicts, VOLUME_FILTERS, c.key)]
    out = [_unreachable_volume(scene, verdicts, c) for c in unreachable]
    if not unreachable and not volume_nodes:
        out.append(Cause("VOLUMES_DISJOINT", "each volume is reachable somewhere, but no node reaches all of them: "
                         + "; ".join(f"{c.key} -> {', '.join(sorted(nodes_passing(verdicts, VOLUME_FILTERS, c.key)))}"
                                     for c in volume_claims), facts=_facts(scene, None)))
    if not pod_nodes:
        detail = next((e.detail for v in verdicts for e in v.exclusions if e.filter in POD_FILTERS), "")
        out.append(Cause("POD_SELECTOR_MATCHES_NO_NODE", "the pod's nodeSelector/node affinity match no node",
                         (detail,), _facts(scene, None)))
    if not res_nodes:
        out.append(_too_big(scene, verdicts, everyone))
    if pod_nodes and not unreachable:
        out += [_conflict(scene, verdicts, c, pod_nodes) for c in volume_claims
                if not pod_nodes & nodes_passing(verdicts, VOLUME_FILTERS, c.key)]
    if out:
        return out
    candidates = pod_nodes & volume_nodes
    if not candidates & res_nodes:
        return [_too_big(scene, verdicts, candidates)]
    return [_unavailable(scene, verdicts, candidates & res_nodes, volume_nodes != everyone)]


def _pod_level(scene: Scene, fitting: set[str]) -> list[Cause]:
    """What keeps the scheduler from judging the pod at all: a nodeName that names a
    missing node (the scheduler skips such pods), scheduling gates, a schedulerName no
    scheduler answers for (no FailedScheduling event from it)."""
    spec = dig(scene.pod, "spec", default={}) or {}
    out = []
    node_name = spec.get("nodeName")
    if node_name and node_name not in {_name(n) for n in scene.nodes}:
        out.append(Cause("NODE_NAME_MISSING", f"the pod's spec.nodeName names node {node_name}, which is not in the "
                         "cluster; the scheduler skips pods with a nodeName, and no kubelet will start it",
                         facts=_facts(scene, None, node=node_name, owner=_owner(scene.pod),
                                      fitting=sorted(fitting)[:3])))
    gates = [g.get("name", "") for g in spec.get("schedulingGates") or []]
    if gates:
        out.append(Cause("SCHEDULING_GATED", f"the pod has scheduling gates ({', '.join(gates)}); the scheduler "
                         "waits until they are removed", facts=_facts(scene, None, gates=gates)))
    scheduler = spec.get("schedulerName") or "default-scheduler"
    if scheduler != "default-scheduler" and not _scheduler_events(scene):
        out.append(Cause("NO_SCHEDULER", f"the pod asks for scheduler {scheduler!r} (spec.schedulerName), and no "
                         "scheduler has reported on it; the default scheduler ignores it",
                         facts=_facts(scene, None, scheduler=scheduler, owner=_owner(scene.pod))))
    return out


def _scheduler_events(scene: Scene) -> list[KubeObject]:
    name = dig(scene.pod, "metadata", "name")
    return [e for e in scene.events if dig(e, "reason") == "FailedScheduling"
            and dig(e, "involvedObject", "kind") == "Pod" and dig(e, "involvedObject", "name") == name]


def _volume_progress(scene: Scene, claims: Sequence[ClaimState], fitting: set[str]) -> list[Cause]:
    """WaitForFirstConsumer claims that hold the pod after it found a node: a provisioner
    that failed (its own error) or never answered."""
    out = []
    for claim in claims:
        if claim.status != "unbound-delayed":
            continue
        selected = dig(scene.claims.get(claim.key), "metadata", "annotations", "volume.kubernetes.io/selected-node")
        errors = provisioning_failures(scene, _claim_name(claim.key))
        if errors:
            out.append(_provisioning_failed(scene, claim, errors))
        elif selected in fitting:
            out.append(Cause("PROVISIONER_SILENT", f"the scheduler picked node {selected} and asked for a volume for "
                             f"claim {claim.key}; provisioner {_facts(scene, claim).get('provisioner')} has not "
                             "created it, so the pod waits", (claim.detail,), _facts(scene, claim, node=selected)))
    return out


def _message_causes(scene: Scene, parsed: SchedulerMessage | None, verdicts: Sequence[NodeVerdict]) -> list[Cause]:
    """Filters explain does not judge (or judges only in part, like resources held by
    other pods), as the scheduler's latest message reports them: the scheduler's words
    are the evidence, and they are a cause, never a silent "fits"."""
    if parsed is None or parsed.total is None:
        return []
    found: dict[str, list[str]] = {}
    plugins: dict[str, str] = {}
    if parsed.pod_wide is not None and parsed.pod_wide_key is None:  # a PreFilter rejection with no key
        found["UNMODELED_FILTER"] = [f"{parsed.pod_wide} (every node at once)"]
        plugins["UNMODELED_FILTER"] = unmodeled_pod_wide_plugin(parsed.pod_wide)
    for reason, count in parsed.unknown.items():
        plugin, code = unmodeled_code(reason)
        found.setdefault(code, []).append(f"{count} {reason}")
        plugins.setdefault(code, plugin)
    predicted: dict[str, int] = {}
    for v in verdicts:
        for key in v.scheduler_reasons():
            predicted[key] = predicted.get(key, 0) + 1
    if parsed.counts.get("NOT_ENOUGH_STORAGE", 0) > predicted.get("NOT_ENOUGH_STORAGE", 0):
        found.setdefault("INSUFFICIENT_CAPACITY", []).append(
            f"{parsed.counts['NOT_ENOUGH_STORAGE']} node(s) did not have enough free storage (the CSIStorageCapacity "
            "objects of the driver leave no room there for the claim's request)")
        plugins.setdefault("INSUFFICIENT_CAPACITY", "VolumeBinding")
    for key in ("INSUFFICIENT_CPU", "INSUFFICIENT_MEMORY", "INSUFFICIENT_EPHEMERAL"):
        if parsed.counts.get(key, 0) > predicted.get(key, 0):
            found.setdefault("INSUFFICIENT_RESOURCES", []).append(
                f"{parsed.counts[key]} node(s) short of "
                f"{key.split('_', 1)[1].lower().replace('ephemeral', 'ephemeral-storage')} (explain sees "
                f"{predicted.get(key, 0)} by allocatable alone: other pods hold the rest)")
            plugins.setdefault("INSUFFICIENT_RESOURCES", "NodeResourcesFit")
    return [Cause(code, f"the scheduler's {plugins[code]} filter rejects node(s): {', '.join(words)}"
                  + ("" if code != "UNMODELED_FILTER" else "; explain does not model this filter"),
                  (parsed.text,), _facts(scene, None, plugin=plugins[code], reasons=words, owner=_owner(scene.pod),
                                         resources=_requested(scene.pod)))
            for code, words in found.items()]


def _requested(pod: KubeObject) -> list[str]:
    return sorted(pod_requests(pod))


UNJUDGED = (("podAffinity", "required inter-pod affinity"), ("podAntiAffinity", "required inter-pod anti-affinity"))


def _unjudged(scene: Scene, fitting: set[str], with_message: bool = False) -> list[Cause]:
    """Nodes fit by every modelled filter, but the pod has constraints explain does not
    judge and no scheduler verdict explain reproduces covers them (none yet, or one
    about something else): not confirmed, so not "fits"."""
    affinity = dig(scene.pod, "spec", "affinity", default={}) or {}
    what = [text for key, text in UNJUDGED
            if dig(affinity, key, "requiredDuringSchedulingIgnoredDuringExecution")]
    if any(c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
           for c in dig(scene.pod, "spec", "topologySpreadConstraints", default=[]) or []):
        what.append("topology spread constraints (DoNotSchedule)")
    claims = [f"{c.get('name')} -> {c.get('resourceClaimName') or c.get('resourceClaimTemplateName') or '?'}"
              for c in dig(scene.pod, "spec", "resourceClaims", default=[]) or []]
    if claims:  # DynamicResources holds such a pod at PreEnqueue, without a message, while a claim is missing
        what.append(f"ResourceClaims ({', '.join(claims)}; DynamicResources, which may hold the pod without "
                    "a message while a claim is missing)")
    if not what:
        return []
    return [Cause("UNMODELED_FILTER", f"{len(fitting)} node(s) pass every filter explain models, but the pod has "
                  f"{', '.join(what)}, which explain does not judge, and "
                  + ("the scheduler's latest message does not judge them" if with_message
                     else "the scheduler has not reported yet"),
                  facts=_facts(scene, None, plugin=", ".join(what), nodes=sorted(fitting), owner=_owner(scene.pod)))]


def _not_reproduced(scene: Scene, parsed: SchedulerMessage, stale: str | None, fitting: set[str]) -> Cause:
    """The scheduler rejected the pod, explain finds nodes that fit and no cause: the
    scheduler's words are not reproduced, so the answer is not "fits". Either the world
    changed after the message (stale) or the scheduler saw something explain does not."""
    reported = dict(parsed.counts) or parsed.pod_wide_key or parsed.pod_wide or parsed.text
    facts = _facts(scene, None, nodes=sorted(fitting), reported=reported, message=parsed.text,
                   owner=_owner(scene.pod))
    nodes = f"{len(fitting)} node(s) ({', '.join(sorted(fitting)[:6])})"
    if stale:
        return Cause("SCHEDULER_MESSAGE_STALE", f"explain finds {nodes} that fit, but the scheduler's latest "
                     f"message rejected the pod and is older than the last change: not confirmed until the "
                     f"scheduler judges it again", (parsed.text, stale), facts)
    return Cause("SCHEDULER_DISAGREES", f"the scheduler rejected the pod for reasons explain does not reproduce "
                 f"({_reported_text(reported)}); explain finds {nodes} that fit: something it does not see "
                 "(changed since, or read differently) holds the pod", (parsed.text,), facts)


def _reported_text(reported: object) -> str:
    if isinstance(reported, dict):
        return ", ".join(f"{count} {key}" for key, count in reported.items())
    return str(reported)


def root_causes(scene: Scene, verdicts: Sequence[NodeVerdict], claims: Sequence[ClaimState],
                parsed: SchedulerMessage | None = None, stale: str | None = None) -> tuple[Cause, ...]:
    """Every independent cause, in the order to fix them: what keeps the scheduler away,
    claims that block every node, volumes and pod constraints per node, then filters
    only the scheduler's message reports. SCHEDULABLE only when none is found and no
    FailedScheduling message contradicts it (a message newer than the pod's last change
    that explain cannot reproduce is SCHEDULER_DISAGREES; an older one, STALE)."""
    fitting = {v.node for v in verdicts if v.fits}
    out = _pod_level(scene, fitting)
    wide = [c for c in claims if c.status in CLAIM_WIDE]
    out += [_claim_wide(scene, c) for c in wide]
    if any(c.code == "NODE_NAME_MISSING" for c in out):
        return tuple(out)
    out += _volume_progress(scene, claims, fitting)
    out += _node_causes(scene, verdicts, claims)
    out += [c for c in _message_causes(scene, parsed if not wide else None, verdicts)
            if c.code not in {o.code for o in out}]
    if not out and fitting:
        if parsed is not None:
            out.append(_not_reproduced(scene, parsed, stale, fitting))
        out += _unjudged(scene, fitting, parsed is not None)
    if out:
        return tuple(out)
    return (Cause("SCHEDULABLE", f"the pod fits {len(fitting)} node(s): {', '.join(sorted(fitting))}",
                  facts=_facts(scene, None, nodes=sorted(fitting))),)


CLAIM_WIDE = ("missing", "terminating", "pv-gone", "class-missing", "unbound-immediate")


def root_cause(scene: Scene, verdicts: Sequence[NodeVerdict], claims: Sequence[ClaimState],
               pod_wide: Exclusion | None = None, parsed: SchedulerMessage | None = None) -> Cause:
    """The one cause to fix first (``root_causes`` lists the others)."""
    return root_causes(scene, verdicts, claims, parsed)[0]

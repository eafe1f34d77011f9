"""The constraints that keep a pod off each node, and the state of its claims.

Built on the oracle the suites already trust: ``conformance.affinity`` for matching,
``conformance.claims`` for claim-to-volume matching and ``conformance.placement`` for the
scheduler's filters. The per-node checks follow kube-scheduler's default filter order
(NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodeResourcesFit, VolumeBinding,
VolumeZone),
so a node's first exclusion is the one the scheduler counts in its FailedScheduling
message. Every check is kept (not only the first), so the root cause can tell "the
pod's volume is only reachable on a tainted node" from "every node is tainted".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pvchaos.conformance.affinity import (
    label_selector_matches,
    node_matches_pv_affinity,
    node_matches_selector,
    toleration_tolerates_taint,
    untolerated_taints,
)
from pvchaos.conformance.claims import claim_class, explain_mismatch, find_matching_volume, requested_storage
from pvchaos.conformance.placement import (
    NO_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    UNSCHEDULABLE_TAINT,
    can_provision,
    pod_claim_keys,
    volume_zone_ok,
)
from pvchaos.conformance.quantity import parse_quantity
from pvchaos.conformance.types import KubeObject, dig

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
WFFC = "WaitForFirstConsumer"
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEYS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
POD_FILTERS = ("NodeName", "NodeAffinity")
RESOURCE_FILTERS = ("NodeResourcesFit",)
NODE_STATE_FILTERS = ("NodeUnschedulable", "TaintToleration")
VOLUME_FILTERS = ("VolumeBinding", "VolumeZone")


@dataclass(frozen=True)
class Scene:
    """Everything the explanation reads, as the API server returned it."""

    pod: KubeObject
    nodes: Sequence[KubeObject]
    claims: Mapping[str, KubeObject]  # "namespace/name" -> PVC
    pvs: Sequence[KubeObject]
    classes: Mapping[str, KubeObject]  # name -> StorageClass
    events: Sequence[KubeObject] = ()  # events of the pod's namespace (pod and claims)
    minor: int | None = None
    attachments: Sequence[KubeObject] = ()  # VolumeAttachments (ContainerCreating: who holds a volume)
    csinodes: Sequence[KubeObject] = ()  # CSINodes (which drivers, with which topology keys, each node has)


@dataclass(frozen=True)
class Exclusion:
    """One constraint that keeps the pod off a node (or off every node, when pod-wide)."""

    filter: str  # the kube-scheduler plugin that checks it
    reasons: tuple[str, ...]  # keys of conformance.messages the scheduler reports for it
    detail: str
    claim: str | None = None
    pv: str | None = None
    term: int | None = None  # 1-based index of the nodeSelectorTerm, when one term is at fault
    label: str | None = None


@dataclass(frozen=True)
class NodeVerdict:
    """A node and every constraint that excludes the pod there, in filter order."""

    node: str
    zone: str | None
    exclusions: tuple[Exclusion, ...] = ()

    @property
    def fits(self) -> bool:
        return not self.exclusions

    @property
    def first(self) -> Exclusion | None:
        return self.exclusions[0] if self.exclusions else None

    def scheduler_reasons(self) -> tuple[str, ...]:
        """The reasons the scheduler counts: those of the first failing filter only."""
        if not self.exclusions:
            return ()
        first = self.exclusions[0].filter
        return tuple(dict.fromkeys(r for e in self.exclusions if e.filter == first for r in e.reasons))


@dataclass(frozen=True)
class ClaimState:
    """One claim of the pod: bound, unbound (and why), missing, or pointing at a lost PV."""

    key: str
    status: str  # bound | pv-gone | missing | terminating | class-missing | unbound-immediate | unbound-delayed
    storage_class: str | None = None
    binding_mode: str | None = None
    pv: str | None = None
    detail: str = ""


# ---- small readers -------------------------------------------------------------------------

def _name(obj: KubeObject | None) -> str:
    return str(dig(obj, "metadata", "name", default=""))


def _labels(obj: KubeObject | None) -> Mapping[str, str]:
    labels: Mapping[str, str] = dig(obj, "metadata", "labels", default={})
    return labels


def _zone(node: KubeObject) -> str | None:
    labels = _labels(node)
    return next((labels[k] for k in ZONE_KEYS if k in labels), None)


def pod_key(pod: KubeObject) -> str:
    return f"{dig(pod, 'metadata', 'namespace', default='default')}/{_name(pod)}"


def _expr_text(expr: KubeObject) -> str:
    values = dig(expr, "values", default=[])
    shown = f" [{', '.join(map(str, values))}]" if values else ""
    return f"{dig(expr, 'key', default='')} {dig(expr, 'operator', default='')}{shown}"


def _has_text(node: KubeObject, key: str) -> str:
    labels = _labels(node)
    return f"node has {key}={labels[key]}" if key in labels else f"node has no {key} label"


def _taint_text(taint: KubeObject) -> str:
    value = dig(taint, "value", default="")
    return f"{dig(taint, 'key', default='')}{'=' + value if value else ''}:{dig(taint, 'effect', default='')}"


# ---- node selector terms, one expression at a time ------------------------------------------

def _term_failure(node: KubeObject, term: KubeObject, match_fields: bool) -> tuple[str, str | None] | None:
    """Why one term does not match ``node`` (text, label key), or None when it matches.

    Each expression is judged alone through the oracle, so validity and operator
    semantics are the oracle's; only the wording is added here.
    """
    if node_matches_selector(node, {"nodeSelectorTerms": [term]}, match_fields=match_fields):
        return None
    exprs = dig(term, "matchExpressions", default=[])
    fields = dig(term, "matchFields", default=[])
    if not exprs and not fields:
        return "the term is empty and matches nothing", None
    for expr in exprs:
        if not node_matches_selector(node, {"nodeSelectorTerms": [{"matchExpressions": [expr]}]},
                                     match_fields=match_fields):
            key = str(dig(expr, "key", default=""))
            return f"needs {_expr_text(expr)}; {_has_text(node, key)}", key
    for expr in fields:
        if not node_matches_selector(node, {"nodeSelectorTerms": [{"matchFields": [expr]}]},
                                     match_fields=match_fields):
            return f"needs field {_expr_text(expr)}; node name is {_name(node)}", None
    return "the term is invalid and matches nothing", None


def _selector_failure(node: KubeObject, selector: KubeObject, match_fields: bool) -> tuple[str, int | None, str | None]:
    """Why a NodeSelector excludes ``node``: each term's failure; term and label when only one."""
    terms = dig(selector, "nodeSelectorTerms", default=[])
    failures = [(i + 1, _term_failure(node, term, match_fields)) for i, term in enumerate(terms)]
    failed = [(i, f) for i, f in failures if f is not None]
    if not terms:
        return "no nodeSelectorTerms: matches nothing", None, None
    ignored = "" if match_fields or not any(dig(t, "matchFields") for t in terms) else \
        " (matchFields are ignored for PV affinity)"
    if len(failed) == 1:
        index, (text, key) = failed[0]
        return f"term {index}: {text}{ignored}", index, key
    parts = "; ".join(f"term {i}: {text}" for i, (text, _) in failed)
    keys = {key for _, (_, key) in failed}
    return f"none of {len(terms)} terms match: {parts}{ignored}", None, keys.pop() if len(keys) == 1 else None


# ---- the claims ------------------------------------------------------------------------------

def _is_bound(pvc: KubeObject) -> bool:
    """Upstream ``isPVCFullyBound``: volumeName set and the bind-completed annotation."""
    annotations = dig(pvc, "metadata", "annotations", default={})
    return bool(dig(pvc, "spec", "volumeName")) and (BIND_COMPLETED in annotations
                                                     or dig(pvc, "status", "phase") in ("Bound", "Lost"))


def pv_misfits(pvc: KubeObject, pvs: Sequence[KubeObject], node: KubeObject | None = None,
               limit: int = 8) -> list[str]:
    """Why each PV does not fit ``pvc`` (first reason each), for the report."""
    out = []
    for pv in pvs:
        reasons = explain_mismatch(pvc, pv)
        phase = dig(pv, "status", "phase", default="Available")
        if not reasons and phase != "Available" and dig(pv, "spec", "claimRef") is None:
            reasons.append(f"phase is {phase}")
        selector = dig(pvc, "spec", "selector")
        if not reasons and selector is not None and not label_selector_matches(_labels(pv), selector):
            reasons.append("its labels do not match the claim's selector")
        if not reasons and node is not None and not node_matches_pv_affinity(node, pv):
            reasons.append(f"its node affinity excludes {_name(node)}")
        if reasons:
            size = dig(pv, "spec", "capacity", "storage", default="?")
            pv_class = dig(pv, "spec", "storageClassName", default="") or '""'
            out.append(f"PV {_name(pv)} ({size}, class {pv_class}): {reasons[0]}")
    if not pvs:
        out.append("there are no PersistentVolumes at all")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def _claim_events(scene: Scene, claim_name: str) -> list[KubeObject]:
    return [e for e in scene.events if dig(e, "involvedObject", "kind") == "PersistentVolumeClaim"
            and dig(e, "involvedObject", "name") == claim_name]


def _unbound_detail(scene: Scene, pvc: KubeObject, storage_class: KubeObject | None) -> str:
    """Why an unbound Immediate claim stays unbound."""
    volume_name = dig(pvc, "spec", "volumeName")
    if volume_name:
        pv = next((p for p in scene.pvs if _name(p) == volume_name), None)
        if pv is None:
            return f"it names PV {volume_name} (spec.volumeName), which does not exist"
        reasons = explain_mismatch(pvc, pv)
        return f"it names PV {volume_name}, which does not fit: {reasons[0] if reasons else 'binding pending'}"
    provisioner = dig(storage_class, "provisioner", default="")
    if storage_class is not None and provisioner and provisioner != NO_PROVISIONER:
        failed = [e for e in _claim_events(scene, _name(pvc)) if dig(e, "reason") == "ProvisioningFailed"]
        if failed:
            return f"provisioner {provisioner} failed: {str(dig(failed[-1], 'message', default='')).strip()}"
        return f"provisioner {provisioner} has not created a volume for it"
    same_class = [p for p in scene.pvs if dig(p, "spec", "storageClassName", default="") == claim_class(pvc)]
    misfits = pv_misfits(pvc, same_class or list(scene.pvs))
    return "no PersistentVolume fits it: " + "; ".join(misfits)


def claim_states(scene: Scene) -> list[ClaimState]:
    """The state of every claim the pod uses, in the pod's volume order."""
    pvs = pvs_by_name(scene)
    out = []
    for key in pod_claim_keys(scene.pod):
        pvc = scene.claims.get(key)
        if pvc is None:
            out.append(ClaimState(key, "missing", detail=f"claim {key} does not exist"))
            continue
        class_name = claim_class(pvc)
        storage_class = scene.classes.get(class_name)
        mode = dig(storage_class, "volumeBindingMode", default="Immediate") if storage_class else None
        common: dict[str, Any] = {"storage_class": class_name, "binding_mode": mode}
        if dig(pvc, "metadata", "deletionTimestamp") is not None:
            out.append(ClaimState(key, "terminating", **common, detail=f"claim {key} is being deleted"))
        elif _is_bound(pvc):
            volume = str(dig(pvc, "spec", "volumeName"))
            if volume in pvs:
                out.append(ClaimState(key, "bound", **common, pv=volume))
            else:
                out.append(ClaimState(key, "pv-gone", **common, pv=volume,
                                      detail=f"claim {key} (phase {dig(pvc, 'status', 'phase', default='?')}) "
                                             f"is bound to PV {volume}, which no longer exists"))
        elif class_name and storage_class is None:
            out.append(ClaimState(key, "class-missing", **common,
                                  detail=f"claim {key} asks for StorageClass {class_name!r}, which does not exist"))
        elif mode != WFFC:
            out.append(ClaimState(key, "unbound-immediate", **common,
                                  detail=f"claim {key} is unbound: {_unbound_detail(scene, pvc, storage_class)}"))
        else:
            selected = dig(pvc, "metadata", "annotations", SELECTED_NODE_ANNOTATION)
            note = f"; the scheduler selected node {selected} for provisioning" if selected else ""
            out.append(ClaimState(key, "unbound-delayed", **common, detail=f"claim {key} waits for its first consumer{note}"))
    return out


def _claim_exclusion(c: ClaimState) -> Exclusion | None:
    """The PreFilter rejection one claim causes, or None when it leaves the nodes to the filters."""
    if c.status == "missing":
        return Exclusion("VolumeBinding", ("PVC_NOT_FOUND",), c.detail, claim=c.key)
    if c.status == "terminating":
        return Exclusion("VolumeBinding", ("PVC_BEING_DELETED",), c.detail, claim=c.key)
    if c.status == "pv-gone":  # PreFilter since GetPodVolumeClaims looks the PV up (seen on 1.35)
        return Exclusion("VolumeBinding", ("PVC_BOUND_TO_MISSING_PV",), c.detail, claim=c.key, pv=c.pv)
    if c.status in ("class-missing", "unbound-immediate"):
        return Exclusion("VolumeBinding", ("UNBOUND_IMMEDIATE",), c.detail, claim=c.key)
    return None


def pod_wide_exclusions(claims: Sequence[ClaimState]) -> list[Exclusion]:
    """Every claim's PreFilter rejection, in the pod's volume order: each is a cause of its
    own, though the scheduler reports only the first."""
    return [e for c in claims if (e := _claim_exclusion(c)) is not None]


def pod_wide_exclusion(claims: Sequence[ClaimState]) -> Exclusion | None:
    """The PreFilter rejection the scheduler reports: that of the first claim with one
    (missing, being deleted, bound to a PV that is gone, or unbound Immediate)."""
    found = pod_wide_exclusions(claims)
    return found[0] if found else None


# ---- one node --------------------------------------------------------------------------------

def _node_state(pod: KubeObject, node: KubeObject) -> list[Exclusion]:
    tolerations = dig(pod, "spec", "tolerations", default=[])
    out = []
    if dig(node, "spec", "unschedulable", default=False) and not any(
            toleration_tolerates_taint(t, UNSCHEDULABLE_TAINT) for t in tolerations):
        out.append(Exclusion("NodeUnschedulable", ("NODE_UNSCHEDULABLE",), "cordoned (spec.unschedulable)"))
    wanted = dig(pod, "spec", "nodeName", default="")
    if wanted and wanted != _name(node):
        out.append(Exclusion("NodeName", ("NODE_NAME_MISMATCH",), f"the pod names node {wanted}"))
    taints = untolerated_taints(dig(node, "spec", "taints", default=[]), tolerations)
    if taints:
        out.append(Exclusion("TaintToleration", ("UNTOLERATED_TAINT",),
                             "untolerated taint " + ", ".join(_taint_text(t) for t in taints),
                             label=str(dig(taints[0], "key", default=""))))
    return out


def _pod_affinity(pod: KubeObject, node: KubeObject) -> list[Exclusion]:
    labels = _labels(node)
    for key, value in dig(pod, "spec", "nodeSelector", default={}).items():
        if labels.get(key) != value:
            return [Exclusion("NodeAffinity", ("POD_AFFINITY_MISMATCH",),
                              f"pod nodeSelector needs {key}={value}; {_has_text(node, key)}", label=key)]
    required = dig(pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not node_matches_selector(node, required):
        text, term, key = _selector_failure(node, required, match_fields=True)
        return [Exclusion("NodeAffinity", ("POD_AFFINITY_MISMATCH",), f"pod node affinity {text}", term=term, label=key)]
    return []


RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _container_requests(container: KubeObject) -> dict[str, Any]:
    """A container's requests; limits stand in for missing requests, as the API server defaults them."""
    limits = dig(container, "resources", "limits", default={}) or {}
    requests = dig(container, "resources", "requests", default={}) or {}
    return {**{k: v for k, v in limits.items() if k in RESOURCES}, **requests}


def pod_requests(pod: KubeObject) -> dict[str, Any]:
    """What NodeResourcesFit charges a pod: the sum over containers, at least the largest
    init container, plus the pod's overhead (``resource.PodRequests``)."""
    total: dict[str, Any] = {}
    for container in dig(pod, "spec", "containers", default=[]) or []:
        for k, v in _container_requests(container).items():
            total[k] = total.get(k, 0) + parse_quantity(v)
    for container in dig(pod, "spec", "initContainers", default=[]) or []:
        for k, v in _container_requests(container).items():
            total[k] = max(total.get(k, 0), parse_quantity(v))
    for k, v in (dig(pod, "spec", "overhead", default={}) or {}).items():
        total[k] = total.get(k, 0) + parse_quantity(v)
    return {k: v for k, v in total.items() if k in RESOURCES and v > 0}


def _resources(pod: KubeObject, node: KubeObject) -> list[Exclusion]:
    """NodeResourcesFit, as far as it can be judged without the other pods: a request
    larger than the node's whole allocatable (absent allocatable counts as 0, as in the
    scheduler) can never fit, whatever else runs there."""
    allocatable = dig(node, "status", "allocatable", default={}) or {}
    short = [(k, v) for k, v in pod_requests(pod).items() if v > parse_quantity(allocatable.get(k, 0))]
    if not short:
        return []
    keys = {"cpu": "INSUFFICIENT_CPU", "memory": "INSUFFICIENT_MEMORY", "ephemeral-storage": "INSUFFICIENT_EPHEMERAL"}
    text = "; ".join(f"requests {_quantity_text(v)} {k}, the node's allocatable is {allocatable.get(k, 0)}"
                     for k, v in short)
    return [Exclusion("NodeResourcesFit", tuple(keys[k] for k, _ in short), text, label=short[0][0])]


def _quantity_text(value: Any) -> str:
    return str(int(value)) if value == int(value) else f"{float(value):g}"


def pvs_by_name(scene: Scene) -> dict[str, KubeObject]:
    return {_name(pv): pv for pv in scene.pvs}


def _volumes(scene: Scene, node: KubeObject, claims: Sequence[ClaimState],
             pvs: Mapping[str, KubeObject]) -> list[Exclusion]:
    """VolumeBinding (bound PVs, WaitForFirstConsumer claims), then VolumeZone."""
    out: list[Exclusion] = []
    bound = [(c, pvs[c.pv]) for c in claims if c.status == "bound" and c.pv]
    for c, pv in bound:
        if not node_matches_pv_affinity(node, pv):
            text, term, key = _selector_failure(node, dig(pv, "spec", "nodeAffinity", "required"), match_fields=False)
            out.append(Exclusion("VolumeBinding", ("NODE_AFFINITY_CONFLICT",),
                                 f"claim {c.key} -> PV {c.pv}: node affinity {text}",
                                 claim=c.key, pv=c.pv, term=term, label=key))
    out += _delayed(scene, node, [c for c in claims if c.status == "unbound-delayed"])
    for c, pv in bound:
        if not volume_zone_ok(node, [pv]):
            out.append(Exclusion("VolumeZone", ("VOLUME_ZONE_CONFLICT",),
                                 f"PV {c.pv}'s zone labels exclude this node's zone {_zone(node)}", claim=c.key, pv=c.pv))
    return out


def _delayed(scene: Scene, node: KubeObject, claims: Sequence[ClaimState]) -> list[Exclusion]:
    """``FindPodVolumes`` for WaitForFirstConsumer claims, one exclusion per claim that fails."""
    out, chosen, to_match = [], set[str](), []
    for c in claims:
        pvc = scene.claims[c.key]
        selected = dig(pvc, "metadata", "annotations", SELECTED_NODE_ANNOTATION)
        if selected is not None and selected != _name(node):
            out.append(Exclusion("VolumeBinding", ("NO_PV_TO_BIND",),
                                 f"claim {c.key} is being provisioned for node {selected} (selected-node)", claim=c.key))
        elif selected is None:
            to_match.append(c)
        else:
            out += _provision_check(scene, node, c)
    for c in sorted(to_match, key=lambda c: requested_storage(scene.claims[c.key])):
        pv = find_matching_volume(scene.claims[c.key], scene.pvs, node, delay_binding=True, excluded=chosen)
        if pv is not None:
            chosen.add(_name(pv))
        else:
            out += _provision_check(scene, node, c)
    return out


def _provision_check(scene: Scene, node: KubeObject, c: ClaimState) -> list[Exclusion]:
    storage_class = scene.classes[c.storage_class or ""]
    if can_provision(node, storage_class):
        return []
    provisioner = dig(storage_class, "provisioner", default="")
    if not provisioner or provisioner == NO_PROVISIONER:
        return [Exclusion("VolumeBinding", ("NO_PV_TO_BIND",),
                          f"claim {c.key}: no Available PV of class {c.storage_class} fits on this node, and the "
                          f"class cannot provision ({provisioner or 'no provisioner'})", claim=c.key)]
    terms = dig(storage_class, "allowedTopologies", default=[])
    wanted = "; ".join(" and ".join(_expr_text({**e, "operator": "In"}) for e in dig(t, "matchLabelExpressions",
                                                                                      default=[])) for t in terms)
    keys = [str(dig(e, "key")) for t in terms for e in dig(t, "matchLabelExpressions", default=[])]
    have = _has_text(node, keys[0]) if keys else ""
    return [Exclusion("VolumeBinding", ("NO_PV_TO_BIND",),
                      f"claim {c.key}: class {c.storage_class} allowedTopologies allow only {wanted}; {have}",
                      claim=c.key, label=keys[0] if keys else None)]


def node_verdict(scene: Scene, node: KubeObject, claims: Sequence[ClaimState],
                 pvs: Mapping[str, KubeObject] | None = None) -> NodeVerdict:
    """Every constraint excluding the pod from ``node``, in the scheduler's filter order.
    ``pvs`` is ``pvs_by_name(scene)``, passed in when judging many nodes."""
    pvs = pvs_by_name(scene) if pvs is None else pvs
    exclusions = (_node_state(scene.pod, node) + _pod_affinity(scene.pod, node) + _resources(scene.pod, node)
                  + _volumes(scene, node, claims, pvs))
    order = {"NodeUnschedulable": 0, "NodeName": 1, "TaintToleration": 2, "NodeAffinity": 3, "NodeResourcesFit": 4,
             "VolumeBinding": 5, "VolumeZone": 6}
    return NodeVerdict(_name(node), _zone(node), tuple(sorted(exclusions, key=lambda e: order[e.filter])))


def nodes_passing(verdicts: Sequence[NodeVerdict], filters: Sequence[str], claim: str | None = None) -> set[str]:
    """Nodes with no exclusion from ``filters`` (about ``claim`` only, when given)."""
    return {v.node for v in verdicts
            if not any(e.filter in filters and (claim is None or e.claim == claim) for e in v.exclusions)}

"""Observations the suites make again and again, each an Allure step that shows its
arguments and returns what it saw. All waiting goes through `kube.wait`; a wait returns
the object it awaited, so no suite writes `assert x is not None` after one.

Two kinds of check: `claim_bound`, `pod_runs`... wait (bounded) for a state; `phase_now`
and `expect` judge the state as it is now, with the objects as evidence when it is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import allure
import pytest

from pvchaos.clusters import running
from pvchaos.clusters.csi import PROVISIONER as _PROVISIONER
from pvchaos.conformance import component_words, invariants, messages, placement, timings
from pvchaos.conformance import topology_class as tc
from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube import snapshot
from pvchaos.kube.errors import ConditionNotReached, ExpectationFailed, WaitTimeout
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import State, describe, pod_cannot_run, pod_running, wait_for, wait_for_event, wait_for_state, wait_gone

label = o.label  # suites wrote x.label(node, key) before kube.objects existed


def expect(condition: bool, message: str, *objects: Obj | None, ws: Workspace | None = None) -> None:
    """Assert with evidence: the objects involved are shown when the condition fails."""
    if not condition:
        shown = "\n---\n".join(describe(obj, ws.kube if ws else None) for obj in objects)
        raise ExpectationFailed(f"{message}\n{shown}" if objects else message)


# ---- claims and volumes ----------------------------------------------------------------

@allure.step("PVC {name} becomes Bound")
def claim_bound(ws: Workspace, name: str, timeout: float = 60) -> Obj:
    """Bound; and, if provisioned for a selected node, in a place that node can reach."""
    claim = wait_for(ws.kube, "PersistentVolumeClaim", name, lambda c: o.phase(c) == "Bound", "phase Bound",
                     ws.namespace, timeout)
    provisioned_where_selected(ws, claim)
    return claim


@allure.step("VolumeSnapshot {name} of {claim} is ready to use")
def snapshot_ready(ws: Workspace, name: str, claim: str, snapshot_class: str, timeout: float = 90) -> Obj:
    """A VolumeSnapshot of the claim, created and waited for until readyToUse, with its
    VolumeSnapshotContent bound (the snapshot-controller and the driver's csi-snapshotter)."""
    ws.create(b.volume_snapshot(name, claim, snapshot_class))
    try:
        snap = wait_for(ws.kube, "VolumeSnapshot", name, lambda s: (s.get("status") or {}).get("readyToUse") is True,
                        f"VolumeSnapshot {name} of {claim}: status.readyToUse true (snapshot-controller and the "
                        f"driver's csi-snapshotter)", ws.namespace, timeout)
    except ConditionNotReached as exc:
        raise ConditionNotReached(f"{_unready_snapshot(ws, name)}\n{exc}") from None
    content = (snap.get("status") or {}).get("boundVolumeSnapshotContentName")
    expect(bool(content) and ws.get("VolumeSnapshotContent", str(content)) is not None,
           f"VolumeSnapshot {name} names its VolumeSnapshotContent", snap, ws=ws)
    return snap


def provisioned_where_selected(ws: Workspace, claim: Obj) -> None:
    """Placement is checked wherever it is determined (issue 26): a WaitForFirstConsumer
    volume must admit the node the scheduler selected for it. Without this, a provisioner
    that misplaces volumes passes most suites, since pods then follow the volume."""
    selected = o.annotation(claim, o.SELECTED_NODE)
    volume = str((claim.get("spec") or {}).get("volumeName") or "")
    if not selected or not volume:
        return
    pv = ws.get("PersistentVolume", volume)
    problem = placement.provisioned_away_from_selected(claim, pv, ws.get("Node", selected)) if pv else None
    expect(problem is None, f"claim {o.name(claim)}: {problem}", claim, pv, ws=ws)


def bound_volume(ws: Workspace, claim: str, timeout: float = 60) -> Obj:
    """The PV a claim is Bound to (waits for the binding)."""
    pvc = claim_bound(ws, claim, timeout)
    pv = ws.get("PersistentVolume", pvc["spec"]["volumeName"])
    expect(pv is not None, f"PVC {claim} names PV {pvc['spec']['volumeName']}, which does not exist", pvc, ws=ws)
    return pv or {}


@allure.step("PV {name} reaches phase {phase}")
def volume_phase(ws: Workspace, name: str, phase: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "PersistentVolume", name, lambda v: o.phase(v) == phase, f"phase {phase}", None, timeout)


@allure.step("{kind} {name} is in phase {phase} now")
def phase_now(ws: Workspace, kind: str, name: str, phase: str) -> Obj:
    """A one-shot check (no waiting): the object exists and is in `phase` at this moment."""
    obj = ws.get(kind, name)
    expect(obj is not None and o.phase(obj) == phase,
           f"{kind} {name} should be {phase} now, is {o.phase(obj) if obj else 'missing'}", obj, ws=ws)
    return obj or {}


@allure.step("PVC {claim} stays Pending: the controller reports {key}")
def claim_stays_pending(ws: Workspace, claim: str, key: str, timeout: float = 60, **fmt: object) -> Obj:
    """A negative made observable: the controller's event proves it evaluated the claim
    and found nothing, then the claim must still be Pending. The controller only judges
    the PVs it has seen: callers wait for their PVs to be Available (set by the same
    controller) before creating the claim, else a later binding goes unseen."""
    event(ws, "PersistentVolumeClaim", claim, key, timeout, **fmt)
    return phase_now(ws, "PersistentVolumeClaim", claim, "Pending")


@allure.step("PVC {claim} carries annotation {key}")
def claim_annotation(ws: Workspace, claim: str, key: str, timeout: float = 60) -> str:
    """Wait for an annotation on a claim (e.g. volume.kubernetes.io/selected-node); returns its value."""
    pvc = wait_for(ws.kube, "PersistentVolumeClaim", claim, lambda c: o.annotation(c, key) is not None,
                   f"annotation {key}", ws.namespace, timeout)
    return o.annotation(pvc, key) or ""


@allure.step("PVC {claim}: the provisioner reports ProvisioningFailed containing {text!r}")
def provisioning_failed(ws: Workspace, claim: str, text: str, timeout: float = 60) -> Obj:
    """A ProvisioningFailed event about the claim whose message contains `text` (with the
    harness's provisioners: the class's `pvchaos.dev/fail-reason`); returns the event."""
    obj = ws.get("PersistentVolumeClaim", claim) or {"metadata": {"name": claim, "namespace": ws.namespace}}
    obj.setdefault("kind", "PersistentVolumeClaim")
    return wait_for_event(ws.kube, obj, text, reason="ProvisioningFailed", timeout=timeout)


_FAILED_ON = re.compile(r'selected node "([^"]+)"')


def failed_on_node(event: Obj) -> str | None:
    """The node a harness provisioner's ProvisioningFailed event names (`selected node "X"`,
    tools/provisioner/knob.go), or None (Immediate: no node)."""
    found = _FAILED_ON.search(event.get("message") or "")
    return found.group(1) if found else None


@allure.step("PVC {claim}: selected-node no longer names {node}")
def selected_node_released(ws: Workspace, claim: str, node: str, timeout: float = 30) -> Obj:
    """The claim was given back to the scheduler: its selected-node annotation is gone or
    names another node (the scheduler may already have picked again). Returns the claim."""
    return wait_for(ws.kube, "PersistentVolumeClaim", claim, lambda c: o.annotation(c, o.SELECTED_NODE) != node,
                    f"{o.SELECTED_NODE} removed or changed from {node}", ws.namespace, timeout)


# ---- events ------------------------------------------------------------------------------

@allure.step("{kind} {obj_name} carries an event containing {key}")
def event(ws: Workspace, kind: str, obj_name: str, key: str, timeout: float = 60, **fmt: object) -> Obj:
    """Wait for the version's wording of message `key` in an event about the object."""
    obj = ws.get(kind, obj_name) or {"kind": kind, "metadata": {"name": obj_name, "namespace": ws.namespace}}
    obj.setdefault("kind", kind)
    wanted = messages.expected(key, ws.cluster.minor, **fmt) if ws.cluster.minor else messages.any_of(key, **fmt)
    ev = wait_for_event(ws.kube, obj, wanted, reason=messages.REASONS.get(key), timeout=timeout)
    seen = ev.get("message") or ""
    # the wording that matched, so `pvchaos compare` can tell when a version changes it
    measure.note(f"{measure.ASSERTED_MESSAGE}{key}",
                 wanted if isinstance(wanted, str) else next((w for w in wanted if w in seen), seen))
    return ev


# ---- pods --------------------------------------------------------------------------------

def _unready_snapshot(ws: Workspace, name: str) -> str:
    """The snapshot and its content as they stood when the wait ran out, in their words."""
    snap = ws.get("VolumeSnapshot", name)
    bound = ((snap or {}).get("status") or {}).get("boundVolumeSnapshotContentName")
    if not bound:  # the content is named after the snapshot's uid before the status says so
        uid = ((snap or {}).get("metadata") or {}).get("uid")
        bound = f"snapcontent-{uid}" if uid else None
    return component_words.unready_snapshot(snap, ws.get("VolumeSnapshotContent", str(bound)) if bound else None)


@allure.step("pod {name} runs")
def pod_runs(ws: Workspace, name: str, timeout: float = 60) -> Obj:
    """Running; and each of its dynamically provisioned volumes where its node was selected.
    A pod that never runs because a volume was never attached says which VolumeAttachment
    and who did not answer it, not only the kubelet's "unattached volumes" event."""
    try:
        pod = wait_for(ws.kube, "Pod", name, pod_running, "phase Running", ws.namespace, timeout,
                       fail_if=pod_cannot_run)
    except ConditionNotReached as exc:
        why = _unattached(ws, name)
        if not why:
            raise
        raise ConditionNotReached("; ".join(why) + f"\n{exc}") from None
    _volumes_where_selected(ws, pod)
    return pod


def _unattached(ws: Workspace, name: str) -> list[str]:
    """The attachments a scheduled pod waits on, read once the wait ran out."""
    pod = ws.get("Pod", name)
    node = o.node_name(pod) if pod is not None else None
    if pod is None or not node:
        return []
    volumes = [o.spec(claim).get("volumeName") for claim in _pod_claims(ws, pod)]
    pvs = [pv for pv in (ws.get("PersistentVolume", str(v)) for v in volumes if v) if pv is not None]
    if not pvs:
        return []
    drivers = {str(o.name(d)): d for d in ws.list("CSIDriver")}
    return component_words.unattached_volumes(str(node), pvs, ws.list("VolumeAttachment"), drivers)


def _pod_claims(ws: Workspace, pod: Obj) -> list[Obj]:
    """The claims of a pod's volumes that exist now."""
    claims = (ws.get("PersistentVolumeClaim", key.split("/", 1)[1]) for key in placement.pod_claim_keys(pod))
    return [claim for claim in claims if claim is not None]


def _volumes_where_selected(ws: Workspace, pod: Obj) -> None:
    for claim in _pod_claims(ws, pod):
        if o.phase(claim) == "Bound":
            provisioned_where_selected(ws, claim)


@allure.step("pod {name} is scheduled")
def pod_scheduled(ws: Workspace, name: str, timeout: float = 60) -> Obj:
    """The scheduler placed the pod (spec.nodeName set), whether or not it runs yet."""
    return wait_for(ws.kube, "Pod", name, o.scheduled, "scheduled (spec.nodeName set)", ws.namespace, timeout,
                    fail_if=pod_cannot_run)


@allure.step("pod {name} cannot be scheduled: {key}")
def pod_unschedulable(ws: Workspace, name: str, key: str | None = None, timeout: float = 60) -> Obj:
    """Wait until the scheduler sets PodScheduled=False with reason Unschedulable (as
    upstream asserts), failing at once if it places the pod instead. With a message
    `key`, the FailedScheduling event must carry it too. Returns the pod, always (the
    event: `failed_scheduling`)."""
    pod = _unschedulable(ws, name, key, timeout)
    if key:
        event(ws, "Pod", name, key, timeout=timeout)
    return pod


def failed_scheduling(ws: Workspace, name: str, key: str, timeout: float = 60) -> Obj:
    """As `pod_unschedulable` with a message `key`, and returns the FailedScheduling event
    that carries it (to read the rest of the scheduler's message)."""
    _unschedulable(ws, name, key, timeout)
    return event(ws, "Pod", name, key, timeout=timeout)


def _unschedulable(ws: Workspace, name: str, key: str | None, timeout: float) -> Obj:
    def placed(pod: Obj | None) -> str | None:
        node = o.node_name(pod)
        return f"the scheduler placed it on {node}" if node else None

    return wait_for(ws.kube, "Pod", name, o.unschedulable, f"Unschedulable ({key or 'PodScheduled=False'})",
                    ws.namespace, timeout, fail_if=placed)


def lifecycle(ws: Workspace) -> timings.LifecycleSettings:
    """The node-lifecycle settings this cluster was configured with (or upstream's
    defaults, said so), recorded on the report so the bounds below can be read."""
    settings = timings.lifecycle_settings(ws.cluster.description)
    measure.note("node-lifecycle settings", f"grace {settings.grace_seconds:g}s, monitor period "
                 f"{settings.monitor_period_seconds:g}s ({settings.source})")
    return settings


def within(bound: timings.Bound, measured: float) -> float:
    """Fail when a lifecycle step took longer than the configuration allows (the message
    names both figures and where the bound came from); returns the measured seconds."""
    problem = bound.verdict(measured)
    expect(problem is None, problem or "")
    return measured


BINDING_RULES = ("bound-pair", "claimed-twice")  # conformance.invariants' rules about claims and PVs


@allure.step("no PV is claimed twice, and every Bound claim and its PV point at each other")
def bindings_consistent(ws: Workspace) -> None:
    """The binding invariants the plugin checks after every test, as an expectation a suite
    can state at any moment (mid-storm, after a restart): fails with each violation."""
    problems = [str(v) for v in invariants.check(snapshot.take(ws.kube)) if v.rule in BINDING_RULES]
    expect(not problems, "binding invariants broken:\n" + "\n".join(problems))


@allure.step("pod {name} is replaced and Running")
def pod_replaced(ws: Workspace, name: str, old_uid: str, timeout: float = 60) -> Obj:
    """A new pod object of the same name (a controller's replacement) reaches Running."""
    pod = wait_for(ws.kube, "Pod", name, lambda p: o.uid(p) != old_uid and pod_running(p),
                   f"a replacement (uid other than {old_uid}) Running", ws.namespace, timeout)
    _volumes_where_selected(ws, pod)
    return pod


@allure.step("pod {name} is evicted")
def pod_evicted(ws: Workspace, name: str, timeout: float = 60, why: str = "evicted", timer: str | None = None) -> None:
    """Deleted by the taint-eviction controller (Terminating with no kubelet, or gone);
    `timer`: the upstream timer the wait sits out (a tolerationSeconds), for kube.spent."""
    wait_gone(ws.kube, "Pod", name, ws.namespace, timeout, why, terminating=True, timer=timer)


def node_of(ws: Workspace, pod_name: str) -> Obj:
    pod = ws.get("Pod", pod_name)
    node = ws.get("Node", o.node_name(pod) or "") if o.node_name(pod) else None
    expect(node is not None, f"pod {pod_name} has no node", pod, ws=ws)
    return node or {}


@allure.step("{pod} runs where its volume {claim} is")
def runs_where_its_volume_is(ws: Workspace, pod: str, claim: str) -> Obj:
    """The pod's node satisfies the nodeAffinity of the PV its claim is bound to; returns the node."""
    node = node_of(ws, pod)
    pv = bound_volume(ws, claim)
    expect(node_matches_pv_affinity(node, pv), f"{pod} must run where its volume is", node, pv, ws=ws)
    return node


def zones_text(pv: Obj | None) -> str:
    """How a PV's zone affinity reads in a failure message; none at all is said outright."""
    zones = o.pv_zones(pv)
    if zones:
        return f"PV {o.name(pv)} allows zones {sorted(zones)}"
    if not o.spec(pv).get("nodeAffinity"):
        return f"PV {o.name(pv)} has no nodeAffinity: it was provisioned without topology"
    return f"PV {o.name(pv)} has a nodeAffinity that names no zone with `In` on {o.ZONE_KEY}"


NOT_APPLICABLE_LABEL = "pvchaos.not_applicable"  # the Allure label of a test that does not apply to the driver


def applies_to(ws: Workspace, *classes: tc.TopologyClass) -> None:
    """Skip, as not applicable, a test about drivers of other topology classes (a per-node
    driver is not a zonal one that failed: issue 35)."""
    topo = ws.topology()
    reason = tc.not_applicable(topo.cls, classes, topo.keys)
    if reason is not None:
        allure.dynamic.label(NOT_APPLICABLE_LABEL, topo.cls.value)
        pytest.skip(f"driver {ws.driver.name}: {reason}")


def allowed_text(pv: Obj, allowed: frozenset[str]) -> str:
    """How a PV's reach reads in a failure message: its zones and the nodes it allows."""
    return f"{zones_text(pv)}; its nodeAffinity allows nodes {sorted(allowed) or 'none'}"


@allure.step("the volume of {claim} is in zone {zone}")
def volume_in_zone(ws: Workspace, claim: str, zone: str) -> Obj:
    """Every node the PV bound to `claim` allows is in `zone`, and it allows one at least
    (a zonal volume pinned to the zone, or a node-local one on a node of it); returns the PV."""
    pv = bound_volume(ws, claim)
    allowed = tc.allowed_nodes(pv, ws.nodes())
    in_zone = {o.name(n) for n in ws.nodes(zone)}
    expect(bool(allowed) and allowed <= in_zone, f"the volume of {claim} must be in zone {zone}: "
           f"{allowed_text(pv, allowed)}", pv, ws=ws)
    return pv


@allure.step("the volume of {claim} is pinned to one of the driver's domains")
def volume_pinned(ws: Workspace, claim: str) -> tuple[Obj, str]:
    """The PV bound to `claim` allows the nodes of exactly one of the driver's domains
    (a zone, a node, ...: its topology class); returns the PV and that domain's value."""
    pv = bound_volume(ws, claim)
    topo = ws.topology()
    allowed = tc.allowed_nodes(pv, ws.nodes())
    hit = [v for v, names in topo.domains.items() if allowed and allowed <= names]
    expect(len(hit) == 1, f"a {topo.cls.value}-class volume is pinned to one domain of {topo.key} before any "
           f"pod exists: {allowed_text(pv, allowed)}; domains {dict((v, sorted(n)) for v, n in topo.domains.items())}",
           pv, ws=ws)
    return pv, hit[0]


@allure.step("the volume of {claim} is in the domains {values}")
def volume_within(ws: Workspace, claim: str, values: Sequence[str]) -> Obj:
    """Every node the PV bound to `claim` allows is in one of the driver's domains `values`."""
    pv = bound_volume(ws, claim)
    topo = ws.topology()
    inside = frozenset().union(*(topo.domains[v] for v in values))
    allowed = tc.allowed_nodes(pv, ws.nodes())
    expect(bool(allowed) and allowed <= inside, f"the volume of {claim} must be in {topo.key} {list(values)}: "
           f"{allowed_text(pv, allowed)}", pv, ws=ws)
    return pv


# ---- many objects ------------------------------------------------------------------------

@allure.step("all {count} {kind} objects {expect_text}")
def all_reach(ws: Workspace, kind: str, count: int, done: Callable[[Obj], bool], expect_text: str,
              timeout: float = 120, names: Sequence[str] | None = None) -> list[Obj]:
    """Wait until `count` objects of a kind in the namespace (or exactly `names`) satisfy
    `done`: the stress-test form of a wait ("all 50 claims Bound"). Returns them."""
    def reached(state: State) -> list[Obj] | None:
        objs = [obj for obj in state.values() if names is None or o.name(obj) in names]
        good = [obj for obj in objs if done(obj)]
        return good if len(good) >= count else None

    return wait_for_state(ws.kube, kind, reached, f"{count} {kind} objects {expect_text}", ws.namespace, timeout)


@allure.step("StatefulSet {name} has {replicas} ready replicas")
def statefulset_ready(ws: Workspace, name: str, replicas: int, timeout: float = 90) -> Obj:
    """All replicas ready, and each replica's volumes where its node was selected."""
    sts = wait_for(ws.kube, "StatefulSet", name, lambda s: o.ready_replicas(s) == replicas,
                   f"{replicas} ready replicas", ws.namespace, timeout)
    for i in range(replicas):
        pod = ws.get("Pod", f"{name}-{i}")
        if pod is not None:
            _volumes_where_selected(ws, pod)
    return sts


# ---- common set-ups ----------------------------------------------------------------------

@allure.step("a no-provisioner WaitForFirstConsumer class with one local PV per node")
def local_class_with_pv_per_node(ws: Workspace, capacity: str = "10Gi") -> str:
    """The classic local-volume set-up (static `local` PVs pinned by hostname); returns the class."""
    sc = ws.name("local")
    ws.create(b.storage_class(sc, "kubernetes.io/no-provisioner", "WaitForFirstConsumer", reclaim="Retain"))
    for node in ws.nodes():
        ws.create(b.persistent_volume(ws.name(f"local-{o.name(node)}"), capacity, sc,
                                      affinity=b.hostname_affinity(o.hostname(node)), local_path="/mnt/disks/vol1"))
    return sc


@allure.step("a static PV with the given affinity, bound to claim {claim}")
def bound_pair(ws: Workspace, affinity: Obj | None, claim: str = "data", capacity: str = "5Gi") -> Obj:
    """A static Retain PV with `affinity`, bound to `claim` through volumeName; returns the PV."""
    pv = ws.create(b.persistent_volume(ws.name("pv"), capacity, affinity=affinity, labels=ws.case_labels))
    ws.create(b.persistent_volume_claim(claim, capacity, "", volume_name=pv["metadata"]["name"]))
    return bound_volume(ws, claim)


def node_pinned_class(ws: Workspace, hint: str = "node-pinned") -> str:
    """A class of the driver whose volumes are pinned to one node: its own class for a
    node-class driver, else its node-local class; skips naming why a driver has neither."""
    if ws.topology().cls == tc.TopologyClass.NODE:
        return ws.storage_class(hint)
    missing = ws.driver.missing("dynamic-local")
    if missing is not None:
        pytest.skip(f"{missing}; the test needs volumes pinned to one node (the driver's topology class is "
                    f"{ws.topology().cls.value})")
    return ws.local_class(hint)


@allure.step("StatefulSet {name} with {replicas} replica(s) on the driver's class")
def dynamic_statefulset(ws: Workspace, name: str, replicas: int = 1, request: str = "1Gi",
                        pod_spec_extra: Obj | None = None) -> str:
    """A WaitForFirstConsumer class of the driver and a StatefulSet on it, all replicas
    ready; returns the class name."""
    sc = ws.storage_class("zonal", "WaitForFirstConsumer")
    ws.create(b.statefulset(name, replicas, sc, request, pod_spec_extra=pod_spec_extra))
    statefulset_ready(ws, name, replicas)
    return sc


@allure.step("volume {pv} is attached to {node}")
def volume_attached(ws: Workspace, pv: str, node: str, timeout: float = 60) -> Obj:
    """The VolumeAttachment of `pv` to `node` once its attacher says attached. Fails at
    once when the harness's own attacher or driver process is not running, and a
    timeout says why in the attacher's words (attachError), or names the attacher when
    it never answered (no status at all)."""
    def mine(state: dict[str, Obj]) -> Obj | None:
        return next((va for va in state.values() if o.spec(va).get("nodeName") == node
                     and (o.spec(va).get("source") or {}).get("persistentVolumeName") == pv), None)

    def down(state: dict[str, Obj]) -> str | None:
        gone = running.csi_not_running(ws.cluster.directory)
        if not [c for c in gone if c != _PROVISIONER]:  # attaching needs the attacher and the driver
            return None
        return component_words.attachment_problem(mine(state), _csi_driver(ws, mine(state)), pv, node, gone)

    last: dict[str, Obj] = {}

    def done(state: dict[str, Obj]) -> Obj | None:
        last.clear()
        last.update(state)
        va = mine(state)
        return va if va is not None and (va.get("status") or {}).get("attached") is True else None

    try:
        found: Obj = wait_for_state(ws.kube, "VolumeAttachment", done, f"VolumeAttachment of {pv} to {node} attached",
                                    timeout=timeout, fail_if=down, focus=mine)
    except ConditionNotReached as exc:
        va = mine(last)
        why = component_words.attachment_problem(va, _csi_driver(ws, va), pv, node,
                                                 running.csi_not_running(ws.cluster.directory))
        raise ConditionNotReached(f"{why}\n{exc}") from None
    return found


def harness_component_down(ws: Workspace, *components: str) -> Callable[[object], str | None]:
    """A wait's `fail_if`: one line naming whichever of the harness's own CSI components
    (`csi-resizer`, ...) no longer runs, so the wait fails at once, not at its timeout.
    Never fires for a vendor's driver (the harness started none of its processes)."""
    def down(_: object) -> str | None:
        gone = [c for c in running.csi_not_running(ws.cluster.directory) if c in components]
        return component_words.not_running_text(gone) or None
    return down


def _csi_driver(ws: Workspace, attachment: Obj | None) -> Obj | None:
    name = o.spec(attachment).get("attacher") if attachment else None
    return ws.get("CSIDriver", str(name)) if name else None


@allure.step("a pod ran on a node-local volume of claim {claim} and was deleted")
def node_local_volume_released(ws: Workspace, claim: str = "data") -> tuple[str, str, Obj | None]:
    """A claim of the driver's node-local class, used by a pod that ran and was deleted,
    its volume detached again (no VolumeAttachment left): the start of a volume's move.
    Returns (the PV, the node the volume is on, another worker node or None)."""
    ws.create(b.persistent_volume_claim(claim, "1Gi", ws.local_class()))
    ws.create(b.pod("first", (claim,)))
    home = str(o.node_name(pod_runs(ws, "first", timeout=120)))
    pv = str(claim_bound(ws, claim)["spec"]["volumeName"])
    ws.delete("Pod", "first")
    wait_for_state(ws.kube, "VolumeAttachment",
                   lambda st: None if any(va["spec"].get("source", {}).get("persistentVolumeName") == pv
                                          for va in st.values()) else True,
                   f"no VolumeAttachment of {pv} (detached after the pod's deletion)", timeout=120)
    return pv, home, next((n for n in ws.nodes() if o.name(n) != home), None)


__all__ = ["ExpectationFailed", "WaitTimeout", "all_reach", "bound_pair", "bound_volume", "claim_annotation",
           "claim_bound", "claim_stays_pending", "dynamic_statefulset", "event", "expect", "label",
           "local_class_with_pv_per_node", "node_local_volume_released", "node_of", "phase_now", "pod_evicted",
           "pod_replaced", "pod_runs",
           "pod_scheduled", "pod_unschedulable", "runs_where_its_volume_is", "snapshot_ready", "statefulset_ready",
           "volume_phase"]


# ---- pvchaos explain on the live cluster --------------------------------------------------

@allure.step("pvchaos explain names {code} for pod {name}")
def explained_as(ws: Workspace, name: str, code: str) -> None:
    """`pvchaos explain` of the pod, as a user would run it now, lists `code` among its
    causes (the first, or one to fix after it); the whole report is attached."""
    from pvchaos.explain import explain_view, explanations_json, to_text  # the command's own path
    from pvchaos.kube.explain_read import read_view

    found = explain_view(read_view(ws.kube, ws.namespace, name), name, ws.namespace)
    text = "\n\n".join(to_text(e) for e in found)
    allure.attach(text, f"pvchaos explain {name}", allure.attachment_type.TEXT)
    allure.attach(explanations_json(found), f"pvchaos explain {name} (json)", allure.attachment_type.JSON)
    codes = [c.code for e in found for c in e.causes]
    expect(code in codes, f"pvchaos explain of pod {name} names {codes or 'no cause'}, expected {code}:\n{text}",
           ws.get("Pod", name), ws=ws)

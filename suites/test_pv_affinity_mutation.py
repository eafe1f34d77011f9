"""Mutable PV nodeAffinity (KEP-5381, gate MutablePVNodeAffinity) as upstream defines it
(SPEC 1), and not as a widely shared blog post describes it: a mutation changes
neither the PV's phase nor its claimRef, and evicts nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import allure
import pytest

from pvchaos.chaos import pv_affinity as mut
from pvchaos.conformance import expectations, messages
from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.client import connect
from pvchaos.kube.errors import ApiError, ExpectationFailed
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import REGION_KEY, ZONE_KEY, label, pv_zones
from pvchaos.kube.wait import holds_for, wait_for_state

pytestmark = [allure.epic("PV node affinity mutation (KEP-5381)"), pytest.mark.needs("static-pv", "zones")]

MUTABLE_GATE = "MutablePVNodeAffinity"

# The body users copy from the seed article, sent with `kubectl patch pv ... --type merge -p`.
SEED_PATCH = ('{"spec":{"nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchExpressions":'
              '[{"key":"storage","operator":"In","values":["ssd"]}]}]}}}}')


T = TypeVar("T")


def _api_error(call: Callable[[], object], sent_affinity: Obj | None = None) -> ApiError:
    """The API server's refusal of `call`; its acceptance is the test's failure, with what it
    returned, and, where the stored nodeAffinity is not `sent_affinity`, that admission
    changed the request before validation saw it."""
    try:
        accepted = call()
    except ApiError as exc:
        return exc
    stored = (accepted.get("spec") or {}).get("nodeAffinity") if isinstance(accepted, dict) else None
    if sent_affinity is not None and stored != sent_affinity:
        raise ExpectationFailed(f"the API server accepted an update it must reject: it stored nodeAffinity {stored!r}, "
                                f"not the {sent_affinity!r} sent, so a mutating admission webhook or policy changed "
                                f"the PV before validation; it returned: {accepted}")
    raise ExpectationFailed(f"the API server accepted an update it must reject; it returned: {accepted}")


ADMISSION_WORDS = ("ValidatingAdmissionPolicy", "admission webhook")  # how the API server names a refusal by policy


def _accepted(call: Callable[[], T], what: str) -> T:
    """The API server's answer to an update it must accept. A refusal fails the test in
    the API server's words, naming the admission policy or webhook where the answer does,
    else asking about the gate (validation refuses the change with the gate off)."""
    try:
        return call()
    except ApiError as exc:
        body = exc.body or ""
        hint = ("an admission policy or webhook of this cluster refused it, not Kubernetes' validation"
                if any(w in body for w in ADMISSION_WORDS) else f"is {MUTABLE_GATE} on in kube-apiserver?")
        raise ExpectationFailed(f"the API server rejected {what} (HTTP {exc.status}: {body}); {hint}") from None


# ---- gate off: which updates of spec.nodeAffinity the API server accepts ------------------

BETA_ZONE_KEY = "failure-domain.beta.kubernetes.io/zone"
Affinity = Callable[[list[str]], Obj | None]  # from the cluster's zones


@dataclass(frozen=True)
class Update:
    """An update of a PV's affinity with the gate off, and whether SPEC 1 says it passes."""

    story: str
    before: Affinity
    after: Affinity
    accepted: bool


GATE_OFF_UPDATES = {
    "change-existing-rejected": Update("changing an existing nodeAffinity is rejected as immutable",
                                       lambda z: b.zone_affinity(z[0]), lambda z: b.zone_affinity(z[1]), False),
    "set-where-none-accepted": Update("setting affinity on a PV that had none still passes",
                                      lambda z: None, lambda z: b.zone_affinity(z[0]), True),
    "beta-to-ga-key-accepted": Update("renaming a beta topology key to its GA key still passes",
                                      lambda z: b.label_affinity(BETA_ZONE_KEY, z[0]), lambda z: b.zone_affinity(z[0]),
                                      True),
}


@allure.feature("gate off")
@pytest.mark.parametrize("case", GATE_OFF_UPDATES)  # by name: a lambda's repr would change the historyId each run
@pytest.mark.cluster(feature_gates={"MutablePVNodeAffinity": False})
@pytest.mark.xdist_group("gate-off")  # one gate-off cluster for the run, not one per worker
def test_gate_off_update(ws: Workspace, case: str) -> None:
    update = GATE_OFF_UPDATES[case]
    allure.dynamic.story(update.story)
    zones = ws.zones()
    before, after = update.before(zones), update.after(zones)
    pv = ws.create(b.persistent_volume(ws.name("pv"), "1Gi", affinity=before, labels=ws.case_labels))
    name = pv["metadata"]["name"]
    if update.accepted:
        updated = _accepted(lambda: mut.replace_affinity(ws.kube, name, after), f"the update of PV {name}")
        x.expect(pv_zones(updated) == pv_zones({"spec": {"nodeAffinity": after}}), update.story, updated, ws=ws)
        return
    err = _api_error(lambda: mut.replace_affinity(ws.kube, name, after))
    x.expect(err.status == 422, f"expected HTTP 422, got {err.status}: {err.body}")
    x.expect(messages.expected("FIELD_IMMUTABLE", ws.cluster.minor) in (err.body or ""),
             f"expected 'field is immutable' in: {err.body}")
    now = ws.get("PersistentVolume", name)
    x.expect(pv_zones(now) == pv_zones(pv), "the rejected update must leave the affinity as it was", now, ws=ws)


# ---- gate on -----------------------------------------------------------------------------

@allure.feature("gate on")
@allure.story("the seed's kubectl merge patch is accepted on a bound PV")
@pytest.mark.needs("mutable-pv-affinity")
def test_seed_kubectl_merge_patch_is_accepted(ws: Workspace, kubectl: Path) -> None:
    pv = x.bound_pair(ws, b.label_affinity("storage", "standard"))
    done = mut.kubectl_merge_patch(ws.cluster, kubectl, pv["metadata"]["name"], SEED_PATCH)
    x.expect(done.returncode == 0, f"kubectl patch failed ({done.returncode}): {done.stderr.strip()}")
    now = ws.get("PersistentVolume", pv["metadata"]["name"]) or {}
    expr = now["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    x.expect(expr == {"key": "storage", "operator": "In", "values": ["ssd"]}, "the patched affinity", now, ws=ws)


@allure.feature("gate on")
@allure.story("a Bound PV stays Bound to the same claim: the 'turns Available and is rebound' claim is false")
@pytest.mark.needs("mutable-pv-affinity")
@pytest.mark.quick
def test_mutation_keeps_pv_bound_refuting_available_and_rebind_claim(ws: Workspace) -> None:
    zones = ws.zones()
    pv = x.bound_pair(ws, b.zone_affinity(zones[0]))
    name = pv["metadata"]["name"]
    ref_before = pv["spec"]["claimRef"]
    ws.create(b.pod("app", ("data",)))
    running = x.pod_runs(ws, "app")

    _accepted(lambda: mut.allow_zones(ws.kube, name, zones[1]), f"tightening PV {name}")  # exclude the pod's zone
    expected = expectations.after_pv_affinity_mutation(ws.cluster.minor)

    def observed(pv_now: Obj | None) -> dict[str, str]:
        ref = ((pv_now or {}).get("spec") or {}).get("claimRef") or {}
        same = (ref.get("uid"), ref.get("name")) == (ref_before.get("uid"), ref_before.get("name"))
        pvc = ws.get("PersistentVolumeClaim", "data") or {}
        pod = ws.get("Pod", "app") or {}
        kept = (pod.get("metadata", {}).get("uid") == running["metadata"]["uid"]
                and not pod["metadata"].get("deletionTimestamp") and pod.get("status", {}).get("phase") == "Running")
        return {"pv phase": (pv_now or {}).get("status", {}).get("phase", "(deleted)"),
                "claimRef": "unchanged" if same else f"changed to {ref.get('namespace')}/{ref.get('name')}",
                "claim phase": pvc.get("status", {}).get("phase") if pvc.get("spec", {}).get("volumeName") == name
                else f"{pvc.get('status', {}).get('phase')} on {pvc.get('spec', {}).get('volumeName')}",
                "running pod": "kept" if kept else "evicted or replaced"}

    def changed(state: dict[str, Obj]) -> str | None:
        differences = expectations.diff(expected, observed(state.get(name)))
        return "; ".join(differences) if differences else None

    with allure.step(f"for 5 s after the mutation the cluster keeps {expected}"):
        holds_for(ws.kube, "PersistentVolume", changed, 5, f"PV {name} after its nodeAffinity mutation",
                  field_selector=f"metadata.name={name}")
    final = changed({name: ws.get("PersistentVolume", name) or {}})
    x.expect(final is None, f"after the mutation window: {final}")
    ws.exempt("app")  # it knowingly violates the new affinity: IgnoredDuringExecution


@allure.feature("gate on")
@allure.story("relaxing (add a zone) lets a pending pod schedule without being recreated")
@pytest.mark.needs("mutable-pv-affinity")
def test_relax_add_zone_schedules_pending_pod(ws: Workspace) -> None:
    zones = ws.zones()
    pv = x.bound_pair(ws, b.zone_affinity(zones[0]))
    ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: zones[1]}))
    x.pod_unschedulable(ws, "app", "NODE_AFFINITY_CONFLICT")
    uid = (ws.get("Pod", "app") or {})["metadata"]["uid"]
    _accepted(lambda: mut.allow_zones(ws.kube, pv["metadata"]["name"], zones[0], zones[1]), "relaxing to two zones")
    pod = x.pod_runs(ws, "app")
    x.expect(pod["metadata"]["uid"] == uid, "the same pod object is scheduled, not a new one", pod, ws=ws)
    node = x.node_of(ws, "app")
    x.expect(label(node, ZONE_KEY) == zones[1], f"the pod runs in the newly allowed {zones[1]}", node, ws=ws)


@allure.feature("gate on")
@allure.story("relaxing zone to region lets a pending pod schedule")
@pytest.mark.needs("mutable-pv-affinity")
def test_relax_zone_to_region_schedules_pending_pod(ws: Workspace) -> None:
    zones = ws.zones()
    pv = x.bound_pair(ws, b.zone_affinity(zones[0]))
    ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: zones[-1]}))
    x.pod_unschedulable(ws, "app", "NODE_AFFINITY_CONFLICT")
    region = label(ws.node(), REGION_KEY) or ""
    _accepted(lambda: mut.relax_to_region(ws.kube, pv["metadata"]["name"], region), "relaxing to the region")
    x.pod_runs(ws, "app")


@allure.feature("gate on")
@allure.story("tightening: the scheduler-cache race is measured, then new pods follow the new affinity")
@pytest.mark.needs("mutable-pv-affinity")
def test_tightening_race_is_measured(ws: Workspace) -> None:
    """Pods arrive at a steady rate from before the update until well after it; a watch
    records when each is placed. Placements after the update on nodes the new affinity
    excludes are the race; its window is the update-to-last-violation time."""
    zones = ws.zones()
    pv = x.bound_pair(ws, b.zone_affinity(*zones))
    name = pv["metadata"]["name"]
    keep = zones[0]
    before, after, interval = 0.5, 2.5, 0.025
    # On a slow API server (kind on a loaded machine) 2.5 s may hold few creations: go on
    # until 15 pods arrived more than a second after the update, within 30 s at most.
    late_wanted, late_after, cap = 15, 1.0, 30.0
    placed = PlacementRecorder(ws)
    with placed:
        t0 = time.monotonic()
        updated_at: float | None = None
        i = late = 0

        def arriving() -> bool:
            elapsed = time.monotonic() - t0
            return elapsed < cap and (elapsed < before + after or late < late_wanted)

        while arriving():
            if updated_at is None and time.monotonic() - t0 >= before:
                _accepted(lambda: mut.allow_zones(ws.kube, name, keep), f"tightening PV {name}")
                updated_at = time.monotonic()
            ws.create(b.pod(f"p{i:03d}", ("data",)))
            i += 1
            late += updated_at is not None and time.monotonic() - updated_at > late_after
            time.sleep(interval)  # a steady arrival rate is the point of the measurement
        total = i
        wait_for_state(ws.kube, "Pod", lambda st: True if placed.count() >= total or _all_decided(st, total) else None,
                       f"all {total} pods scheduled or unschedulable", ws.namespace, 90)
    assert updated_at is not None
    new_pv = ws.get("PersistentVolume", name) or {}
    nodes = {n["metadata"]["name"]: n for n in ws.list("Node")}
    after_update = {p: (t - updated_at, node) for p, (t, node) in placed.seen.items() if t >= updated_at}
    violators = sorted(p for p, (_, node) in after_update.items() if not node_matches_pv_affinity(nodes[node], new_pv))
    window = max((after_update[p][0] for p in violators), default=0.0)
    measure.seconds("race window seconds", window, digits=3)
    measure.note("pods placed against the new affinity", f"{len(violators)}/{len(after_update)}")
    print(f"tightening race: {len(violators)} of {len(after_update)} pods placed after the update landed outside "
          f"{keep}; window {window * 1000:.0f} ms")
    ws.exempt(*(p for p, (_, node) in placed.seen.items() if not node_matches_pv_affinity(nodes[node], new_pv)))
    settled = [p for p, (t, _) in after_update.items() if t > window + 0.5]
    x.expect(len(settled) >= 10, f"enough pods arrived after the race to judge the steady state: {len(settled)}")
    late_bad = [p for p in settled if p in violators]
    x.expect(not late_bad, f"once the scheduler caught up, pods must follow the new affinity: {late_bad}")


class PlacementRecorder:
    """Watches the workspace's pods on a thread and records when each got a node."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.seen: dict[str, tuple[float, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        return len(self.seen)

    def _run(self) -> None:
        kube = connect(self.ws.cluster.kubeconfig, self.ws.cluster.context)
        try:
            while not self._stop.is_set():
                for _, obj in kinds.watch_objects(kube, "Pod", self.ws.namespace, None, timeout_seconds=5):
                    node, name = o.node_name(obj), o.name(obj)
                    if node and name and name not in self.seen:
                        self.seen[name] = (time.monotonic(), node)
                    if self._stop.is_set():
                        break
        finally:
            kube.api.close()

    def __enter__(self) -> PlacementRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _all_decided(state: dict[str, Obj], total: int) -> bool:
    return len(state) >= total and all(o.scheduled(p) or o.unschedulable(p) for p in state.values())


@allure.feature("gate on")
@allure.story("validation still applies")
@pytest.mark.needs("mutable-pv-affinity")
@pytest.mark.parametrize("affinity,key", [({}, "AFFINITY_REQUIRED_EMPTY"),
                                          ({"required": {"nodeSelectorTerms": []}}, "AFFINITY_TERMS_EMPTY")],
                         ids=["empty-affinity", "empty-terms"])
def test_gate_on_still_validates(ws: Workspace, affinity: Obj, key: str) -> None:
    pv = ws.create(b.persistent_volume(ws.name("pv"), "1Gi", affinity=b.zone_affinity(ws.zones()[0]),
                                       labels=ws.case_labels))
    name = pv["metadata"]["name"]
    x.volume_phase(ws, name, "Available")
    pv = ws.get("PersistentVolume", name) or {}
    # A merge patch cannot empty a map (it merges); replace the whole spec.nodeAffinity.
    err = _api_error(lambda: ws.replace({**pv, "spec": {**pv["spec"], "nodeAffinity": affinity}}), affinity)
    x.expect(err.status == 422 and messages.expected(key, ws.cluster.minor) in (err.body or ""),
             f"expected 422 with {messages.expected(key, ws.cluster.minor)!r}, got {err.status}: {err.body}")


@allure.feature("gate on")
@allure.story("the seed's Retain workflow: Released until claimRef is cleared")
@pytest.mark.needs("mutable-pv-affinity")
def test_retain_workflow_after_mutation(ws: Workspace, kubectl: Path) -> None:
    pv = x.bound_pair(ws, b.label_affinity("storage", "standard"))
    name = pv["metadata"]["name"]
    done = mut.kubectl_merge_patch(ws.cluster, kubectl, name, SEED_PATCH)
    x.expect(done.returncode == 0, f"kubectl patch failed: {done.stderr.strip()}")
    ws.delete("PersistentVolumeClaim", "data")
    released = x.volume_phase(ws, name, "Released")
    x.expect(bool(released["spec"].get("claimRef")), "Released keeps the old claimRef", released, ws=ws)
    ws.create(b.persistent_volume_claim("data", "5Gi", "", volume_name=name))
    x.event(ws, "PersistentVolumeClaim", "data", "PV_BOUND_ELSEWHERE", volume=name)
    still = ws.get("PersistentVolumeClaim", "data") or {}
    x.expect(still.get("status", {}).get("phase") == "Pending", "the new claim waits while claimRef is set",
             still, ws=ws)
    ws.patch("PersistentVolume", name, {"spec": {"claimRef": None}})
    bound = x.bound_volume(ws, "data")
    x.expect(bound["metadata"]["name"] == name and pv_zones(bound) == set()
             and bound["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
             == ["ssd"], "the recreated claim binds the PV, which keeps its new affinity", bound, ws=ws)
    ws.create(b.pod("app", ("data",)))
    x.pod_runs(ws, "app")
    node = x.node_of(ws, "app")
    x.expect(label(node, "storage") == "ssd", "a new pod follows the new affinity (storage=ssd)", node, ws=ws)



# ---- the driver's own dynamic volumes ------------------------------------------------------

@allure.feature("gate on, the driver's own volumes")
@allure.story("a dynamic volume of the driver moved to another node: still Bound, its running pod kept, a new pod "
              "follows the new affinity")
@pytest.mark.needs("mutable-pv-affinity", "dynamic-zonal")
@pytest.mark.parametrize("source", ["provisioned", pytest.param("restored", marks=pytest.mark.needs("snapshots"))])
def test_dynamic_volume_moved_stays_bound_and_new_pods_follow(ws: Workspace, source: str) -> None:
    """KEP-5381 on a volume the driver made (not a static stand-in), provisioned empty or
    restored from a snapshot (issue 37: the restored PV carries the affinity the copy got
    from its source, and nothing else may differ): the operator rewrites the PV's
    nodeAffinity to another node, as after a storage-side migration. The PV keeps its phase
    and claimRef, the pod already running on the old node is not evicted
    (IgnoredDuringExecution), and a new pod of the same claim is scheduled onto the node the
    new affinity names, whatever the driver's topology class."""
    sc = ws.storage_class("mutate", "WaitForFirstConsumer")
    claim = b.persistent_volume_claim("data", "1Gi", sc)
    if source == "restored":
        ws.create(b.persistent_volume_claim("origin", "1Gi", sc))
        ws.create(b.pod("writer", ("origin",)))
        x.pod_runs(ws, "writer", timeout=120)
        x.snapshot_ready(ws, "snap", "origin", ws.snapshot_class())
        claim = b.with_data_source(claim, "VolumeSnapshot", "snap")
    ws.create(claim)
    ws.create(b.pod("app", ("data",)))
    running = x.pod_runs(ws, "app", timeout=120)
    pv = x.bound_volume(ws, "data")
    name, ref_before = o.name(pv), pv["spec"]["claimRef"]
    old = str(o.node_name(running))
    target = next(n for n in ws.nodes() if o.name(n) != old)
    provisioned = pv["spec"].get("nodeAffinity")
    _accepted(lambda: mut.replace_affinity(ws.kube, name, {"required": b.node_selector_terms(
        [("kubernetes.io/hostname", "In", [o.hostname(target)])])}), f"moving PV {name} to {o.name(target)}")
    # No data moved, so the volume goes back to the affinity it was provisioned with before
    # its claim is deleted (this runs after the follower is gone, before the claim): a per-node
    # external-provisioner deletes only a PV whose affinity its own node's CSI topology
    # segment matches (controller.go Delete, VolumeIsAccessible), and no driver's segment
    # carries kubernetes.io/hostname, so the moved PV would stay Released for good
    # (docs/findings.md, the node-local package).
    ws.cleanup.push(f"give PV {name} back the nodeAffinity it was provisioned with",
                    lambda: mut.replace_affinity(ws.kube, name, provisioned))
    ws.exempt("app")  # it knowingly runs where the new affinity no longer allows: IgnoredDuringExecution

    def kept(state: dict[str, Obj]) -> str | None:
        now = state.get(name) or {}
        ref = (now.get("spec") or {}).get("claimRef") or {}
        pod = ws.get("Pod", "app") or {}
        if o.phase(now) != "Bound" or ref.get("uid") != ref_before.get("uid"):
            return f"PV {name} is {o.phase(now)} with claimRef {ref.get('name')} after the mutation"
        if o.uid(pod) != o.uid(running) or pod["metadata"].get("deletionTimestamp"):
            return "the running pod was evicted or replaced"
        return None

    with allure.step("for 5 s after the mutation: PV Bound to the same claim, the running pod kept"):
        holds_for(ws.kube, "PersistentVolume", kept, 5, f"PV {name} after its nodeAffinity mutation",
                  field_selector=f"metadata.name={name}")
    ws.create(b.pod("follower", ("data",)))
    scheduled = x.pod_scheduled(ws, "follower", timeout=60)
    x.expect(o.node_name(scheduled) == o.name(target), f"the new pod follows the PV's new affinity to "
             f"{o.name(target)}, not {o.node_name(scheduled)}", scheduled, ws=ws)

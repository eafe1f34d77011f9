"""`explain` says "fits" (SCHEDULABLE, exit 0) only when no scheduler message contradicts
it: a reason explain cannot reproduce, pod-wide or per node, is a cause; agreement needs
a reason on some side; a message older than the pod's or its claims' last change is
named stale (issue #39)."""

from __future__ import annotations

from pvchaos.conformance.explain import explain, last_change
from pvchaos.explain import to_json, to_text
from tests.unit.explain_scenes import failed_scheduling, pod, pv, pvc, sc, scene

IMMEDIATE = sc("fast", mode="Immediate")
T0, T1, T2 = "2026-12-03T07:00:00Z", "2026-12-03T07:00:10Z", "2026-12-03T07:00:20Z"
PREEMPTION = " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."


def wrote(obj: dict, when: str, manager: str = "kubectl-edit", subresource: str | None = None) -> dict:
    entry = {"manager": manager, "operation": "Update", "time": when}
    if subresource:
        entry["subresource"] = subresource
    obj["metadata"].setdefault("managedFields", []).append(entry)
    return obj


def created(obj: dict, when: str) -> dict:
    obj["metadata"]["creationTimestamp"] = when
    return obj


def message(body: str, when: str = T1) -> dict:
    return failed_scheduling(f"0/4 nodes are available: {body}.{PREEMPTION}", when=when)


# ---- an unknown reason, pod-wide or per node ---------------------------------------------------

def test_unknown_pod_wide_reason_is_unmodeled_not_fits() -> None:
    e = explain(scene(pod(), events=[message('resourceclaim.resource.k8s.io "gpu" not found')]))
    assert [c.code for c in e.causes] == ["UNMODELED_FILTER"] and not e.schedulable
    assert e.cause.facts["plugin"] == "DynamicResources"
    assert "resourceclaim.resource.k8s.io \"gpu\" not found" in e.cause.summary
    assert e.scheduler.agrees is False  # "nothing" (no key) against "nothing" (no prediction) is no agreement
    assert any("not modelled by explain" in d for d in e.scheduler.differences)


def test_resource_claims_without_a_message_are_not_fits() -> None:
    """Seen live on 1.35.4: DynamicResources holds a pod whose ResourceClaim is missing
    before any filter (PreEnqueue), with no event and no PodScheduled condition."""
    p = pod()
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "no-such-claim"}]
    e = explain(scene(p))
    assert [c.code for c in e.causes] == ["UNMODELED_FILTER"] and not e.schedulable
    assert "gpu -> no-such-claim" in e.cause.summary and e.scheduler.agrees is None


def test_unknown_pod_wide_reason_without_a_plugin_name() -> None:
    e = explain(scene(pod(), events=[message("something new rejected the pod")]))
    assert e.cause.code == "UNMODELED_FILTER" and e.cause.facts["plugin"] == "an unmodelled PreFilter"


def test_unknown_per_node_reason_is_unmodeled() -> None:
    e = explain(scene(pod(), events=[message("4 node(s) had a brand new problem")]))
    assert [c.code for c in e.causes] == ["UNMODELED_FILTER"] and not e.schedulable


def test_missing_claim_message_is_modelled_and_agrees() -> None:
    e = explain(scene(pod("data"), events=[message('persistentvolumeclaim "data" not found')]))
    assert e.cause.code == "CLAIM_MISSING"
    assert e.scheduler.agrees is True, e.scheduler.differences


# ---- a modelled reason the model does not predict ----------------------------------------------

def test_taint_the_model_does_not_see_is_not_fits() -> None:
    e = explain(scene(pod(), events=[message("4 node(s) had untolerated taint {dedicated: db}")]))
    assert e.fitting and not e.schedulable
    assert [c.code for c in e.causes] == ["SCHEDULER_DISAGREES"]
    assert e.scheduler.agrees is False
    assert "UNTOLERATED_TAINT: the scheduler counts 4 node(s), explain 0" in e.scheduler.differences


def test_cordon_the_model_does_not_see_is_not_fits() -> None:
    e = explain(scene(pod(), events=[message("4 node(s) were unschedulable")]))
    assert e.cause.code == "SCHEDULER_DISAGREES" and not e.schedulable


def test_claim_created_after_its_not_found_message_is_stale() -> None:
    """The flake of #39: the pod came before its claim; the scheduler's only word is
    'not found', and the claim exists now."""
    claim = created(pvc("data", "fast", volume="pv-1", phase="Bound"), T2)
    s = scene(created(pod("data"), T0), [claim], [pv("pv-1", claim="data", cls="fast")], [IMMEDIATE],
              events=[message('persistentvolumeclaim "data" not found')])
    e = explain(s)
    assert e.cause.code == "SCHEDULER_MESSAGE_STALE" and not e.schedulable
    assert e.scheduler.stale is not None and "claim app/data created" in e.scheduler.stale
    assert e.scheduler.agrees is False


# ---- required pod affinity and an older pod-wide message ---------------------------------------

AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}


def affinity_scene(bound_at: str | None) -> object:
    p = created(pod("data"), T0)
    p["spec"]["affinity"] = AFFINITY
    claim = pvc("data", "fast", volume="pv-1", phase="Bound")
    if bound_at:
        wrote(claim, bound_at, "kube-controller-manager", "status")
    return scene(p, [claim], [pv("pv-1", claim="data", cls="fast")], [IMMEDIATE],
                 events=[message("pod has unbound immediate PersistentVolumeClaims")])


def test_pod_affinity_and_an_older_pod_wide_message() -> None:
    e = explain(affinity_scene(bound_at=T2))
    assert [c.code for c in e.causes] == ["SCHEDULER_MESSAGE_STALE", "UNMODELED_FILTER"]
    assert not e.schedulable
    assert "required inter-pod affinity" in e.causes[1].summary


def test_pod_affinity_and_a_current_pod_wide_message_explain_does_not_reproduce() -> None:
    e = explain(affinity_scene(bound_at=None))
    assert [c.code for c in e.causes] == ["SCHEDULER_DISAGREES", "UNMODELED_FILTER"]


# ---- staleness, named ----------------------------------------------------------------------

def test_message_older_than_a_pod_change_is_named_stale() -> None:
    p = wrote(created(pod(), T0), T2)  # e.g. a toleration added after the scheduler's word
    e = explain(scene(p, events=[message("4 node(s) had untolerated taint {dedicated: db}")]))
    assert e.cause.code == "SCHEDULER_MESSAGE_STALE"
    assert e.scheduler.stale is not None and "pod app/app written by kubectl-edit" in e.scheduler.stale
    assert "stale" in to_text(e)
    assert to_json(e)["scheduler"]["stale"] == e.scheduler.stale


def test_the_pods_status_written_by_the_scheduler_is_no_change() -> None:
    p = wrote(created(pod(), T0), T2, "kube-scheduler", "status")
    e = explain(scene(p, events=[message("4 node(s) had untolerated taint {dedicated: db}")]))
    assert e.scheduler.stale is None and e.cause.code == "SCHEDULER_DISAGREES"
    assert last_change(scene(p))[1] == "pod app/app created"


def test_a_message_newer_than_every_change_is_current() -> None:
    p = wrote(created(pod(), T0), T1)
    e = explain(scene(p, events=[message("4 node(s) were unschedulable", when=T2)]))
    assert e.scheduler.stale is None


# ---- fits, only when nothing contradicts it ----------------------------------------------------

def test_fits_without_a_message() -> None:
    e = explain(scene(pod()))
    assert e.schedulable and e.scheduler.agrees is None


def test_nothing_against_nothing_is_not_agreement() -> None:
    e = explain(scene(pod(), nodes=[], events=[failed_scheduling("0/0 nodes are available.")]))
    assert e.cause.code == "NO_NODES"
    assert e.scheduler.agrees is None
    assert "neither the scheduler nor explain names a reason" in e.scheduler.differences

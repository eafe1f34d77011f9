"""`pvchaos explain`'s pure engine: every rule, on object sets without a cluster."""

from __future__ import annotations

import pytest

from pvchaos.conformance.explain import explain
from pvchaos.conformance.placement import feasible_nodes
from pvchaos.conformance.remedy import FIXES, fixes
from tests.unit.explain_scenes import HOST, NS, ZONE, failed_scheduling, node, pod, pv, pvc, sc, scene, terms

IMMEDIATE = sc("fast", mode="Immediate")
WFFC = sc("wffc")
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}


def first(explanation, node_name):
    return next(v for v in explanation.nodes if v.node == node_name).first


def test_immediate_binding_in_the_wrong_zone_is_the_incident() -> None:
    s = scene(pod("data", selector={ZONE: "b"}), [pvc("data", "fast", volume="pv-a", phase="Bound")],
              [pv("pv-a", terms([(ZONE, "In", ["a"])]), claim="data", cls="fast")], [IMMEDIATE],
              events=[failed_scheduling("0/4 nodes are available: 1 node(s) didn't match PersistentVolume's node "
                                        "affinity, 3 node(s) didn't match Pod's node affinity/selector. preemption: "
                                        "0/4 nodes are available: 4 Preemption is not helpful for scheduling.")])
    e = explain(s)
    assert e.cause.code == "IMMEDIATE_BINDING_WRONG_ZONE"
    assert "zone a" in e.cause.summary and "zone b" in e.cause.summary
    b1 = first(e, "b1")
    assert (b1.filter, b1.claim, b1.pv, b1.term, b1.label) == ("VolumeBinding", f"{NS}/data", "pv-a", 1, ZONE)
    assert "needs topology.kubernetes.io/zone In [a]; node has topology.kubernetes.io/zone=b" in b1.detail
    assert first(e, "a1").filter == "NodeAffinity"
    assert e.scheduler.agrees is True, e.scheduler.differences
    assert any("WaitForFirstConsumer" in f.text for f in fixes(e.cause))


def test_disagreement_is_reported_not_hidden() -> None:
    s = scene(pod("data", selector={ZONE: "b"}), [pvc("data", "fast", volume="pv-a", phase="Bound")],
              [pv("pv-a", terms([(ZONE, "In", ["a"])]), claim="data", cls="fast")], [IMMEDIATE],
              events=[failed_scheduling("0/5 nodes are available: 2 node(s) didn't match PersistentVolume's node "
                                        "affinity, 3 Too many pods.")])
    agreement = explain(s).scheduler
    assert agreement.agrees is False
    assert "the scheduler counted 5 nodes, explain sees 4" in agreement.differences
    assert any("NODE_AFFINITY_CONFLICT: the scheduler counts 2" in d for d in agreement.differences)
    assert "not modelled by explain: 3 Too many pods" in agreement.differences


def test_old_wording_is_read_for_old_minors_only() -> None:
    msg = ("0/4 nodes are available: 1 node(s) had volume node affinity conflict, "
           "3 node(s) didn't match Pod's node affinity/selector.")
    base = dict(claims=[pvc("data", "fast", volume="pv-a", phase="Bound")],
                pvs=[pv("pv-a", terms([(ZONE, "In", ["a"])]), claim="data", cls="fast")], classes=[IMMEDIATE],
                events=[failed_scheduling(msg)])
    assert explain(scene(pod("data", selector={ZONE: "b"}), minor=32, **base)).scheduler.agrees is True
    assert explain(scene(pod("data", selector={ZONE: "b"}), minor=35, **base)).scheduler.agrees is False


def test_local_pv_whose_node_is_gone() -> None:
    s = scene(pod("data"), [pvc("data", "local", volume="pv-l", phase="Bound")],
              [pv("pv-l", terms([(HOST, "In", ["host-gone"])]), claim="data", cls="local")],
              [sc("local", provisioner="kubernetes.io/no-provisioner")])
    e = explain(s)
    assert e.cause.code == "LOCAL_PV_NODE_GONE"
    assert "host-gone" in e.cause.summary
    assert all(v.first.reasons == ("NODE_AFFINITY_CONFLICT",) for v in e.nodes)
    texts = " ".join(f.text for f in fixes(e.cause))
    assert "MutablePVNodeAffinity" in texts and "bring node host-gone back" in texts


def test_zone_without_nodes() -> None:
    s = scene(pod("data"), [pvc("data", "wffc", volume="pv-d", phase="Bound")],
              [pv("pv-d", terms([(ZONE, "In", ["d"])]), claim="data", cls="wffc")], [WFFC])
    assert explain(s).cause.code == "ZONE_WITHOUT_NODES"
    assert explain(s).cause.facts["zones"] == ["d"]


def test_several_terms_each_failure_named() -> None:
    affinity = terms([(ZONE, "In", ["d"])], [(HOST, "In", ["host-x"]), (ZONE, "Exists", [])])
    s = scene(pod("data"), [pvc("data", "wffc", volume="pv", phase="Bound")],
              [pv("pv", affinity, claim="data", cls="wffc")], [WFFC])
    a1 = first(explain(s), "a1")
    assert a1.detail.startswith("claim app/data -> PV pv: node affinity none of 2 terms match: term 1: needs "
                                "topology.kubernetes.io/zone In [d]")
    assert "term 2: needs kubernetes.io/hostname In [host-x]; node has kubernetes.io/hostname=host-a1" in a1.detail
    assert a1.term is None


def test_second_term_matching_makes_the_node_fit() -> None:
    affinity = terms([(ZONE, "In", ["d"])], [(ZONE, "In", ["b"])])
    s = scene(pod("data"), [pvc("data", "wffc", volume="pv", phase="Bound")],
              [pv("pv", affinity, claim="data", cls="wffc")], [WFFC])
    assert explain(s).fitting == ("b1",)


def test_match_fields_are_ignored_for_pvs_but_not_for_pods() -> None:
    only_fields = terms(fields=[{"key": "metadata.name", "operator": "In", "values": ["c1"]}])
    s = scene(pod("data"), [pvc("data", "wffc", volume="pv", phase="Bound")],
              [pv("pv", only_fields, claim="data", cls="wffc")], [WFFC])
    assert explain(s).fitting == ("a1", "a2", "b1", "c1")  # the term constrains nothing
    s = scene(pod(affinity=only_fields))
    e = explain(s)
    assert e.fitting == ("c1",)
    assert "needs field metadata.name In [c1]; node name is a1" in first(e, "a1").detail


def test_match_fields_with_an_expression_leave_only_the_expression() -> None:
    affinity = {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}],
                                       "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c1"]}]}]}
    s = scene(pod("data", selector={ZONE: "c"}), [pvc("data", "fast", volume="pv", phase="Bound")],
              [pv("pv", affinity, claim="data", cls="fast")], [IMMEDIATE])
    e = explain(s)
    assert e.cause.code == "IMMEDIATE_BINDING_WRONG_ZONE"
    assert "(matchFields are ignored for PV affinity)" in first(e, "c1").detail


def test_multi_claim_pod_with_volumes_in_two_zones() -> None:
    s = scene(pod("one", "two"), [pvc("one", "wffc", volume="pv1", phase="Bound"),
                                  pvc("two", "wffc", volume="pv2", phase="Bound")],
              [pv("pv1", terms([(ZONE, "In", ["a"])]), claim="one", cls="wffc"),
               pv("pv2", terms([(ZONE, "In", ["b"])]), claim="two", cls="wffc")], [WFFC])
    e = explain(s)
    assert e.cause.code == "VOLUMES_DISJOINT"
    assert "app/one -> a1, a2" in e.cause.summary and "app/two -> b1" in e.cause.summary
    assert first(e, "b1").claim == "app/one"


def test_multi_claim_pod_one_claim_unbound_immediate_blocks_every_node() -> None:
    s = scene(pod("ok", "stuck"), [pvc("ok", "wffc", volume="pv1", phase="Bound"), pvc("stuck", "", size="120Gi")],
              [pv("pv1", terms([(ZONE, "In", ["a"])]), claim="ok", cls="wffc"), pv("small", size="100Gi"),
               pv("rox", size="200Gi", modes=("ReadOnlyMany",))], [WFFC],
              events=[failed_scheduling("0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                                        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")])
    e = explain(s)
    assert e.cause.code == "NO_PV_FOR_CLAIM"
    assert e.fitting == ()
    assert "PV small (100Gi, class \"\"): requested PV is too small" in e.cause.details[0]
    assert "PV rox (200Gi, class \"\"): incompatible accessMode" in e.cause.details[0]
    assert e.scheduler.agrees is True


def test_class_typo_suggests_the_class() -> None:
    s = scene(pod("data"), [pvc("data", "wffcc")], classes=[WFFC, IMMEDIATE])
    e = explain(s)
    assert e.cause.code == "CLASS_MISSING"
    assert "did you mean 'wffc'?" in e.cause.summary
    assert any("storageClassName: wffc" in c for f in fixes(e.cause) for c in f.commands)


def test_missing_claim() -> None:
    e = explain(scene(pod("nope"), events=[failed_scheduling(
        '0/4 nodes are available: persistentvolumeclaim "nope" not found. preemption: ...')]))
    assert e.cause.code == "CLAIM_MISSING"
    assert e.scheduler.agrees is True


def test_lost_claim_whose_pv_is_gone() -> None:
    msg = ('0/4 nodes are available: persistentvolumeclaim "data" bound to non-existent persistentvolume '
           '"pv-gone". not found. preemption: ...')  # as 1.35.4 words it
    e = explain(scene(pod("data"), [pvc("data", "wffc", volume="pv-gone", phase="Lost")], [], [WFFC],
                      events=[failed_scheduling(msg)]))
    assert e.cause.code == "PV_GONE"
    assert e.pod_wide.reasons == ("PVC_BOUND_TO_MISSING_PV",) and e.fitting == ()
    assert e.scheduler.agrees is True


def test_volume_name_that_does_not_fit() -> None:
    e = explain(scene(pod("data"), [pvc("data", "", size="120Gi", volume="small")], [pv("small", size="100Gi")]))
    assert e.cause.code == "VOLUME_NAME_MISFIT"
    assert "requested PV is too small" in e.cause.details[0]


def test_immediate_class_whose_provisioner_failed() -> None:
    event = {"kind": "Event", "reason": "ProvisioningFailed", "message": "quota exceeded",
             "involvedObject": {"kind": "PersistentVolumeClaim", "name": "data", "namespace": NS}}
    e = explain(scene(pod("data"), [pvc("data", "fast")], classes=[IMMEDIATE], events=[event]))
    assert e.cause.code == "PROVISIONING_FAILED"  # the provisioner ran: its own error, not "check that it runs"
    assert "quota exceeded" in e.cause.summary
    assert any("quota" in f.text and "raise the quota" in f.text for f in fixes(e.cause))


def test_pod_pinned_outside_allowed_topologies() -> None:
    e = explain(scene(pod("data", selector={ZONE: "c"}), [pvc("data", "ab")], classes=[sc("ab", zones=["a", "b"])]))
    assert e.cause.code == "PINNED_OUTSIDE_ALLOWED_TOPOLOGIES"
    c1 = first(e, "c1")
    assert c1.reasons == ("NO_PV_TO_BIND",)
    assert "allowedTopologies allow only topology.kubernetes.io/zone In [a, b]" in c1.detail


def test_class_topology_matching_no_node() -> None:
    e = explain(scene(pod("data"), [pvc("data", "z")], classes=[sc("z", zones=["zone-q"])]))
    assert e.cause.code == "CLASS_TOPOLOGY_MATCHES_NO_NODE"


def test_wffc_local_class_with_no_fitting_pv() -> None:
    local = sc("local", provisioner="kubernetes.io/no-provisioner")
    e = explain(scene(pod("data"), [pvc("data", "local", size="10Gi")], [pv("l1", terms([(HOST, "In", ["host-a1"])]),
                                                                              cls="local", size="5Gi")], [local]))
    assert e.cause.code == "NO_PV_FOR_CLAIM"


def test_wffc_static_pvs_are_used_once_across_claims() -> None:
    local = sc("local", provisioner="kubernetes.io/no-provisioner")
    s = scene(pod("one", "two"), [pvc("one", "local"), pvc("two", "local")],
              [pv("l1", terms([(HOST, "In", ["host-a1"])]), cls="local"),
               pv("l2", terms([(HOST, "In", ["host-a1"])]), cls="local"),
               pv("l3", terms([(HOST, "In", ["host-b1"])]), cls="local")], [local])
    assert explain(s).fitting == ("a1",)


def test_provisioner_that_never_answered() -> None:
    claim = pvc("data", "wffc", annotations={"volume.kubernetes.io/selected-node": "b1"})
    e = explain(scene(pod("data"), [claim], classes=[WFFC]))
    assert e.cause.code == "PROVISIONER_SILENT"
    assert e.fitting == ("b1",)
    assert first(e, "a1").detail == "claim app/data is being provisioned for node b1 (selected-node)"


def test_local_volume_on_an_unreachable_node() -> None:
    nodes = [node("a1", "a", taints=[UNREACHABLE]), node("a2", "a"), node("b1", "b")]
    s = scene(pod("data"), [pvc("data", "local", volume="pv-l", phase="Bound")],
              [pv("pv-l", terms([(HOST, "In", ["host-a1"])]), claim="data", cls="local")],
              [sc("local", provisioner="kubernetes.io/no-provisioner")], nodes=nodes,
              events=[failed_scheduling("0/3 nodes are available: 1 node(s) had untolerated taint "
                                        "{node.kubernetes.io/unreachable: }, 2 node(s) didn't match PersistentVolume's "
                                        "node affinity. preemption: ...")])
    e = explain(s)
    assert e.cause.code == "VOLUME_NODES_UNAVAILABLE"
    assert "a1: untolerated taint node.kubernetes.io/unreachable:NoSchedule" in e.cause.summary
    assert e.scheduler.agrees is True
    assert any("bring them back" in f.text for f in fixes(e.cause))


def test_every_node_cordoned() -> None:
    nodes = [node("a1", "a", unschedulable=True), node("b1", "b", unschedulable=True)]
    e = explain(scene(pod(), nodes=nodes, events=[failed_scheduling("0/2 nodes are available: 2 node(s) were unschedulable.")]))
    assert e.cause.code == "NODES_UNAVAILABLE"
    assert e.scheduler.agrees is True
    assert fixes(e.cause)[0].commands == ("kubectl uncordon a1", "kubectl uncordon b1")


def test_tolerated_taint_does_not_exclude() -> None:
    nodes = [node("a1", "a", taints=[UNREACHABLE])]
    assert explain(scene(pod(tolerations=[{"key": UNREACHABLE["key"], "operator": "Exists"}]), nodes=nodes)).fitting == ("a1",)


def test_pod_selector_matching_no_node() -> None:
    e = explain(scene(pod(selector={"disk": "nvme"})))
    assert e.cause.code == "POD_SELECTOR_MATCHES_NO_NODE"
    assert "pod nodeSelector needs disk=nvme; node has no disk label" in first(e, "a1").detail


def test_pod_pinned_away_from_a_wffc_volume() -> None:
    s = scene(pod("data", selector={ZONE: "c"}), [pvc("data", "wffc", volume="pv", phase="Bound")],
              [pv("pv", terms([(ZONE, "In", ["a"])]), claim="data", cls="wffc")], [WFFC])
    assert explain(s).cause.code == "POD_PINNED_AWAY_FROM_VOLUME"


def test_fitting_pod_the_scheduler_calls_cordoned_is_not_schedulable() -> None:
    e = explain(scene(pod(), events=[failed_scheduling("0/4 nodes are available: 4 node(s) were unschedulable.")]))
    assert e.fitting == ("a1", "a2", "b1", "c1")
    assert e.scheduler.agrees is False
    assert [c.code for c in e.causes] == ["SCHEDULER_DISAGREES"] and not e.schedulable
    assert "4 NODE_UNSCHEDULABLE" in e.cause.summary


def test_no_event_yet() -> None:
    e = explain(scene(pod(selector={"disk": "nvme"})))
    assert e.scheduler.agrees is None
    assert e.scheduler.predicted == {"POD_AFFINITY_MISMATCH": 4}


CASES = {
    "taint+affinity": scene(pod("data", selector={ZONE: "a"}), [pvc("data", "fast", volume="pv", phase="Bound")],
                            [pv("pv", terms([(ZONE, "NotIn", ["b"])]), claim="data", cls="fast")], [IMMEDIATE],
                            nodes=[node("a1", "a", taints=[UNREACHABLE]), node("a2", "a"), node("c1", "c")]),
    "wffc-static": scene(pod("d"), [pvc("d", "local")], [pv("x", terms([(HOST, "In", ["host-c1"])]), cls="local")],
                         [sc("local", provisioner="kubernetes.io/no-provisioner")]),
    "wffc-topology": scene(pod("d"), [pvc("d", "ab")], classes=[sc("ab", zones=["a", "b"])]),
    "gt": scene(pod("d"), [pvc("d", "w", volume="pv", phase="Bound")],
                [pv("pv", terms([("rank", "Gt", ["5"])]), claim="d", cls="w")], [sc("w")],
                nodes=[node("a1", "a", rank="7"), node("b1", "b", rank="3"), node("c1", "c")]),
}


@pytest.mark.parametrize("name", CASES)
def test_fitting_nodes_are_the_oracles(name: str) -> None:
    s = CASES[name]
    bound = {k: next(p for p in s.pvs if p["metadata"]["name"] == c["spec"]["volumeName"])
             for k, c in s.claims.items() if c["status"]["phase"] == "Bound"}
    assert set(explain(s).fitting) == feasible_nodes(s.pod, s.nodes, bound, s.classes, claims=s.claims,
                                                    unbound_pvs=s.pvs)


def test_every_cause_has_a_fix_entry() -> None:
    import inspect

    from pvchaos.conformance import causes
    codes = set()
    source = inspect.getsource(causes)
    for chunk in source.split('Cause("')[1:]:
        codes.add(chunk.split('"', 1)[0])
    codes |= {"VOLUME_NODES_UNAVAILABLE", "NODES_UNAVAILABLE"}
    assert codes <= set(FIXES), codes - set(FIXES)

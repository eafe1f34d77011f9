"""Invariants over a cluster snapshot (pure): each rule fires on its violation, and
objects between states (being deleted, in a terminating namespace) are left alone."""

from pvchaos.conformance.invariants import Snapshot, check

NODE_A = {"metadata": {"name": "a-1", "labels": {"topology.kubernetes.io/zone": "zone-a"}}}
NODE_B = {"metadata": {"name": "b-1", "labels": {"topology.kubernetes.io/zone": "zone-b"}}}
PV = {"metadata": {"name": "pv1"}, "spec": {
    "claimRef": {"namespace": "ns", "name": "c", "uid": "u1"},
    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}]}}}}
PVC = {"metadata": {"name": "c", "namespace": "ns", "uid": "u1"}, "spec": {"volumeName": "pv1"},
       "status": {"phase": "Bound"}}


def pod(node: str, name: str = "p") -> dict:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}}


def test_healthy_snapshot_has_no_violation() -> None:
    assert check(Snapshot([pod("a-1")], [PVC], [PV], [NODE_A, NODE_B])) == []


def test_pod_outside_pv_affinity_is_reported_unless_exempt() -> None:
    snap = Snapshot([pod("b-1")], [PVC], [PV], [NODE_A, NODE_B])
    assert [v.rule for v in check(snap)] == ["pod-on-pv-affinity"]
    assert check(snap, exempt_pods={"ns/p"}) == []


def test_bound_pair_and_claimed_twice() -> None:
    other = {"metadata": {"name": "d", "namespace": "ns", "uid": "u2"}, "spec": {"volumeName": "pv1"},
             "status": {"phase": "Bound"}}
    rules = sorted(v.rule for v in check(Snapshot([], [PVC, other], [PV], [NODE_A])))
    assert rules == ["bound-pair", "claimed-twice"]
    missing = check(Snapshot([], [PVC], [], [NODE_A]))
    assert [v.rule for v in missing] == ["bound-pair"] and "does not exist" in missing[0].message


def test_objects_being_deleted_are_not_judged() -> None:
    assert check(Snapshot([], [PVC], [], [NODE_A], terminating_namespaces=frozenset({"ns"}))) == []
    leaving = {**PVC, "metadata": {**PVC["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert check(Snapshot([], [leaving], [], [NODE_A])) == []

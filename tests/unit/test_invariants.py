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


def _va(name: str, pv: str, node: str, attached: bool = True, deleting: bool = False,
        driver: str = "csi.example") -> dict:
    meta: dict = {"name": name, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})}
    return {"metadata": meta, "spec": {"attacher": driver, "nodeName": node,
                                       "source": {"persistentVolumeName": pv}},
            "status": {"attached": attached}}


def _csi_pv(name: str, handle: str, driver: str = "csi.example") -> dict:
    return {"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": handle}}}


CSINODE_A = {"metadata": {"name": "a-1"}, "spec": {"drivers": [
    {"name": "csi.example", "nodeID": "a-1", "allocatable": {"count": 2}}]}}


def test_volume_limit_counts_attached_volumes_per_node_and_driver() -> None:
    pvs = [_csi_pv(f"pv{i}", f"h{i}") for i in range(4)]
    two = [_va("va0", "pv0", "a-1"), _va("va1", "pv1", "a-1"), _va("va2", "pv2", "a-1", attached=False),
           _va("va3", "pv3", "a-1", deleting=True)]
    assert check(Snapshot(volumes=pvs, nodes=[NODE_A], attachments=two, csi_nodes=[CSINODE_A])) == []
    three = [*two, _va("va2b", "pv2", "a-1")]
    found = check(Snapshot(volumes=pvs, nodes=[NODE_A], attachments=three, csi_nodes=[CSINODE_A]))
    assert [v.rule for v in found] == ["volume-limit"]
    assert "3 volumes of driver csi.example" in found[0].message and "allocatable count 2" in found[0].message
    other_driver = [*two, _va("vx", "pv2", "a-1", driver="other.csi")]
    assert check(Snapshot(volumes=pvs, nodes=[NODE_A], attachments=other_driver, csi_nodes=[CSINODE_A])) == []


def test_volume_limit_reads_a_real_kubelets_volumes_in_use_and_skips_unknown_limits() -> None:
    node = {**NODE_A, "status": {"volumesInUse": [f"kubernetes.io/csi/csi.example^h{i}" for i in range(3)]
                                 + ["kubernetes.io/host-path/x"]}}
    pvs = [_csi_pv("pv0", "h0")]
    found = check(Snapshot(volumes=pvs, nodes=[node], attachments=[_va("va0", "pv0", "a-1")], csi_nodes=[CSINODE_A]))
    assert [v.rule for v in found] == ["volume-limit"] and "3 volumes" in found[0].message  # h0 counted once
    no_driver = {"metadata": {"name": "a-1"}, "spec": {"drivers": []}}  # the driver dropped from CSINode
    assert check(Snapshot(volumes=pvs, nodes=[node], csi_nodes=[no_driver])) == []

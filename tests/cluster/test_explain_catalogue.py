"""`pvchaos explain` on real Pending pods: a catalogue of causes, each reproduced on a
local cluster (real kube-scheduler, PV controller and provisioners).

Every case makes the situation, waits for the scheduler's verdict (PodScheduled=False,
reason Unschedulable, and its FailedScheduling message where one is due), then explains
the pod through the same list calls and engine as the command, and asserts the root
cause and that the scheduler's message agrees with the per-node prediction.
"""

from __future__ import annotations

import json

import pytest

from pvchaos import cli
from pvchaos.chaos.labels import add_taint
from pvchaos.conformance.explain import Explanation, explain
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.explain_read import read_view
from pvchaos.kube.wait import wait_for, wait_for_event
from pvchaos.plugin import evidence

pytestmark = [pytest.mark.needs("zones", "static-pv")]
NO_PROVISIONER = "kubernetes.io/no-provisioner"


def explained(ws: Workspace, pod: str, key: str | None) -> Explanation:
    """Wait for the scheduler's verdict (with message ``key``, else any filter message),
    then explain the pod."""
    found = x.pod_unschedulable(ws, pod, key)
    if key is None:
        wait_for_event(ws.kube, found, "nodes are available", reason="FailedScheduling")
    view = read_view(ws.kube, ws.namespace, pod)
    return explain(view.scene(view.pods[0]))


def agrees(e: Explanation) -> None:
    assert e.scheduler.agrees is True, (e.scheduler.message, e.scheduler.differences, e.scheduler.predicted)


@pytest.mark.needs("dynamic-zonal")
def test_immediate_binding_across_zones(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's incident: an Immediate class binds in zone a, the pod may only run in zone b."""
    zone_a, zone_b = ws.zones()[0], ws.zones()[1]
    sc = ws.storage_class("imm", "Immediate", allowed_zones=[zone_a])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    x.claim_bound(ws, "data")
    ws.create(b.pod("app", ("data",), node_selector={o.ZONE_KEY: zone_b}))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "IMMEDIATE_BINDING_WRONG_ZONE"
    agrees(e)
    # the command itself: exit 1, the JSON schema, read-only
    code = cli.main(["explain", "app", "-n", ws.namespace, "--kubeconfig", str(ws.cluster.kubeconfig), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["schema"] == "pvchaos.explain/v1"
    assert out["pods"][0]["cause"]["code"] == "IMMEDIATE_BINDING_WRONG_ZONE"
    assert out["pods"][0]["scheduler"]["agrees"] is True


def test_local_pv_whose_node_is_gone(ws: Workspace) -> None:
    """A local PV pinned to a node that was replaced (its hostname no longer exists)."""
    x.bound_pair(ws, b.hostname_affinity("replaced-node-7"))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "LOCAL_PV_NODE_GONE"
    assert e.cause.facts["hosts"] == ["replaced-node-7"]
    agrees(e)


def test_zone_without_nodes(ws: Workspace) -> None:
    x.bound_pair(ws, b.zone_affinity("zone-gone"))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "ZONE_WITHOUT_NODES"
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_class_typo(ws: Workspace) -> None:
    sc = ws.storage_class("typo", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc[:-1]))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "CLASS_MISSING"
    assert e.cause.facts["suggestion"] == sc
    agrees(e)


def test_no_static_pv_big_enough(ws: Workspace) -> None:
    """100Gi never satisfies 120Gi: an unbound class-less claim blocks the pod everywhere."""
    ws.create(b.persistent_volume(ws.name("pv"), "100Gi", labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "120Gi", "", selector={"matchLabels": ws.case_labels}))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "NO_PV_FOR_CLAIM"
    assert "requested PV is too small" in e.cause.details[0]
    agrees(e)


def test_claim_that_does_not_exist(ws: Workspace) -> None:
    ws.create(b.pod("app", ("never-created",)))
    e = explained(ws, "app", None)
    assert e.cause.code == "CLAIM_MISSING"
    agrees(e)


def test_lost_claim_whose_pv_was_deleted(ws: Workspace) -> None:
    pv = x.bound_pair(ws, b.zone_affinity(ws.zones()[0]))
    name = o.name(pv)
    ws.delete("PersistentVolume", name, wait=False)
    ws.patch("PersistentVolume", name, {"metadata": {"finalizers": None}})  # pv-protection holds a bound PV
    wait_for(ws.kube, "PersistentVolumeClaim", "data", lambda c: o.phase(c) == "Lost", "phase Lost", ws.namespace)
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", None)  # 1.35.4: a PreFilter rejection, not the per-node PV_NOT_EXIST
    assert e.cause.code == "PV_GONE"
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_pod_pinned_outside_allowed_topologies(ws: Workspace) -> None:
    zone_a, zone_c = ws.zones()[0], ws.zones()[-1]
    sc = ws.storage_class("only-a", "WaitForFirstConsumer", allowed_zones=[zone_a])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",), node_selector={o.ZONE_KEY: zone_c}))
    e = explained(ws, "app", "NO_PV_TO_BIND")
    assert e.cause.code == "PINNED_OUTSIDE_ALLOWED_TOPOLOGIES"
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_class_topology_that_no_node_has(ws: Workspace) -> None:
    sc = ws.storage_class("nowhere", "WaitForFirstConsumer", allowed_topologies={o.ZONE_KEY: ["zone-q"]})
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NO_PV_TO_BIND")
    assert e.cause.code == "CLASS_TOPOLOGY_MATCHES_NO_NODE"
    agrees(e)


def test_local_class_without_a_fitting_pv(ws: Workspace) -> None:
    sc = ws.create(b.storage_class(ws.name("local"), NO_PROVISIONER))["metadata"]["name"]
    node = ws.node()
    ws.create(b.persistent_volume(ws.name("pv"), "5Gi", storage_class=sc, affinity=b.hostname_affinity(o.hostname(node)),
                                  local_path="/mnt/disk1"))
    ws.create(b.persistent_volume_claim("data", "10Gi", sc))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NO_PV_TO_BIND")
    assert e.cause.code == "NO_PV_FOR_CLAIM"
    agrees(e)


def test_provisioner_that_never_answers(ws: Workspace) -> None:
    """WaitForFirstConsumer with a provisioner nobody runs: the scheduler picks a node,
    annotates the claim and waits; explain names the silent provisioner."""
    sc = ws.create(b.storage_class(ws.name("silent"), "absent.csi.pvchaos.dev"))["metadata"]["name"]
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    selected = x.claim_annotation(ws, "data", o.SELECTED_NODE)
    view = read_view(ws.kube, ws.namespace, "app")
    e = explain(view.scene(view.pods[0]))
    assert e.cause.code == "PROVISIONER_SILENT"
    assert e.cause.facts["provisioner"] == "absent.csi.pvchaos.dev"
    assert e.fitting == (selected,)  # the scheduler's choice is the one node explain finds


def test_volume_name_naming_a_pv_too_small(ws: Workspace) -> None:
    pv = ws.create(b.persistent_volume(ws.name("pv"), "1Gi", labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "5Gi", "", volume_name=o.name(pv)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "VOLUME_NAME_MISFIT"
    assert "requested PV is too small" in e.cause.details[0]
    agrees(e)


def test_two_volumes_in_two_zones(ws: Workspace) -> None:
    x.bound_pair(ws, b.zone_affinity(ws.zones()[0]), claim="one")
    x.bound_pair(ws, b.zone_affinity(ws.zones()[1]), claim="two")
    ws.create(b.pod("app", ("one", "two")))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "VOLUMES_DISJOINT"
    agrees(e)


def test_node_selector_that_matches_nothing(ws: Workspace, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    ws.create(b.pod("app", node_selector={"disk": "nvme"}))
    ws.create(b.pod("other", node_selector={"disk": "nvme"}))
    e = explained(ws, "app", "POD_AFFINITY_MISMATCH")
    assert e.cause.code == "POD_SELECTOR_MATCHES_NO_NODE"
    agrees(e)
    # a failed suite test gets the report of each Pending pod attached
    attached: dict[str, str] = {}
    monkeypatch.setattr(evidence.allure, "attach", lambda body, name, *a, **k: attached.__setitem__(name, body))
    evidence.attach_explanations(ws)
    assert sorted(attached) == ["explain-app.txt", "explain-other.txt"]
    assert "[POD_SELECTOR_MATCHES_NO_NODE]" in attached["explain-app.txt"]
    # --all-pending: both pods, exit 1
    x.pod_unschedulable(ws, "other")
    assert cli.main(["explain", "--all-pending", "-n", ws.namespace, "--kubeconfig", str(ws.cluster.kubeconfig),
                     "-o", "json"]) == 1
    pods = json.loads(capsys.readouterr().out)["pods"]
    assert [p["pod"] for p in pods] == [f"{ws.namespace}/app", f"{ws.namespace}/other"]


@pytest.mark.disruptive
@pytest.mark.needs("node-labels")
def test_local_volume_on_a_tainted_node(ws: Workspace) -> None:
    """The only node that holds the volume does not take pods (a NoSchedule taint)."""
    node = ws.node()
    add_taint(ws.cleanup, ws.kube, o.name(node), {"key": "pvchaos.dev/broken", "effect": "NoSchedule"})
    x.bound_pair(ws, b.hostname_affinity(o.hostname(node)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNTOLERATED_TAINT")
    assert e.cause.code == "VOLUME_NODES_UNAVAILABLE"
    assert e.cause.facts["nodes"] == [o.name(node)]
    agrees(e)

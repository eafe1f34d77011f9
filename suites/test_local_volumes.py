"""Local PVs with StatefulSets: each replica binds a volume on the node it is placed
on, and a replacement pod returns to that node (SPEC 3)."""

from __future__ import annotations

import allure
import pytest

from conformance.affinity import node_matches_pv_affinity
from kube import builders as b
from pvchaos.kit import expect as x
from kube.kinds import Obj
from kube.wait import wait_for, wait_gone
from pvchaos.kit.workspace import Workspace

pytestmark = [allure.epic("Scheduling with volumes"), allure.feature("Local volumes with StatefulSets"),
              pytest.mark.needs("static-pv")]


def _ready(ws: Workspace, sts: str, replicas: int) -> Obj:
    return wait_for(ws.kube, "StatefulSet", sts, lambda o: (o or {}).get("status", {}).get("readyReplicas") == replicas,
                    f"{replicas} ready replicas", ws.namespace, timeout=90)


def _check_replica_on_its_volume(ws: Workspace, pod_name: str, claim: str) -> str:
    pv = x.bound_volume(ws, claim)
    node = x.node_of(ws, pod_name)
    x.expect(node_matches_pv_affinity(node, pv), f"{pod_name} must run where its local PV lives", node, pv, ws=ws)
    return node["metadata"]["name"]


@allure.story("each replica binds a local PV on its own node; a deleted pod returns; scale-down keeps claims")
def test_statefulset_on_local_pvs(ws: Workspace) -> None:
    sc = x.local_class_with_pv_per_node(ws)
    ws.create(b.statefulset("db", 3, sc, "5Gi"))
    _ready(ws, "db", 3)
    nodes = {i: _check_replica_on_its_volume(ws, f"db-{i}", f"data-db-{i}") for i in range(3)}
    x.expect(len(set(nodes.values())) == 3, f"three replicas on three local PVs, got nodes {nodes}")

    with allure.step("delete pod db-0: the replacement must come back to the same node"):
        old_uid = (ws.get("Pod", "db-0") or {})["metadata"]["uid"]
        ws.delete("Pod", "db-0", wait=False)
        pod = wait_for(ws.kube, "Pod", "db-0",
                       lambda o: o is not None and o["metadata"]["uid"] != old_uid
                       and o.get("status", {}).get("phase") == "Running",
                       "a new db-0 Running", ws.namespace, timeout=60)
        x.expect(pod is not None and pod["spec"]["nodeName"] == nodes[0],
                 f"replacement db-0 must return to {nodes[0]}", pod, ws=ws)

    with allure.step("scale down to 1: claims of removed replicas stay Bound"):
        ws.patch("StatefulSet", "db", {"spec": {"replicas": 1}})
        for i in (1, 2):
            wait_gone(ws.kube, "Pod", f"db-{i}", ws.namespace, 60, "deleted by scale-down")
            pvc = ws.get("PersistentVolumeClaim", f"data-db-{i}")
            x.expect((pvc or {}).get("status", {}).get("phase") == "Bound", f"data-db-{i} must survive scale-down",
                     pvc, ws=ws)


@allure.story("a dynamic node-local provisioner pins each replica's volume to its node")
@pytest.mark.needs("dynamic-local")
def test_statefulset_on_dynamic_local_volumes(ws: Workspace) -> None:
    sc = ws.name("local-dyn")
    ws.create(b.storage_class(sc, ws.cluster.local_class_provisioner or "", "WaitForFirstConsumer"))
    ws.create(b.statefulset("web", 3, sc, "1Gi"))
    _ready(ws, "web", 3)
    for i in range(3):
        _check_replica_on_its_volume(ws, f"web-{i}", f"data-web-{i}")

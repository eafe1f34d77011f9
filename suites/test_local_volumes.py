"""Local PVs with StatefulSets: each replica binds a volume on the node it is placed
on, and a replacement pod returns to that node (SPEC 3)."""

from __future__ import annotations

import allure
import pytest

from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.objects import name, node_name, uid
from pvchaos.kube.wait import wait_gone

pytestmark = [allure.epic("Scheduling with volumes"), allure.feature("Local volumes with StatefulSets"),
              pytest.mark.needs("static-pv")]


@allure.story("each replica binds a local PV on its own node; a deleted pod returns; scale-down keeps claims")
@pytest.mark.quick
def test_statefulset_on_local_pvs(ws: Workspace) -> None:
    sc = x.local_class_with_pv_per_node(ws)
    ws.create(b.statefulset("db", 3, sc, "5Gi"))
    x.statefulset_ready(ws, "db", 3)
    nodes = {i: name(x.runs_where_its_volume_is(ws, f"db-{i}", f"data-db-{i}")) for i in range(3)}
    x.expect(len(set(nodes.values())) == 3, f"three replicas on three local PVs, got nodes {nodes}")

    with allure.step("delete pod db-0: the replacement must come back to the same node"):
        old_uid = uid(ws.get("Pod", "db-0"))
        ws.delete("Pod", "db-0", wait=False)
        pod = x.pod_replaced(ws, "db-0", old_uid)
        x.expect(node_name(pod) == nodes[0], f"replacement db-0 must return to {nodes[0]}", pod, ws=ws)

    with allure.step("scale down to 1: claims of removed replicas stay Bound"):
        ws.patch("StatefulSet", "db", {"spec": {"replicas": 1}})
        for i in (1, 2):
            wait_gone(ws.kube, "Pod", f"db-{i}", ws.namespace, 60, "deleted by scale-down")
            x.phase_now(ws, "PersistentVolumeClaim", f"data-db-{i}", "Bound")  # survives scale-down


@allure.story("a dynamic node-local provisioner pins each replica's volume to its node")
@pytest.mark.needs("dynamic-local")
def test_statefulset_on_dynamic_local_volumes(ws: Workspace) -> None:
    sc = ws.local_class()
    ws.create(b.statefulset("web", 3, sc, "1Gi"))
    x.statefulset_ready(ws, "web", 3)
    for i in range(3):
        x.runs_where_its_volume_is(ws, f"web-{i}", f"data-web-{i}")

"""Node label changes (SPEC 4): node affinity and PV affinity are
IgnoredDuringExecution, so running pods stay while new pods follow the new labels."""

from __future__ import annotations

import allure
import pytest

from pvchaos.chaos import labels as chaos_labels
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import ZONE_KEY, label, name
from pvchaos.kube.wait import holds_for, wait_for

pytestmark = [allure.epic("Node loss and recovery"), allure.feature("Node label changes"), pytest.mark.disruptive,
              pytest.mark.needs("node-labels")]


def _stays_running(ws: Workspace, pod: str, uid: str, seconds: float) -> None:
    key = f"{ws.namespace}/{pod}"

    def moved(st: dict[str, Obj]) -> str | None:
        o = st.get(key)
        if o is None or o["metadata"]["uid"] != uid:
            return f"pod {pod} was deleted or replaced"
        if o["metadata"].get("deletionTimestamp"):
            return f"pod {pod} is being deleted"
        return None

    holds_for(ws.kube, "Pod", moved, seconds, f"pod {pod} keeps running", ws.namespace,
              field_selector=f"metadata.name={pod}")


@allure.story("a running pod stays when its node loses the label it selected; new pods follow the labels")
@pytest.mark.relies_on("scheduler")  # pods only, no volumes
@pytest.mark.quick
def test_running_pod_stays_new_pods_follow_new_labels(ws: Workspace) -> None:
    ws.create(b.pod("ssd-app", node_selector={"storage": "ssd"}))
    pod = x.pod_runs(ws, "ssd-app")
    node = pod["spec"]["nodeName"]
    chaos_labels.set_node_labels(ws, node, {"storage": "standard"})
    wait_for(ws.kube, "Node", node, lambda n: label(n, "storage") == "standard", "relabelled", None, 30)
    with allure.step("for 5 s the running pod is neither evicted nor replaced"):
        _stays_running(ws, "ssd-app", pod["metadata"]["uid"], 5)
    for i in range(3):  # several, so a scheduler that ignores labels cannot pass by luck
        ws.create(b.pod(f"ssd-new-{i}", node_selector={"storage": "ssd"}))
    for i in range(3):
        new = x.pod_runs(ws, f"ssd-new-{i}")
        landed = x.node_of(ws, f"ssd-new-{i}")
        x.expect(o.name(landed) != node and label(landed, "storage") == "ssd",
                 f"a new ssd pod must land on a node labelled storage=ssd now (not {node}, now standard), "
                 f"got {o.name(landed)} with storage={label(landed, 'storage')}", new, landed, ws=ws)
    ws.create(b.pod("std-new", node_selector={"storage": "standard", **ws.pin(x.node_of(ws, "ssd-app"))}))
    std = x.pod_runs(ws, "std-new")
    x.expect(std["spec"]["nodeName"] == node, f"a pod selecting storage=standard and {node}'s hostname runs there",
             std, ws=ws)


@allure.story("a node whose zone label is removed stops receiving pods bound to zonal PVs")
@pytest.mark.needs("static-pv")
def test_node_without_zone_label_gets_no_zonal_pods(ws: Workspace) -> None:
    zone = ws.zones()[0]
    first, second = ws.node(zone, 0), ws.node(zone, 1)
    x.bound_pair(ws, b.zone_affinity(zone))
    ws.create(b.pod("before", ("data",), node_selector=ws.pin(first)))
    before = x.pod_runs(ws, "before")
    chaos_labels.set_node_labels(ws, name(first), {ZONE_KEY: None})
    wait_for(ws.kube, "Node", name(first), lambda n: label(n, ZONE_KEY) is None, "zone label gone", None, 30)
    _stays_running(ws, "before", before["metadata"]["uid"], 3)
    ws.exempt("before")  # placed while the label was there: IgnoredDuringExecution
    ws.create(b.pod("after", ("data",), node_selector=ws.pin(first)))
    x.pod_unschedulable(ws, "after", "NODE_AFFINITY_CONFLICT")
    ws.create(b.pod("sibling", ("data",), node_selector=ws.pin(second)))
    x.pod_runs(ws, "sibling")

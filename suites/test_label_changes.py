"""Node label changes (SPEC 4): node affinity and PV affinity are
IgnoredDuringExecution, so running pods stay while new pods follow the new labels."""

from __future__ import annotations

import allure
import pytest

from chaos import labels as chaos_labels
from clusters.topology import HOSTNAME_KEY, ZONE_KEY
from kube import builders as b
from pvchaos.kit import expect as x
from kube.kinds import Obj
from kube.wait import holds_for, wait_for
from pvchaos.kit.workspace import Workspace

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
def test_running_pod_stays_new_pods_follow_new_labels(ws: Workspace) -> None:
    ws.create(b.pod("ssd-app", node_selector={"storage": "ssd"}))
    pod = x.pod_runs(ws, "ssd-app")
    node = pod["spec"]["nodeName"]
    chaos_labels.set_node_labels(ws.cleanup, ws.kube, node, {"storage": "standard"})
    wait_for(ws.kube, "Node", node, lambda o: x.label(o or {}, "storage") == "standard", "relabelled", None, 30)
    with allure.step("for 5 s the running pod is neither evicted nor replaced"):
        _stays_running(ws, "ssd-app", pod["metadata"]["uid"], 5)
    ws.create(b.pod("ssd-new", node_selector={"storage": "ssd"}))
    new = x.pod_runs(ws, "ssd-new")
    x.expect(new["spec"]["nodeName"] != node, f"a new ssd pod must avoid {node}, now standard", new, ws=ws)
    host = x.label(ws.get("Node", node) or {}, HOSTNAME_KEY) or node
    ws.create(b.pod("std-new", node_selector={"storage": "standard", HOSTNAME_KEY: host}))
    x.pod_runs(ws, "std-new")


@allure.story("a node whose zone label is removed stops receiving pods bound to zonal PVs")
@pytest.mark.needs("static-pv")
def test_node_without_zone_label_gets_no_zonal_pods(ws: Workspace) -> None:
    pv = ws.create(b.persistent_volume(ws.name("zonal"), "5Gi", affinity=b.zone_affinity("zone-a"),
                                       labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "5Gi", "", volume_name=pv["metadata"]["name"]))
    x.claim_bound(ws, "data")
    ws.create(b.pod("before", ("data",), node_selector={HOSTNAME_KEY: "zone-a-1"}))
    before = x.pod_runs(ws, "before")
    chaos_labels.set_node_labels(ws.cleanup, ws.kube, "zone-a-1", {ZONE_KEY: None})
    wait_for(ws.kube, "Node", "zone-a-1", lambda o: x.label(o or {}, ZONE_KEY) is None, "zone label gone", None, 30)
    _stays_running(ws, "before", before["metadata"]["uid"], 3)
    ws.exempt_pods.add(f"{ws.namespace}/before")  # placed while the label was there: IgnoredDuringExecution
    ws.create(b.pod("after", ("data",), node_selector={HOSTNAME_KEY: "zone-a-1"}))
    x.pod_unschedulable(ws, "after", "NODE_AFFINITY_CONFLICT")
    ws.create(b.pod("sibling", ("data",), node_selector={HOSTNAME_KEY: "zone-a-2"}))
    x.pod_runs(ws, "sibling")

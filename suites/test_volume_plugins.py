"""The scheduler's volume plugins no other suite exercises (SPEC 3): VolumeRestrictions
keeps a ReadWriteOncePod claim to one pod in the whole cluster (and lets a higher
priority pod preempt its holder), and VolumeZone places pods by the zone *labels* of
PVs that carry no nodeAffinity, as older and migrated volumes do. A scheduler without
either plugin passes every other suite; these tests are what fails then.
"""

from __future__ import annotations

import allure
import pytest

from pvchaos.api import Workspace, b, o, x
from pvchaos.kube.objects import ZONE_KEY
from pvchaos.kube.wait import wait_for_event

pytestmark = [allure.epic("Scheduling with volumes"), pytest.mark.needs("static-pv", "zones")]


def _rwop_claim(ws: Workspace) -> str:
    """A ReadWriteOncePod claim bound to a static PV of its own (any zone's nodes may use it)."""
    pv = ws.name("rwop")
    ws.create(b.persistent_volume(pv, "1Gi", access_modes=("ReadWriteOncePod",), labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "1Gi", "", access_modes=("ReadWriteOncePod",),
                                        selector={"matchLabels": ws.case_labels}))
    x.claim_bound(ws, "data")
    return pv


@allure.feature("VolumeRestrictions")
@allure.story("a ReadWriteOncePod claim in use: a second pod using it is unschedulable, cluster-wide")
@pytest.mark.quick
def test_read_write_once_pod_claim_admits_one_pod(ws: Workspace) -> None:
    _rwop_claim(ws)
    ws.create(b.pod("first", ("data",)))
    first = x.pod_runs(ws, "first")
    ws.create(b.pod("second", ("data",)))
    x.pod_unschedulable(ws, "second", "RWOP_CONFLICT")
    x.expect(o.phase(ws.get("Pod", "first")) == "Running", "the pod holding the claim keeps running", first, ws=ws)


@allure.feature("VolumeRestrictions")
@allure.story("a higher-priority pod preempts the holder of a ReadWriteOncePod claim and runs")
def test_higher_priority_pod_preempts_the_read_write_once_pod_holder(ws: Workspace) -> None:
    _rwop_claim(ws)
    high = ws.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": ws.name("high")}, "value": 1000000})["metadata"]["name"]
    ws.create(b.pod("low", ("data",)))
    low = x.pod_runs(ws, "low")
    ws.create(b.pod("urgent", ("data",), extra_spec={"priorityClassName": high}))
    x.pod_evicted(ws, "low", 60, "preempted by the higher-priority pod that needs its ReadWriteOncePod claim")
    urgent = x.pod_runs(ws, "urgent", timeout=90)
    # Gone is not enough (anything may delete a pod): the scheduler must say it preempted
    # this pod, for this preemptor (preemption.go: "Preempted by pod <uid> on node <node>").
    wait_for_event(ws.kube, {**low, "kind": "Pod"}, f"Preempted by pod {o.uid(urgent)}", reason="Preempted",
                   timeout=30)


@allure.feature("VolumeZone")
@allure.story("a PV with zone labels and no nodeAffinity: pods run in its zone, pinned elsewhere they cannot")
@pytest.mark.parametrize("placement", ["anywhere", "pinned-to-another-zone"])
def test_zone_labels_without_node_affinity_place_the_pod(ws: Workspace, placement: str) -> None:
    home, other = ws.zones()[0], ws.zones()[-1]
    pv = ws.name("labelled")
    ws.create(b.persistent_volume(pv, "1Gi", labels={**ws.case_labels, ZONE_KEY: home}))
    ws.create(b.persistent_volume_claim("data", "1Gi", "", selector={"matchLabels": ws.case_labels}))
    x.claim_bound(ws, "data")
    if placement != "anywhere":
        ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: other}))
        x.pod_unschedulable(ws, "app", "VOLUME_ZONE_CONFLICT")
        return
    # Each pod prefers the other zone (a soft node affinity, which only scores): a
    # scheduler blind to the PV's zone label follows the preference out of the labelled
    # zone on every run, while VolumeZone filters the other zones out before any score.
    away = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [other]}]}}]}}
    pods = [f"app-{i}" for i in range(2)]
    ws.create_all([b.pod(p, ("data",), extra_spec={"affinity": away}) for p in pods])
    for p in pods:
        x.pod_runs(ws, p)
        node = x.node_of(ws, p)
        x.expect(o.zone(node) == home, f"{p} runs in {home}, the zone its PV is labelled with", node, ws=ws)

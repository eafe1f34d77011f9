"""volumeBindingMode across zones, allowedTopologies, ephemeral storage (SPEC 3).

The classic incident: with Immediate binding a volume is provisioned before the
scheduler knows where the pod can run, so a pod limited to another zone stays Pending.
WaitForFirstConsumer fixes it by provisioning where the scheduler put the pod.
"""

from __future__ import annotations

import allure
import pytest

from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.objects import SELECTED_NODE, ZONE_KEY, annotation, node_name, pv_zones

pytestmark = [allure.epic("Scheduling with volumes"), pytest.mark.needs("zones", "dynamic-zonal")]


@allure.feature("Binding modes")
@allure.story("Immediate across zones: the volume node affinity conflict incident")
def test_immediate_binding_strands_pod_in_other_zone(ws: Workspace) -> None:
    sc = ws.storage_class("zonal-immediate", "Immediate")
    ws.create(b.persistent_volume_claim("data", "10Gi", sc))
    pv = x.bound_volume(ws, "data")
    where = pv_zones(pv)
    x.expect(len(where) == 1, f"an Immediate zonal PV is pinned to one zone before any pod exists: {x.zones_text(pv)}",
             pv, ws=ws)
    other = next(z for z in ws.zones() if z not in where)
    with allure.step(f"pod limited to {other}, volume in {sorted(where)}"):
        ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: other}))
    x.pod_unschedulable(ws, "app", "NODE_AFFINITY_CONFLICT")


@allure.feature("Binding modes")
@allure.story("WaitForFirstConsumer provisions in the pod's zone")
@pytest.mark.quick
def test_wait_for_first_consumer_provisions_in_pod_zone(ws: Workspace) -> None:
    sc = ws.storage_class("zonal-wffc", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("data", "10Gi", sc))
    x.claim_stays_pending(ws, "data", "WAIT_FOR_CONSUMER")
    target = ws.zones()[-1]
    ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: target}))
    pod = x.pod_runs(ws, "app")
    pvc = x.claim_bound(ws, "data")
    x.expect(annotation(pvc, SELECTED_NODE) == node_name(pod),
             f"the scheduler records its node on the claim ({SELECTED_NODE})", pvc, pod, ws=ws)
    x.volume_in_zone(ws, "data", target)


@allure.feature("allowedTopologies")
@allure.story("Immediate provisioning stays inside allowedTopologies")
def test_allowed_topologies_limit_immediate_provisioning(ws: Workspace) -> None:
    allowed = ws.zones()[:2]
    sc = ws.storage_class("zonal-immediate", "Immediate", allowed)
    claims = [f"data-{i}" for i in range(6)]
    ws.create_all(b.persistent_volume_claim(c, "1Gi", sc) for c in claims)
    seen: set[str] = set()
    for c in claims:
        pv = x.bound_volume(ws, c)
        x.expect(bool(pv_zones(pv)) and pv_zones(pv) <= set(allowed), f"PV for {c} must be in {allowed}: {x.zones_text(pv)}",
                 pv, ws=ws)
        seen |= pv_zones(pv)
    measure.note("zones used", sorted(seen))
    # A class that allows exactly one zone, the last: a provisioner blind to the class's
    # topology (one that takes the first zone, or any zone) cannot pass this by chance.
    only = ws.zones()[-1]
    single = ws.storage_class("one-zone-immediate", "Immediate", [only])
    ws.create_all(b.persistent_volume_claim(f"only-{i}", "1Gi", single) for i in range(2))
    for i in range(2):
        pv = x.bound_volume(ws, f"only-{i}")
        x.expect(pv_zones(pv) == {only}, f"PV for only-{i} must be in {only}, the class's one zone: {x.zones_text(pv)}",
                 pv, ws=ws)


@allure.feature("allowedTopologies")
@allure.story("a pod pinned outside allowedTopologies cannot be scheduled")
def test_pod_pinned_outside_allowed_topologies_fails(ws: Workspace) -> None:
    zones = ws.zones()
    sc = ws.storage_class("zonal-wffc", "WaitForFirstConsumer", zones[:1])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: zones[-1]}))
    x.pod_unschedulable(ws, "app", "NO_PV_TO_BIND")
    x.phase_now(ws, "PersistentVolumeClaim", "data", "Pending")  # nothing may be provisioned


@allure.feature("Binding modes")
@allure.story("a pod with an unbound Immediate claim waits")
def test_unbound_immediate_claim_blocks_pod(ws: Workspace) -> None:
    """An Immediate claim that cannot bind (no class, no PV) keeps its pod unschedulable."""
    ws.create(b.persistent_volume_claim("data", "1Gi", "", selector={"matchLabels": {"pvchaos.dev/none": "x"}}))
    ws.create(b.pod("app", ("data",)))
    x.pod_unschedulable(ws, "app", "UNBOUND_IMMEDIATE")


@allure.feature("Node resources")
@allure.story("ephemeral storage beyond any node")
@pytest.mark.needs("ephemeral-storage")
@pytest.mark.relies_on("scheduler")  # no volumes
def test_ephemeral_storage_beyond_any_node_stays_pending(ws: Workspace) -> None:
    ws.create(b.pod("big", requests={"ephemeral-storage": "100Ti"}))
    x.pod_unschedulable(ws, "big", "INSUFFICIENT_EPHEMERAL")

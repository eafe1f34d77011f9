"""volumeBindingMode across zones, allowedTopologies, ephemeral storage (SPEC 3).

The classic incident: with Immediate binding a volume is provisioned before the
scheduler knows where the pod can run, so a pod limited to another zone stays Pending.
WaitForFirstConsumer fixes it by provisioning where the scheduler put the pod.
"""

from __future__ import annotations

import allure
import pytest

from pvchaos.conformance.topology_class import TopologyClass
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.objects import SELECTED_NODE, annotation, node_name, pv_zones

# Expectations follow the driver's topology class (pvchaos/conformance/topology_class.py):
# "zone" below reads "the driver's domain", a zone for a zonal driver, a node for a per-node one.
pytestmark = [allure.epic("Scheduling with volumes"), pytest.mark.needs("zones", "dynamic-zonal")]


PINNING = (TopologyClass.NODE, TopologyClass.ZONE, TopologyClass.REGION, TopologyClass.GROUP)


@allure.feature("Binding modes")
@allure.story("Immediate across zones: the volume node affinity conflict incident")
def test_immediate_binding_strands_pod_in_other_zone(ws: Workspace) -> None:
    """The volume is pinned to one of the driver's domains (a zone for a zonal driver, a
    node for a per-node one) before any pod exists; a pod limited to another domain stays
    Pending with the volume node affinity conflict."""
    x.applies_to(ws, *PINNING)
    topo = ws.topology()
    sc = ws.storage_class("zonal-immediate", "Immediate")
    ws.create(b.persistent_volume_claim("data", "10Gi", sc))
    pv, where = x.volume_pinned(ws, "data")
    if topo.cls == TopologyClass.ZONE:
        x.expect(len(pv_zones(pv)) == 1, f"an Immediate zonal PV is pinned to one zone: {x.zones_text(pv)}", pv, ws=ws)
    assert topo.key is not None
    other = next(v for v in topo.domains if v != where)
    with allure.step(f"pod limited to {topo.key}={other}, volume in {where}"):
        ws.create(b.pod("app", ("data",), node_selector={topo.key: other}))
    x.pod_unschedulable(ws, "app", "NODE_AFFINITY_CONFLICT")


@allure.feature("Binding modes")
@allure.story("WaitForFirstConsumer provisions in the pod's zone")
@pytest.mark.quick
def test_wait_for_first_consumer_provisions_in_pod_zone(ws: Workspace) -> None:
    topo = ws.topology()
    sc = ws.storage_class("zonal-wffc", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("data", "10Gi", sc))
    x.claim_stays_pending(ws, "data", "WAIT_FOR_CONSUMER")
    target = list(topo.domains)[-1]
    ws.create(b.pod("app", ("data",), node_selector={topo.key: target} if topo.key else None))
    pod = x.pod_runs(ws, "app")
    pvc = x.claim_bound(ws, "data")
    x.expect(annotation(pvc, SELECTED_NODE) == node_name(pod),
             f"the scheduler records its node on the claim ({SELECTED_NODE})", pvc, pod, ws=ws)
    x.runs_where_its_volume_is(ws, "app", "data")
    if topo.cls != TopologyClass.NONE:
        x.volume_within(ws, "data", [target])


@allure.feature("allowedTopologies")
@allure.story("Immediate provisioning stays inside allowedTopologies")
def test_allowed_topologies_limit_immediate_provisioning(ws: Workspace) -> None:
    x.applies_to(ws, *PINNING)
    topo = ws.topology()
    assert topo.key is not None
    allowed = list(topo.domains)[:2]
    sc = ws.storage_class("zonal-immediate", "Immediate", allowed_topologies={topo.key: allowed})
    claims = [f"data-{i}" for i in range(6)]
    ws.create_all(b.persistent_volume_claim(c, "1Gi", sc) for c in claims)
    seen: set[str] = set()
    for c in claims:
        x.volume_within(ws, c, allowed)
        seen.add(x.volume_pinned(ws, c)[1])
    measure.note(f"{topo.key} used", sorted(seen))
    # A class that allows exactly one domain, the last: a provisioner blind to the class's
    # topology that takes the first domain, or none, fails at once; one that takes a
    # random domain lands all 12 volumes there once in 3^12 (531441) runs on three domains.
    only = list(topo.domains)[-1]
    single = ws.storage_class("one-zone-immediate", "Immediate", allowed_topologies={topo.key: [only]})
    ws.create_all((b.persistent_volume_claim(f"only-{i}", "1Gi", single) for i in range(12)), parallel=4)
    for i in range(12):
        x.volume_within(ws, f"only-{i}", [only])


@allure.feature("allowedTopologies")
@allure.story("a pod pinned outside allowedTopologies cannot be scheduled")
def test_pod_pinned_outside_allowed_topologies_fails(ws: Workspace) -> None:
    x.applies_to(ws, *PINNING)
    topo = ws.topology()
    assert topo.key is not None
    domains = list(topo.domains)
    sc = ws.storage_class("zonal-wffc", "WaitForFirstConsumer", allowed_topologies={topo.key: domains[:1]})
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    # The claim through a watch before its pod: else the scheduler may judge the pod
    # before its cache holds the claim ("persistentvolumeclaim not found").
    x.claim_stays_pending(ws, "data", "WAIT_FOR_CONSUMER")
    ws.create(b.pod("app", ("data",), node_selector={topo.key: domains[-1]}))
    x.pod_unschedulable(ws, "app", "NO_PV_TO_BIND")
    x.phase_now(ws, "PersistentVolumeClaim", "data", "Pending")  # nothing may be provisioned


@allure.feature("Binding modes")
@allure.story("a pod with an unbound Immediate claim waits")
def test_unbound_immediate_claim_blocks_pod(ws: Workspace) -> None:
    """An Immediate claim that cannot bind (no class, no PV) keeps its pod unschedulable."""
    ws.create(b.persistent_volume_claim("data", "1Gi", "", selector={"matchLabels": {"pvchaos.dev/none": "x"}}))
    # No wait for the PV controller's verdict first: the scheduler's answer must not depend
    # on that controller (detection power's pv-binder case). A pod seen before its claim gets
    # 'not found' and is retried when the claim arrives; the wait below takes the later event.
    ws.create(b.pod("app", ("data",)))
    x.pod_unschedulable(ws, "app", "UNBOUND_IMMEDIATE")


@allure.feature("Node resources")
@allure.story("ephemeral storage beyond any node")
@pytest.mark.needs("ephemeral-storage")
@pytest.mark.relies_on("scheduler")  # no volumes
def test_ephemeral_storage_beyond_any_node_stays_pending(ws: Workspace) -> None:
    ws.create(b.pod("big", requests={"ephemeral-storage": "100Ti"}))
    x.pod_unschedulable(ws, "big", "INSUFFICIENT_EPHEMERAL")

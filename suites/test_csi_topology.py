"""CSI topology and volume limits (SPEC, the CSI path). upstream's external-provisioner
builds CreateVolume's accessibility requirements from the CSINode objects' topology keys
and the nodes' labels (pkg/controller/topology.go): a selected node whose CSINode lacks
the driver gives "no topology key found for node X"; with no CSINode carrying the driver
an Immediate claim gets "no available topology found"; `--strict-topology` narrows the
requisite to the selected node's segment. kube-scheduler's NodeVolumeLimits reads each
CSINode's allocatable count: a node at its limit takes no pod that needs one more volume
("node(s) exceed max volume count").
"""

from __future__ import annotations

import json
from pathlib import Path

import allure
import pytest

from pvchaos.api import Workspace, b, kinds, o, x
from pvchaos.clusters import csi
from pvchaos.kit import measure
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube
from pvchaos.kube.objects import ZONE_KEY

pytestmark = [allure.epic("The CSI path"), pytest.mark.needs("dynamic-zonal", "zones")]
# The topology tests, and the one on a limit the harness sets, have always run on the
# harness's CSI stack with attach; NodeVolumeLimits itself counts the volumes a node's pods
# use whether or not the driver attaches (nodevolumelimits/csi.go filterAttachableVolumes),
# so the test of the driver's own limit needs no attach.
NEEDS_ATTACH = pytest.mark.needs("attach")


def _without_driver(cleanup: Cleanup, kube: Kube, node: str, driver: str) -> None:
    """The node's CSINode loses the driver (a node plugin that never registered there);
    the entry comes back at cleanup."""
    before = kinds.get(kube, "CSINode", node)
    assert before is not None, f"node {node} has no CSINode"
    drivers = before["spec"].get("drivers") or []

    def restore() -> None:
        now = kinds.get(kube, "CSINode", node)
        if now is not None:
            now["spec"]["drivers"] = drivers
            kinds.replace(kube, now)

    cleanup.push(f"give CSINode {node} its driver back", restore)
    before["spec"]["drivers"] = [d for d in drivers if d.get("name") != driver]
    kinds.replace(kube, before)


def _create_volume_calls(ws: Workspace, claim: str) -> list[dict]:
    """The driver's CreateVolume calls for this claim's PV name (pvc-<claim uid>)."""
    uid = o.uid(ws.get("PersistentVolumeClaim", claim))
    log = csi.paths_for(ws.cluster.directory).calls_log if ws.cluster.directory else None
    if log is None or not Path(log).exists():
        pytest.skip(f"backend {ws.cluster.backend}: no pvchaos-csi calls log to read")
    calls = [json.loads(line) for line in Path(log).read_text().splitlines() if f"pvc-{uid}" in line]
    return [c for c in calls if c.get("method") == "CreateVolume"]


@allure.feature("CSI topology")
@allure.story("the selected node's CSINode lacks the driver: no topology key found, the claim waits")
@NEEDS_ATTACH
@pytest.mark.disruptive
def test_selected_node_without_the_driver_has_no_topology(ws: Workspace) -> None:
    node = ws.node()
    _without_driver(ws.cleanup, ws.kube, o.name(node), ws.driver.name)
    sc = ws.storage_class("topo", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",), node_selector=ws.pin(node)))
    failed = x.provisioning_failed(ws, "data", f"no topology key found for node {o.name(node)}")
    x.expect("error generating accessibility requirements" in str(failed.get("message")),
             "the external-provisioner's own words", failed, ws=ws)
    x.phase_now(ws, "PersistentVolumeClaim", "data", "Pending")


@allure.feature("CSI topology")
@allure.story("no CSINode carries the driver: an Immediate claim gets 'no available topology found'")
@NEEDS_ATTACH
@pytest.mark.disruptive
def test_no_node_with_the_driver_means_no_available_topology(ws: Workspace) -> None:
    for node in ws.nodes():
        _without_driver(ws.cleanup, ws.kube, o.name(node), ws.driver.name)
    sc = ws.storage_class("topo", "Immediate")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    x.provisioning_failed(ws, "data", "no available topology found")
    x.phase_now(ws, "PersistentVolumeClaim", "data", "Pending")
    x.explained_as(ws, "app", "NO_AVAILABLE_TOPOLOGY")


@allure.feature("CSI topology")
@allure.story("strict topology: CreateVolume may use only the selected node's segment; default: every allowed one")
@pytest.mark.parametrize("strict", [
    pytest.param(False, id="default", marks=pytest.mark.quick),
    pytest.param(True, id="strict", marks=pytest.mark.cluster(csi_strict_topology=True)),
])
@NEEDS_ATTACH
@pytest.mark.needs("pvchaos-csi-control")  # reads pvchaos-csi's calls log for the CreateVolume request
def test_strict_topology_narrows_the_requisite(ws: Workspace, strict: bool) -> None:
    zones = ws.zones()
    sc = ws.storage_class("topo", "WaitForFirstConsumer", allowed_zones=zones)
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",), node_selector={ZONE_KEY: zones[-1]}))
    x.pod_runs(ws, "app")
    x.volume_in_zone(ws, "data", zones[-1])
    calls = [c for c in _create_volume_calls(ws, "data") if c.get("code") == "OK"]
    x.expect(bool(calls), "the driver logged the CreateVolume that made the PV")
    requisite = (calls[-1].get("request") or {}).get("accessibility_requirements", {}).get("requisite") or []
    seen = {seg.get(ZONE_KEY) for seg in requisite if isinstance(seg, dict)}
    wanted = {zones[-1]} if strict else set(zones)
    x.expect(seen == wanted, f"requisite zones {sorted(z for z in seen if z)}, expected {sorted(wanted)} "
             f"({'strict' if strict else 'default'} topology)")


@allure.feature("Volume limits")
@allure.story("a node at its CSINode volume limit takes no pod needing another volume; another node does")
@NEEDS_ATTACH
@pytest.mark.cluster(csi_max_volumes_per_node=1)
@pytest.mark.exercises("volume-limits")
def test_node_at_its_volume_limit_takes_no_more(ws: Workspace) -> None:
    node = ws.node()
    sc = ws.storage_class("limit", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("first", "1Gi", sc))
    ws.create(b.pod("first", ("first",), node_selector=ws.pin(node)))
    x.pod_runs(ws, "first")
    ws.create(b.persistent_volume_claim("second", "1Gi", sc))
    x.claim_stays_pending(ws, "second", "WAIT_FOR_CONSUMER")  # in the caches before its pod
    ws.create(b.pod("second", ("second",), node_selector=ws.pin(node)))
    x.pod_unschedulable(ws, "second", "MAX_VOLUME_COUNT")
    x.explained_as(ws, "second", "VOLUME_LIMIT_EXCEEDED")
    ws.create(b.persistent_volume_claim("third", "1Gi", sc))
    ws.create(b.pod("third", ("third",)))
    x.pod_runs(ws, "third")
    other = x.node_of(ws, "third")
    x.expect(o.name(other) != o.name(node), f"the unpinned pod goes to a node with room, not {o.name(node)}",
             other, ws=ws)



MOST_TO_FILL = 24  # volumes one node is filled with on 2 cores (the example package reports 20)


@allure.feature("Volume limits")
@allure.story("the driver's own CSINode allocatable count is the node's limit: one volume more does not fit")
@pytest.mark.exercises("volume-limits")
def test_the_drivers_own_volume_limit_is_enforced(ws: Workspace) -> None:
    """Whatever limit the driver reports (NodeGetInfo max_volumes_per_node, written to the
    node's CSINode allocatable.count), the scheduler keeps the node from taking one more of
    its volumes (NodeVolumeLimits), also for a driver without attach: the filter counts the
    volumes the node's pods use. Not applicable to a driver that reports no limit."""
    node = ws.node()
    csinode = kinds.get(ws.kube, "CSINode", o.name(node)) or {}
    entry: dict = next((d for d in (csinode.get("spec") or {}).get("drivers") or [] if d.get("name") == ws.driver.name), {})
    limit = (entry.get("allocatable") or {}).get("count")
    if not limit:
        pytest.skip(f"driver {ws.driver.name}: not applicable: it reports no volume limit on {o.name(node)} "
                    f"(no CSINode allocatable.count: unlimited by the CSI spec)")
    if limit > MOST_TO_FILL:
        pytest.skip(f"driver {ws.driver.name}: its limit {limit} per node is more than this test fills "
                    f"({MOST_TO_FILL}) on one node")
    sc = ws.storage_class("limit", "WaitForFirstConsumer")
    pin = ws.pin(node)
    names = [f"v{i}" for i in range(limit)]
    ws.create_all(b.persistent_volume_claim(n, "1Gi", sc) for n in names)
    ws.create_all((b.pod(n, (n,), node_selector=pin) for n in names), parallel=4)
    for n in names:
        x.pod_runs(ws, n, timeout=180)
    measure.note("volume limit", limit)
    ws.create(b.persistent_volume_claim("one-more", "1Gi", sc))
    ws.create(b.pod("one-more", ("one-more",), node_selector=pin))
    x.pod_unschedulable(ws, "one-more", "MAX_VOLUME_COUNT")
    x.explained_as(ws, "one-more", "VOLUME_LIMIT_EXCEEDED")

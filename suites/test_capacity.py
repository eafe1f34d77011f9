"""Storage capacity tracking through CSI (SPEC, the CSI path): with `storageCapacity: true`
on the CSIDriver, upstream's external-provisioner publishes one CSIStorageCapacity per
class and topology segment from the driver's GetCapacity, and kube-scheduler's
VolumeBinding plugin keeps WaitForFirstConsumer pods off nodes whose segment has no room
("did not have enough free storage"). When the object is stale (it still says room, the
driver already says ResourceExhausted), the provisioner gives the claim back to the
scheduler and the pod ends elsewhere; with every zone full the pod stays Pending.
"""

from __future__ import annotations

import allure
import pytest

from pvchaos.api import Workspace, b, chaos_csi_capacity, o, x
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import ZONE_KEY
from pvchaos.kube.wait import wait_for_state

pytestmark = [allure.epic("The CSI path"), allure.feature("Capacity tracking"),
              # the capacity knobs are pvchaos-csi's control files (pvchaos/chaos/csi_control.py)
              pytest.mark.needs("attach", "dynamic-zonal", "zones", "pvchaos-csi-control"),
              pytest.mark.cluster(csi_capacity_tracking=True), pytest.mark.exercises("capacity")]

UNLIMITED = "1Ti"  # what pvchaos-csi reports for a zone its control file does not limit


def _capacities(state: dict[str, Obj], sc: str) -> list[Obj]:
    return [c for c in state.values() if c.get("storageClassName") == sc]


def _segment_zone(capacity: Obj) -> str | None:
    labels = (capacity.get("nodeTopology") or {}).get("matchLabels") or {}
    return labels.get(ZONE_KEY)


def _published(ws: Workspace, sc: str, zone: str, wanted: str, timeout: float = 60) -> list[Obj]:
    """Every CSIStorageCapacity of `sc` in `zone` says `wanted` (the sidecar polls GetCapacity)."""
    def ready(state: dict[str, Obj]) -> list[Obj] | None:
        mine = [c for c in _capacities(state, sc) if _segment_zone(c) == zone]
        return mine if mine and all(c.get("capacity") == wanted for c in mine) else None
    found: list[Obj] = wait_for_state(ws.kube, "CSIStorageCapacity", ready,
                                      f"CSIStorageCapacity of {sc} in {zone} = {wanted}", namespace=None,
                                      timeout=timeout)
    return found


@allure.story("one CSIStorageCapacity per class and node segment, following the driver's GetCapacity")
def test_capacity_objects_follow_the_driver(ws: Workspace) -> None:
    sc = ws.storage_class("cap", "WaitForFirstConsumer")
    zone = ws.zones()[0]
    nodes = len(ws.nodes())
    wait_for_state(ws.kube, "CSIStorageCapacity",
                   lambda st: True if len(_capacities(st, sc)) == nodes and all(
                       c.get("capacity") == UNLIMITED for c in _capacities(st, sc)) else None,
                   f"one CSIStorageCapacity of {sc} per node segment (zone + hostname keys), each {UNLIMITED}",
                   namespace=None, timeout=60)
    chaos_csi_capacity.set_zone_capacity(ws, zone, "5Gi")
    _published(ws, sc, zone, "5Gi")


@allure.story("a zone the driver reports full is filtered out for WaitForFirstConsumer pods")
@pytest.mark.quick
def test_full_zone_is_filtered_out(ws: Workspace) -> None:
    full = ws.zones()[0]
    sc = ws.storage_class("cap", "WaitForFirstConsumer")
    chaos_csi_capacity.set_zone_capacity(ws, full, "0")
    _published(ws, sc, full, "0")
    ws.create(b.persistent_volume_claim("pinned", "1Gi", sc))
    x.claim_stays_pending(ws, "pinned", "WAIT_FOR_CONSUMER")  # in the caches before its pod
    ws.create(b.pod("pinned", ("pinned",), node_selector={ZONE_KEY: full}))
    x.pod_unschedulable(ws, "pinned", "NOT_ENOUGH_STORAGE")
    ws.create(b.persistent_volume_claim("free", "1Gi", sc))
    ws.create(b.pod("free", ("free",)))
    x.pod_runs(ws, "free")
    node = x.node_of(ws, "free")
    x.expect(o.zone(node) != full, f"the unpinned pod avoids the full zone {full}", node, ws=ws)
    x.volume_in_zone(ws, "free", str(o.zone(node)))
    x.bindings_consistent(ws)


@allure.story("every zone full: the pod stays Pending with the upstream reason and nothing binds")
def test_every_zone_full_leaves_the_pod_pending(ws: Workspace) -> None:
    sc = ws.storage_class("cap", "WaitForFirstConsumer")
    for zone in ws.zones():
        chaos_csi_capacity.set_zone_capacity(ws, zone, "0")
    for zone in ws.zones():
        _published(ws, sc, zone, "0")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    x.claim_stays_pending(ws, "data", "WAIT_FOR_CONSUMER")  # in the caches before its pod
    ws.create(b.pod("app", ("data",)))
    x.pod_unschedulable(ws, "app", "NOT_ENOUGH_STORAGE")
    x.phase_now(ws, "PersistentVolumeClaim", "data", "Pending")
    x.bindings_consistent(ws)
    x.explained_as(ws, "app", "INSUFFICIENT_CAPACITY")


@allure.story("stale capacity: the object says room, the driver says ResourceExhausted; the pod ends elsewhere")
@pytest.mark.cluster(csi_capacity_tracking=True, csi_capacity_poll_seconds=30)
def test_stale_capacity_reschedules_to_another_zone(ws: Workspace) -> None:
    """The driver's capacity is cut after the object was published and before the sidecar
    polls again: CreateVolume answers ResourceExhausted for the selected node's zone, the
    external-provisioner removes selected-node (a reschedule), and once the object catches
    up the scheduler picks another zone (controller.go: ResourceExhausted with a selected
    node is not final)."""
    stale = ws.zones()[0]
    sc = ws.storage_class("cap", "WaitForFirstConsumer")
    _published(ws, sc, stale, UNLIMITED)
    chaos_csi_capacity.set_zone_capacity(ws, stale, "0")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    prefer = {"weight": 100, "preference": {"matchExpressions": [{"key": ZONE_KEY, "operator": "In",
                                                                   "values": [stale]}]}}
    ws.create(b.pod("app", ("data",), extra_spec={"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [prefer]}}}))
    failed = x.provisioning_failed(ws, "data", "ResourceExhausted", timeout=60)
    x.expect(stale in str(failed.get("message")), f"the driver refused the stale zone {stale}", failed, ws=ws)
    x.pod_runs(ws, "app", timeout=120)
    node = x.node_of(ws, "app")
    x.expect(o.zone(node) != stale, f"the pod ends outside {stale}, whose driver says it is full", node, ws=ws)
    x.volume_in_zone(ws, "data", str(o.zone(node)))
    x.bindings_consistent(ws)

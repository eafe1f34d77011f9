"""Attach and detach through CSI (SPEC, the CSI path): kube-controller-manager's
attach/detach controller creates a VolumeAttachment for each (volume, node) a scheduled
pod needs, upstream's external-attacher calls ControllerPublishVolume and sets
`status.attached`, and the pod's deletion detaches it again. After a node is lost with
a volume attached, a real kubelet has reported it in use, so the controller will not
detach it from the unhealthy node (a replacement elsewhere gets "Multi-Attach error")
until the node gets the `node.kubernetes.io/out-of-service` taint or
`maxWaitForUnmountDuration` (6 minutes) passes (reconciler.go in 1.35).
"""

from __future__ import annotations

import time

import allure
import pytest

from pvchaos.api import Workspace, b, chaos_labels, chaos_nodes, holds_for, measure, o, x
from pvchaos.chaos import pv_affinity as mut
from pvchaos.chaos.fault import Fault
from pvchaos.conformance.topology_class import TopologyClass
from pvchaos.kit.node_health import wait_node_ready, wait_node_unreachable
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import wait_for_event, wait_for_state

pytestmark = [allure.epic("The CSI path"), allure.feature("Attach and detach"), pytest.mark.needs("dynamic-zonal")]

MULTI_ATTACH = "Multi-Attach error"  # reconciler.go reportMultiAttachError: the FailedAttachVolume event


def _attachments_of(state: dict[str, Obj], pv: str) -> list[Obj]:
    return [va for va in state.values() if va.get("spec", {}).get("source", {}).get("persistentVolumeName") == pv]


def _attached_to(ws: Workspace, pv: str, node: str, timeout: float = 60) -> Obj:
    """The VolumeAttachment of `pv` to `node`, once the attacher says attached (a failure
    quotes the attacher's attachError, or names the attacher that never answered)."""
    return x.volume_attached(ws, pv, node, timeout)


def _detached(ws: Workspace, pv: str, node: str, timeout: float = 60) -> None:
    wait_for_state(ws.kube, "VolumeAttachment",
                   lambda st: True if not [va for va in _attachments_of(st, pv) if va["spec"].get("nodeName") == node]
                   else None, f"no VolumeAttachment of {pv} to {node}", timeout=timeout)


def _stays_attached(ws: Workspace, pv: str, node: str, seconds: float, what: str) -> None:
    with allure.step(f"for {seconds:.0f} s {what}"):
        holds_for(ws.kube, "VolumeAttachment",
                  lambda st: None if [va for va in _attachments_of(st, pv) if va["spec"].get("nodeName") == node]
                  else f"{pv} was detached from the lost node {node} while it was down, without the out-of-service taint",
                  seconds, f"{pv} stays attached to {node}")


@allure.story("a pod's volume: VolumeAttachment created, attached, pod Running; deleted with the pod")
@pytest.mark.needs("attach")
@pytest.mark.quick
def test_volume_attachment_timeline(ws: Workspace) -> None:
    sc = ws.storage_class("attach", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    t0 = time.monotonic()
    ws.create(b.pod("app", ("data",)))
    pod = x.pod_scheduled(ws, "app")
    pv = str(x.claim_bound(ws, "data")["spec"]["volumeName"])
    node = str(o.node_name(pod))
    va = _attached_to(ws, pv, node)
    measure.since("pod created to volume attached, seconds", t0)
    x.expect(va["spec"].get("attacher") == ws.cluster.zonal_class_provisioner,
             f"attached by the driver's attacher ({ws.cluster.zonal_class_provisioner})", va, ws=ws)
    x.pod_runs(ws, "app")
    t1 = time.monotonic()
    ws.delete("Pod", "app")
    _detached(ws, pv, node)
    measure.since("pod deleted to volume detached, seconds", t1)
    x.phase_now(ws, "PersistentVolumeClaim", "data", "Bound")


@allure.story("a driver that needs no attach: its volumes are used with no VolumeAttachment at all")
@pytest.mark.parametrize("attach_required", ["driver", pytest.param("asked", marks=[
    pytest.mark.cluster(csi_attach_required=False), pytest.mark.needs("pvchaos-csi-control")])])
def test_a_driver_without_attach_makes_no_volume_attachment(ws: Workspace, attach_required: str) -> None:
    """CSIDriver attachRequired false: the attach/detach controller skips the volume (no
    VolumeAttachment is created) and the pod runs. `driver`: the run's driver as it is
    (not applicable to one that attaches, as pvchaos-csi does by default); `asked`:
    pvchaos-csi run with attachRequired false, so the answer is seen on every run."""
    if ws.cluster.has("attach"):
        pytest.skip(f"driver {ws.driver.name}: not applicable: it attaches (CSIDriver attachRequired true)")
    ws.create(b.persistent_volume_claim("data", "1Gi", ws.storage_class("noattach", "WaitForFirstConsumer")))
    ws.create(b.pod("app", ("data",)))
    x.pod_runs(ws, "app", timeout=120)
    pv = str(x.claim_bound(ws, "data")["spec"]["volumeName"])
    with allure.step("for 5 s: no VolumeAttachment of the volume"):
        holds_for(ws.kube, "VolumeAttachment",
                  lambda st: f"VolumeAttachment {[o.name(v) for v in _attachments_of(st, pv)]} of {pv}, for a driver "
                             f"with attachRequired false" if _attachments_of(st, pv) else None,
                  5, f"no VolumeAttachment of {pv}")


def _lose_the_node_holding_the_volume(ws: Workspace) -> tuple[str, str, str, float, float, Fault]:
    """A writer on the first node of a zone with an RWO volume; that node is lost, the
    writer force-deleted, a replacement pinned to the second node of the zone gets
    "Multi-Attach error" (asserted, and named by `pvchaos explain`).
    Returns (pv, lost node, second node, writer deleted at, replacement created at, the
    node failure's handle)."""
    x.applies_to(ws, TopologyClass.ZONE)  # the replacement shares the lost node's zone, where the volume is
    home = ws.zones()[0]
    if len(ws.nodes(home)) < 2:
        pytest.skip(f"zone {home} has one node: the replacement needs another node of the volume's zone")
    sc = ws.storage_class("attach", "WaitForFirstConsumer", allowed_zones=[home])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    first, second = ws.node(home, 0), ws.node(home, 1)
    ws.create(b.pod("writer", ("data",), node_selector=ws.pin(first)))
    x.pod_runs(ws, "writer", timeout=120)
    pv = str(x.claim_bound(ws, "data")["spec"]["volumeName"])
    lost = o.name(first)
    _attached_to(ws, pv, lost)
    failed = chaos_nodes.fail_node(ws, lost)
    wait_node_unreachable(ws, lost, timeout=120)
    ws.delete("Pod", "writer", wait=False)  # force-deleted: the kubelet is gone
    deleted = time.monotonic()
    ws.create(b.pod("replacement", ("data",), node_selector=ws.pin(second)))
    created = time.monotonic()
    pod = ws.get("Pod", "replacement") or {}
    ev = wait_for_event(ws.kube, pod, MULTI_ATTACH, reason="FailedAttachVolume", timeout=90)
    x.expect(MULTI_ATTACH in str(ev.get("message")), "the replacement waits on the volume attached elsewhere", ev)
    x.explained_as(ws, "replacement", "MULTI_ATTACH")
    return pv, lost, o.name(second), deleted, created, failed


@allure.story("node lost with an RWO volume attached: Multi-Attach until the out-of-service taint, then it moves")
@pytest.mark.disruptive
@pytest.mark.needs("attach", "real-kubelet", "node-failure")
def test_lost_node_keeps_the_volume_until_the_out_of_service_taint(ws: Workspace) -> None:
    """Only a real kubelet reports the volume in use (node.status.volumesInUse); without
    that report the controller detaches at once, so on KWOK nodes this test skips."""
    pv, lost, second, _, t0, _ = _lose_the_node_holding_the_volume(ws)
    _stays_attached(ws, pv, lost, 20, "the volume stays attached to the lost node (no force detach before 6 minutes)")
    t1 = time.monotonic()
    chaos_labels.add_taint(ws, lost, chaos_labels.OUT_OF_SERVICE)
    _detached(ws, pv, lost, timeout=120)
    _attached_to(ws, pv, second, timeout=120)
    x.pod_runs(ws, "replacement", timeout=120)
    measure.since("Multi-Attach recovery with the out-of-service taint, seconds", t1)
    measure.since("replacement created to Running, seconds", t0)


FORCE_DETACH_S = 360.0  # attachdetach reconciler: maxWaitForUnmountDuration, 6 minutes in 1.35
FORCE_DETACH_SLACK_S = 90.0  # the reconciler's loop, the attacher's call, the replacement's attach


@allure.story("node lost with an RWO volume attached, no taint: the controller force-detaches after 6 minutes")
@pytest.mark.disruptive
@pytest.mark.long
@pytest.mark.needs("attach", "real-kubelet", "node-failure")
def test_lost_node_releases_the_volume_after_the_six_minute_force_detach(ws: Workspace) -> None:
    """Without the out-of-service taint the attach/detach controller waits
    maxWaitForUnmountDuration (6 minutes from the detach request, i.e. the writer's
    deletion) before it detaches from an unhealthy node. Marked `long`: runs only with
    `--long` (the default run asserts only "not detached within 20 s", above)."""
    pv, lost, second, deleted, created, _ = _lose_the_node_holding_the_volume(ws)
    _detached(ws, pv, lost, timeout=FORCE_DETACH_S + FORCE_DETACH_SLACK_S)
    waited = time.monotonic() - deleted
    x.expect(waited >= FORCE_DETACH_S - 10,
             f"detached from the lost node {lost} {waited:.0f} s after the writer's deletion: before the controller's "
             f"{FORCE_DETACH_S:.0f} s force-detach wait, so something else detached it")
    _attached_to(ws, pv, second, timeout=120)
    x.pod_runs(ws, "replacement", timeout=120)
    measure.seconds("Multi-Attach recovery without the out-of-service taint, seconds", waited)
    measure.since("replacement created to Running, seconds", created)


@allure.story("node lost, its pod force-deleted: the VolumeAttachment goes stale; the node's return clears it")
@pytest.mark.disruptive
@pytest.mark.needs("attach", "real-kubelet", "node-failure")
def test_returning_node_clears_the_stale_volume_attachment(ws: Workspace) -> None:
    """After the writer is force-deleted on a lost node, its VolumeAttachment is stale:
    no pod uses the volume there, but the node's last status still lists it in
    `volumesInUse`, so the attach/detach controller keeps it (and the replacement gets
    Multi-Attach). What clears it before the 6-minute force detach is the node's return:
    its kubelet finds no pod for the volume, reports it no longer in use, and the
    controller detaches; the replacement then attaches on the other node."""
    pv, lost, second, deleted, _, failed = _lose_the_node_holding_the_volume(ws)
    x.expect(ws.get("Pod", "writer") is None, "the writer pod object is gone (force-deleted)", ws=ws)
    _stays_attached(ws, pv, lost, 15, "the attachment to the lost node stays, with no pod using it there")
    returned = time.monotonic()
    failed.restore()
    wait_node_ready(ws, lost, timeout=180)
    _detached(ws, pv, lost, timeout=180)
    measure.since("stale VolumeAttachment cleared after the node's return, seconds", returned)
    x.expect(time.monotonic() - deleted < FORCE_DETACH_S,
             f"the returning node's kubelet, not the controller's {FORCE_DETACH_S:.0f} s force detach, released {pv}")
    _attached_to(ws, pv, second, timeout=120)
    x.pod_runs(ws, "replacement", timeout=120)


@allure.story("a PV's affinity moved to another node without its data: the driver refuses the attach; explain names it")
# pvchaos-csi refuses to attach a node-local volume where its data is not; another driver may not
@pytest.mark.needs("attach", "dynamic-local", "mutable-pv-affinity", "pvchaos-csi-control")
def test_attach_the_driver_refuses_is_explained(ws: Workspace) -> None:
    """The half-done move of KEP-5381's maintenance scenario: the PV of a node-local
    volume is re-pointed at another node (the gate allows it) but nobody moved the data,
    so the scheduler places the pod there, the attach/detach controller asks to attach,
    and the driver's ControllerPublishVolume answers FailedPrecondition: FailedAttachVolume,
    and the VolumeAttachment's attachError. On a real kubelet the pod stays in
    ContainerCreating and `pvchaos explain` says ATTACH_FAILED (a KWOK node runs it anyway)."""
    pv, _, target = x.node_local_volume_released(ws)
    if target is None:
        pytest.skip("one worker node: the PV has nowhere else to point")
    mut.replace_affinity(ws.kube, pv, {"required": b.node_selector_terms(
        [(o.ZONE_KEY, "In", [str(o.zone(target))]), (o.HOSTNAME_KEY, "In", [o.hostname(target)])])})
    ws.create(b.pod("second", ("data",)))
    pod = x.pod_scheduled(ws, "second")
    x.expect(o.node_name(pod) == o.name(target), f"the scheduler follows the PV's new affinity to {o.name(target)}",
             pod, ws=ws)
    ev = wait_for_event(ws.kube, pod, "is local to node", reason="FailedAttachVolume", timeout=120)
    x.expect("FailedPrecondition" in str(ev.get("message")), "the driver's FailedPrecondition reaches the event", ev)
    target_node = o.name(target)
    wait_for_state(ws.kube, "VolumeAttachment",
                   lambda st: next((va for va in _attachments_of(st, pv) if va["spec"].get("nodeName") == target_node
                                    and "FailedPrecondition" in str(va.get("status", {}).get("attachError", {}))), None),
                   f"the VolumeAttachment of {pv} to {target_node} carries the driver's error", timeout=60)
    if ws.cluster.has("real-kubelet"):  # a KWOK node runs the pod whatever the attach says; a kubelet waits
        x.explained_as(ws, "second", "ATTACH_FAILED")

"""What only a real kubelet shows (kind): a pod really writes to its node-local volume,
the node crashes and boots again, and the pod runs again on the same data; and the
real-data move of KEP-5381's maintenance scenario: the node is drained and lost, the
storage system (the driver's operator step) copies the volume to another node, the PV's
nodeAffinity is changed to that node, and the pod reads the same bytes there. With the
MutablePVNodeAffinity gate off the same flow is refused and the pod stays Pending.

KWOK nodes mount nothing and run no container, so this suite skips on the local backend
("backend local: no real-kubelet").
"""

from __future__ import annotations

from datetime import UTC, datetime

import allure
import pytest

from pvchaos.chaos import csi_moves, csi_node_plugin
from pvchaos.chaos import labels as chaos_labels
from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.chaos import pv_affinity as mut
from pvchaos.clusters.backend import NodeStorageFaults
from pvchaos.conformance import messages
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.node_health import wait_node_ready, wait_node_unreachable
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.errors import ApiError
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import HOSTNAME_KEY, ZONE_KEY
from pvchaos.kube.poll import poll_until
from pvchaos.kube.wait import holds_for, wait_for, wait_for_event, wait_for_state

pytestmark = [allure.epic("Real kubelets"), pytest.mark.disruptive, pytest.mark.needs("real-kubelet", "node-failure")]

TEST_IMAGE = "pvchaos.local/busybox:1"  # built into the kind node image (tools/nodeimage)
# Writes a marker once (the first start), keeps it afterwards, and prints what it found.
WRITER = ("test -f /data/0/marker || (cat /proc/sys/kernel/random/uuid > /data/0/marker); "
          "cat /data/0/marker; exec sleep 3600")


def _running_since(o: Obj | None) -> datetime | None:
    """When the pod's container last started, if it runs now."""
    statuses = ((o or {}).get("status") or {}).get("containerStatuses") or []
    started = ((statuses[0].get("state") or {}).get("running") or {}).get("startedAt") if statuses else None
    return datetime.fromisoformat(started.replace("Z", "+00:00")) if started else None


@allure.feature("Node-local data across a node crash")
@allure.story("The file a pod wrote is there when the pod runs again after its node crashed and returned")
@pytest.mark.needs("dynamic-zonal")
def test_local_volume_data_survives_node_crash_and_return(ws: Workspace) -> None:
    """Any volume of the driver (its default class: node-local, zonal, or without topology):
    the pod stays bound to its node, and after the crash its new container reads the bytes
    it wrote before, through the volume."""
    sc = ws.storage_class("crash")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    writer = b.pod("writer", ("data",))
    writer["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": ["sh", "-c", WRITER]})
    ws.create(writer)
    pod = x.pod_runs(ws, "writer", timeout=120)
    node = pod["spec"]["nodeName"]
    written = _first_line(ws, "writer")  # the marker, as the pod read it from its volume
    x.expect(len(written) == 36, f"the pod wrote its marker into its volume on {node}: read {written!r}", pod, ws=ws)

    crashed_at = datetime.now(UTC).replace(microsecond=0)
    crashed = chaos_nodes.crash_node(ws, node)
    wait_node_unreachable(ws, node)
    crashed.restore()
    wait_node_ready(ws, node, timeout=120)
    again = wait_for(ws.kube, "Pod", "writer", lambda o: (_running_since(o) or crashed_at) > crashed_at,
                     "its container started again after the crash", ws.namespace, 120)
    x.expect(again["spec"]["nodeName"] == node, f"the pod stays on {node}, where its data is", again, ws=ws)
    # a log cannot be watched: polled, bounded
    read = poll_until(lambda: _first_line(ws, "writer") or None, 60, "the new container printed what it read",
                      interval=1.0)
    x.expect(read == written, f"the new container reads the marker written before the crash ({written}) through "
             f"its volume, not {read!r}", again, ws=ws)
    measure.note("restarts", again["status"]["containerStatuses"][0]["restartCount"])


def _first_line(ws: Workspace, pod: str) -> str:
    """The first line the pod's running container printed (the WRITER prints its marker)."""
    text = kinds.pod_log(ws.kube, pod, ws.namespace)
    return text.splitlines()[0].strip() if text.strip() else ""


def _node_storage(ws: Workspace) -> NodeStorageFaults:
    """The node's filesystem side of the backend (kind; the module needs real-kubelet)."""
    faults = ws.cluster.faults
    assert isinstance(faults, NodeStorageFaults), f"backend {ws.cluster.backend}: no node filesystem to read"
    return faults


# Writes 64 KiB of random bytes once (the first start) and keeps them; prints their checksum.
PAYLOAD_WRITER = ("test -f /data/payload || head -c 65536 /dev/urandom > /data/payload; "
                  "sha256sum /data/payload; exec sleep 3600")


def _checksum(ws: Workspace, node: str, path: str) -> str:
    """The payload's checksum in the node's directory, or "no payload" where there is none
    (a node plugin that never put the pod's writes there)."""
    return _node_storage(ws).node_exec(node, f"sha256sum {path}/payload 2>/dev/null || echo no-payload").split()[0]


def _payload_read_by(ws: Workspace, pod: str) -> str:
    """The checksum of the payload as the pod itself read it through its volume (the
    writer prints it at each start): a node directory only shows what lies there, not
    what the kubelet mounted into the pod."""
    def seen() -> str | None:
        lines = [ln.split() for ln in kinds.pod_log(ws.kube, pod, ws.namespace).splitlines()]
        return next((parts[0] for parts in lines if len(parts) == 2 and parts[1] == "/data/payload"), None)
    return poll_until(seen, 30, f"pod {pod} prints the checksum of the payload it reads", interval=0.5)


def _drain_and_move(ws: Workspace) -> tuple[Obj, str, str, str, Obj]:
    """A one-replica StatefulSet on a node-local CSI volume writes its payload; its node is
    drained (cordoned, the pod deleted; the StatefulSet's new pod waits, its volume pinned
    there) and lost; the operator copies the volume to another node. Returns (the PV,
    the payload's checksum, the old node, the new node, the new node's object)."""
    sts = b.statefulset("db", 1, ws.local_class())
    sts["spec"]["template"]["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": ["sh", "-c", PAYLOAD_WRITER]})
    ws.create(sts)
    x.statefulset_ready(ws, "db", 1, timeout=180)
    old = str(o.node_name(ws.get("Pod", "db-0")))
    claim = ws.get("PersistentVolumeClaim", "data-db-0") or {}
    pv = ws.get("PersistentVolume", claim["spec"]["volumeName"]) or {}
    path = str(_node_storage(ws).volume_dir(pv) or "")
    x.expect(bool(path), "the node-local PV's data is a directory on its node", pv, ws=ws)
    before = _payload_read_by(ws, "db-0")
    on_node = _checksum(ws, old, path)
    x.expect(on_node == before, f"the pod's volume is {path} on {old}: the pod read sha256 {before}, the node's "
             f"directory holds {on_node}", pv, ws=ws)
    old_zone = o.zone(ws.get("Node", old) or {})
    others = [n for n in ws.nodes() if o.name(n) != old]
    target = next((n for n in others if o.zone(n) == old_zone), others[0] if others else None)
    if target is None:
        pytest.skip("one worker node: the volume has nowhere to move")
    with allure.step(f"drain {old}: cordon it and delete the pod"):
        chaos_labels.cordon(ws, old)
        uid = o.uid(ws.get("Pod", "db-0") or {})
        ws.delete("Pod", "db-0", wait=False)  # the StatefulSet makes a new db-0 at once
        wait_for(ws.kube, "Pod", "db-0", lambda p: o.uid(p) != uid, "the StatefulSet's new pod", ws.namespace, 60)
    x.pod_unschedulable(ws, "db-0", timeout=60)
    name = o.name(pv)
    wait_for_state(ws.kube, "VolumeAttachment",
                   lambda st: None if any(va["spec"].get("nodeName") == old
                                          and va["spec"].get("source", {}).get("persistentVolumeName") == name
                                          for va in st.values()) else True,
                   f"no VolumeAttachment of {name} to {old} (detached by the drain)", timeout=120)
    csi_moves.move_local_volume(ws, pv["spec"]["csi"]["volumeHandle"], path, old, o.name(target),
                                o.hostname(target))
    x.expect(_checksum(ws, o.name(target), path) == before, f"the copy on {o.name(target)} has the payload's bytes",
             pv, ws=ws)
    chaos_nodes.crash_node(ws, old)
    wait_node_unreachable(ws, old)
    return pv, before, old, path, target


def _affinity_of(node: Obj) -> Obj:
    return {"required": b.node_selector_terms([(ZONE_KEY, "In", [str(o.zone(node))]),
                                               (HOSTNAME_KEY, "In", [o.hostname(node)])])}


@allure.feature("The real-data move (KEP-5381, maintenance)")
@allure.story("node drained and lost; the volume's data copied to another node; the PV's affinity follows; same bytes")
# (the move goes through pvchaos-csi's control file)
@pytest.mark.needs("mutable-pv-affinity", "pvchaos-csi-control", "dynamic-local")
@pytest.mark.quick
def test_moved_volume_brings_the_pod_back_with_the_same_bytes(ws: Workspace) -> None:
    pv, before, old, path, target = _drain_and_move(ws)
    mut.replace_affinity(ws.kube, o.name(pv), _affinity_of(target))
    pod = x.pod_runs(ws, "db-0", timeout=180)
    x.expect(o.node_name(pod) == o.name(target), f"the pod comes back on {o.name(target)}, where the data was moved",
             pod, ws=ws)
    x.expect(_payload_read_by(ws, "db-0") == before,
             f"the payload the pod reads on {o.name(target)} is the one it wrote on {old} (sha256 {before})", pod, ws=ws)
    x.phase_now(ws, "PersistentVolume", o.name(pv), "Bound")


@allure.feature("The real-data move (KEP-5381, maintenance)")
@allure.story("gate off: the PV's affinity cannot follow the moved data; the pod stays Pending")
@pytest.mark.cluster(feature_gates={"MutablePVNodeAffinity": False})
@pytest.mark.needs("pvchaos-csi-control", "dynamic-local")
def test_moved_volume_without_the_gate_leaves_the_pod_pending(ws: Workspace) -> None:
    pv, _, old, _, target = _drain_and_move(ws)
    try:
        mut.replace_affinity(ws.kube, o.name(pv), _affinity_of(target))
    except ApiError as exc:
        x.expect(exc.status == 422 and messages.expected("FIELD_IMMUTABLE", ws.cluster.minor) in (exc.body or ""),
                 f"the update is refused as immutable (HTTP 422), got HTTP {exc.status}: {exc.body}")
    else:
        x.expect(False, f"the API server refuses a change of PV {o.name(pv)}'s nodeAffinity with the gate off: it "
                 f"accepted it (is MutablePVNodeAffinity off in kube-apiserver?)", ws.get("PersistentVolume", o.name(pv)))
    with allure.step(f"for 20 s the pod stays Pending: its PV still points at the lost node {old}"):
        holds_for(ws.kube, "Pod", lambda st: next((f"pod db-0 was scheduled to {o.node_name(p)}" for p in st.values()
                                                   if o.name(p) == "db-0" and o.node_name(p)), None),
                  20, "db-0 unscheduled", ws.namespace)


# ---- what a real kubelet reports when a volume cannot be set up (pvchaos explain) ---------

@allure.feature("Volume setup failures, explained")
@allure.story("moved without its data: attached, but the node plugin refuses to stage it; explain says MOUNT_FAILED")
@pytest.mark.needs("mutable-pv-affinity", "pvchaos-csi-control", "dynamic-local")
def test_move_without_the_copy_fails_the_mount_and_is_explained(ws: Workspace) -> None:
    """The operator recorded the move and the PV follows it, but the copy never happened:
    the controller attaches the volume to the new node, and the kubelet's MountDevice
    (NodeStageVolume) gets the node plugin's FailedPrecondition: FailedMount."""
    pv_name, home, target = x.node_local_volume_released(ws)
    if target is None:
        pytest.skip("one worker node: the PV has nowhere else to point")
    pv = ws.get("PersistentVolume", pv_name) or {}
    csi_moves.move_local_volume(ws, pv["spec"]["csi"]["volumeHandle"], str(_node_storage(ws).volume_dir(pv)),
                                home, o.name(target), o.hostname(target), copy_data=False)
    mut.replace_affinity(ws.kube, pv_name, _affinity_of(target))
    ws.create(b.pod("second", ("data",)))
    pod = x.pod_scheduled(ws, "second", timeout=60)
    ev = wait_for_event(ws.kube, pod, "no copy was moved here", reason="FailedMount", timeout=180)
    x.expect("FailedPrecondition" in str(ev.get("message")), "the node plugin's FailedPrecondition reaches the event", ev)
    x.explained_as(ws, "second", "MOUNT_FAILED")


@allure.feature("Volume setup failures, explained")
@allure.story("the node plugin is gone from the node: a second pod cannot mount; explain says CSI_DRIVER_NOT_REGISTERED")
@pytest.mark.needs("pvchaos-csi-control", "dynamic-local")  # stops pvchaos-csi's node plugin unit in the node
def test_node_plugin_gone_leaves_the_pod_in_container_creating(ws: Workspace) -> None:
    """A pod runs with its volume; the node plugin on its node stops and deregisters (its
    CSINode loses the driver). A second pod of the same claim on the same node needs no new
    attach or stage, only NodePublishVolume, and the kubelet has no driver to call:
    `driver name ... not found in the list of registered CSI drivers`, and the pod stays
    ContainerCreating (20 s watched) while the plugin is gone."""
    ws.create(b.persistent_volume_claim("data", "1Gi", ws.local_class()))
    ws.create(b.pod("first", ("data",)))
    node = str(o.node_name(x.pod_runs(ws, "first", timeout=120)))
    csi_node_plugin.stop_node_plugin(ws, node)
    driver = ws.cluster.zonal_class_provisioner
    wait_for(ws.kube, "CSINode", node,
             lambda c: not any(d.get("name") == driver for d in (c.get("spec") or {}).get("drivers") or []),
             f"CSINode {node} without {driver} (the kubelet deregistered it)", None, 90)
    ws.create(b.pod("second", ("data",), node_selector=ws.pin(ws.get("Node", node) or {})))
    pod = x.pod_scheduled(ws, "second", timeout=60)
    wait_for_event(ws.kube, pod, "not found in the list of registered CSI drivers", reason="FailedMount", timeout=120)
    with allure.step(f"for 20 s the second pod stays ContainerCreating: no driver on {node} to publish its volume"):
        # the kubelet retries the mount with a backoff of 0.5 s doubling: a plugin that comes
        # back (registers again) within the window lets the pod start, and that is not "gone"
        holds_for(ws.kube, "Pod", lambda st: next((f"pod second runs on {node}: its volume was published, so the node "
                                                   f"plugin is registered there again" for p in st.values()
                                                   if o.name(p) == "second" and o.phase(p) == "Running"), None),
                  20, "second not Running", ws.namespace)
    x.explained_as(ws, "second", "CSI_DRIVER_NOT_REGISTERED")

"""Snapshots, restores and clones, from the scheduling side (issue 37): where a restored or
cloned volume lands, what a pod pinned elsewhere gets, and which objects outlive which.

Upstream's components do the work: the snapshot-controller binds a VolumeSnapshot to its
content, the driver's csi-snapshotter cuts it (CreateSnapshot), and the external-provisioner
turns a claim whose `dataSource` is a VolumeSnapshot or a claim into CreateVolume with a
content source. Where the copy may go is the driver's answer to the provisioner's
accessibility requirements: pvchaos-csi keeps a copy in its source's zone or node
(docs/csi-driver.md), a cloud driver may restore a snapshot in any zone. So a test asserts
what holds for every driver (the pod runs where its volume is, the bytes are the source's,
an impossible placement is explained), and pvchaos-csi's own placement only for it
(capability pvchaos-csi-control). Bytes are compared on real kubelets only: KWOK nodes
mount nothing.
"""

from __future__ import annotations

import time

import allure
import pytest

from pvchaos.chaos.csi_calls import calls, csi_call_fault
from pvchaos.clusters.csi import SNAPSHOT_ORPHAN_SWEEP_SECONDS, UPSTREAM_SNAPSHOT_ORPHAN_SWEEP_SECONDS
from pvchaos.conformance import messages
from pvchaos.conformance import topology_class as tc
from pvchaos.conformance.topology_class import TopologyClass
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj
from pvchaos.kube.poll import poll_until
from pvchaos.kube.wait import holds_for, wait_for_event, wait_gone

pytestmark = [allure.epic("Snapshots and clones"), pytest.mark.needs("dynamic-zonal")]

TEST_IMAGE = "pvchaos.local/busybox:1"  # built into the kind node image (tools/nodeimage)
# Writes 64 KiB of random bytes once and prints their checksum; a reader prints the checksum it finds.
WRITER = ("test -f /data/0/payload || head -c 65536 /dev/urandom > /data/0/payload; sync; "
          "sha256sum /data/0/payload; exec sleep 3600")
READER = "sha256sum /data/0/payload || echo missing /data/0/payload; exec sleep 3600"
PINNING = (TopologyClass.ZONE, TopologyClass.NODE, TopologyClass.REGION, TopologyClass.GROUP)
READY_TIMEOUT = 90.0
DELETE_SNAPSHOT = "/csi.v1.Controller/DeleteSnapshot"
CONTENT_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
MANAGED_BY = "snapshot.storage.kubernetes.io/managed-by"  # distributed snapshotting's content label


def _shell_pod(ws: Workspace, name: str, claim: str, script: str, node_selector: dict[str, str] | None = None) -> Obj:
    pod = b.pod(name, (claim,), node_selector=node_selector)
    if ws.cluster.has("real-kubelet"):
        pod["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": ["sh", "-c", script]})
    return ws.create(pod)


def _checksum(ws: Workspace, pod: str) -> str | None:
    """The payload's checksum as the pod read it through its volume (real kubelets only)."""
    if not ws.cluster.has("real-kubelet"):
        return None

    def printed() -> str | None:
        lines = [ln.split() for ln in kinds.pod_log(ws.kube, pod, ws.namespace).splitlines()]
        return next((p[0] for p in lines if len(p) == 2 and p[1] == "/data/0/payload"), None)
    return poll_until(printed, 30, f"pod {pod} prints the checksum of /data/0/payload", interval=0.5)


def _source(ws: Workspace) -> tuple[str, str, str | None]:
    """A claim of the driver's class written by a pod on the first node of the first
    domain; returns (class, that domain, the payload's checksum)."""
    topo = ws.topology()
    sc = ws.storage_class("snap-src")
    ws.create(b.persistent_volume_claim("source", "1Gi", sc))
    first = ws.node()
    _shell_pod(ws, "writer", "source", WRITER, ws.pin(first))
    x.pod_runs(ws, "writer", timeout=120)
    domain = topo.domain_of(o.name(first)) if topo.key else ""
    return sc, domain, _checksum(ws, "writer")


def _restored_claim(ws: Workspace, name: str, sc: str, kind: str, source: str) -> None:
    ws.create(b.with_data_source(b.persistent_volume_claim(name, "1Gi", sc), kind, source))


def _copy_is_read(ws: Workspace, claim: str, sc: str, kind: str, source: str, domain: str, written: str | None,
                  what: str) -> None:
    """A claim made from `source`, read by an unpinned pod (the scheduler and the copy
    decide where): the pod runs where the copy is, the copy lands where the driver puts
    copies, and on real kubelets it holds the bytes written before (`written`)."""
    _restored_claim(ws, claim, sc, kind, source)
    _shell_pod(ws, "reader", claim, READER)
    x.pod_runs(ws, "reader", timeout=120)
    x.runs_where_its_volume_is(ws, "reader", claim)
    _lands_with_its_source(ws, claim, domain)
    read = _checksum(ws, "reader")
    x.expect(read == written, f"{what} holds the source's bytes (sha256 {written}), read {read}",
             ws.get("Pod", "reader"), ws=ws)


def _lands_with_its_source(ws: Workspace, claim: str, domain: str) -> None:
    """pvchaos-csi keeps a copy in its source's domain; for another driver where the copy
    went is recorded, not asserted (a cloud snapshot may be restored in any zone)."""
    topo = ws.topology()
    if not topo.key:
        return
    if ws.cluster.has("pvchaos-csi-control"):
        x.volume_within(ws, claim, [domain])
    else:
        _, where = x.volume_pinned(ws, claim)
        measure.note(f"{claim}: in the source's {topo.key}", str(where == domain).lower())


@allure.feature("Snapshots")
@allure.story("a restore holds the source's bytes, and its pod runs where the restored volume is")
@pytest.mark.needs("snapshots")
@pytest.mark.quick
def test_restore_has_the_source_bytes_and_its_pod_follows_the_volume(ws: Workspace) -> None:
    sc, domain, written = _source(ws)
    x.snapshot_ready(ws, "snap", "source", ws.snapshot_class(), READY_TIMEOUT)
    _copy_is_read(ws, "restored", sc, "VolumeSnapshot", "snap", domain, written,
                  "the restored volume (what the source had when it was snapshotted)")


@allure.feature("Snapshots")
@allure.story("a restore for a pod pinned to another domain: placed there, or Pending with the reason")
@pytest.mark.needs("snapshots", "zones")
def test_restore_for_a_pod_pinned_elsewhere(ws: Workspace) -> None:
    """The incident: a snapshot of a zone-a volume restored for a pod that must run in
    zone-b. With WaitForFirstConsumer the provisioner asks for the pinned node's domain first
    but (without --strict-topology) allows every domain; a driver whose copy stays with its
    source puts the volume in zone-a, and the pod can then never run (volume node affinity
    conflict, explained as POD_PINNED_AWAY_FROM_VOLUME). A driver that restores across zones
    runs the pod in zone-b; one that refuses says ProvisioningFailed. No other outcome is right."""
    x.applies_to(ws, *PINNING)
    sc, domain, _ = _source(ws)
    x.snapshot_ready(ws, "snap", "source", ws.snapshot_class(), READY_TIMEOUT)
    _copy_for_a_pod_pinned_elsewhere(ws, sc, domain, "VolumeSnapshot", "snap")


@allure.feature("Clones")
@allure.story("a clone for a pod pinned to another domain: placed there, or Pending with the reason")
@pytest.mark.needs("clones", "zones")
def test_clone_for_a_pod_pinned_elsewhere(ws: Workspace) -> None:
    """The restore's incident with a clone: a claim cloned from a zone-a claim for a pod that
    must run in zone-b. The same three honest outcomes; pvchaos-csi keeps the clone with
    its source (a volume node affinity conflict, explained as POD_PINNED_AWAY_FROM_VOLUME)."""
    x.applies_to(ws, *PINNING)
    sc, domain, _ = _source(ws)
    _copy_for_a_pod_pinned_elsewhere(ws, sc, domain, "PersistentVolumeClaim", "source")


def _copy_for_a_pod_pinned_elsewhere(ws: Workspace, sc: str, domain: str, kind: str, source: str) -> None:
    """A claim copied from `source` (a snapshot or a claim of `domain`) for a pod limited to
    another domain: pvchaos-csi's copy stays with its source and the pod never runs, the
    explain code says why; another driver's outcome is one of the three honest ones."""
    topo = ws.topology()
    assert topo.key is not None
    other = next(v for v in topo.domains if v != domain)
    _restored_claim(ws, "restored", sc, kind, source)
    with allure.step(f"a pod limited to {topo.key}={other}, the {kind} {source}'s source in {domain}"):
        _shell_pod(ws, "reader", "restored", READER, {topo.key: other})
    if ws.cluster.has("pvchaos-csi-control"):
        x.volume_within(ws, "restored", [domain])
        x.pod_unschedulable(ws, "reader", "NODE_AFFINITY_CONFLICT", timeout=90)
        holds_for(ws.kube, "Pod", lambda s: next((f"pod reader runs on {o.node_name(p)}" for p in s.values()
                                                  if o.name(p) == "reader" and o.node_name(p)), None),
                  5, "the pinned pod stays unscheduled", ws.namespace)
        x.explained_as(ws, "reader", "POD_PINNED_AWAY_FROM_VOLUME")
        return
    outcome = _pinned_restore_outcome(ws, "reader", "restored", other)
    measure.note("outcome", outcome)


def _pinned_restore_outcome(ws: Workspace, pod: str, claim: str, other: str) -> str:
    """Which of the three honest outcomes a vendor's driver gave (waits for one, bounded)."""
    def seen() -> str | None:
        p = ws.get("Pod", pod) or {}
        if o.phase(p) == "Running":
            return "restored-in-the-pinned-domain"
        for event in kinds.events_for(ws.kube, p):
            if event.get("reason") == "FailedScheduling" and messages.matches(
                    "NODE_AFFINITY_CONFLICT", event.get("message", ""), ws.cluster.minor):
                return "volume-node-affinity-conflict"
        c = ws.get("PersistentVolumeClaim", claim) or {"metadata": {"name": claim, "namespace": ws.namespace}}
        c.setdefault("kind", "PersistentVolumeClaim")
        if any(e.get("reason") == "ProvisioningFailed" for e in kinds.events_for(ws.kube, c)):
            return "provisioning-failed"
        return None
    outcome = poll_until(seen, 120, f"pod {pod} runs in {other}, or the scheduler or the provisioner says why not",
                         interval=1.0)
    if outcome == "restored-in-the-pinned-domain":
        x.runs_where_its_volume_is(ws, pod, claim)
    return outcome


@allure.feature("Snapshots")
@allure.story("a node-local volume's snapshot is cut on its node and restored there; a pod pinned elsewhere is told why")
@pytest.mark.needs("snapshots", "dynamic-local", "real-kubelet")
@pytest.mark.cluster(csi_node_snapshots=True)
def test_node_local_snapshot_is_cut_and_restored_on_its_node(ws: Workspace) -> None:
    """Upstream's distributed snapshotting, the way to snapshot a volume only its node can
    read: the snapshot-controller (--enable-distributed-snapshotting) labels the content
    with the first node matching the source PV's nodeAffinity, and only that node's
    csi-snapshotter (--node-deployment) cuts it. The restore of a node-local snapshot
    follows its source for pvchaos-csi (the copy is on that node's disk): an unpinned
    reader runs there with the source's bytes, and a pod pinned to another node never runs
    (volume node affinity conflict, explained as POD_PINNED_AWAY_FROM_VOLUME). For another
    driver where the restore went is recorded, and the pinned pod gets one of the three
    honest outcomes."""
    sc = ws.local_class("snap-local")
    ws.create(b.persistent_volume_claim("source", "1Gi", sc))
    first, second = ws.node(), ws.node(index=1)
    node = o.name(first)
    _shell_pod(ws, "writer", "source", WRITER, ws.pin(first))
    x.pod_runs(ws, "writer", timeout=120)
    written = _checksum(ws, "writer")
    snap = x.snapshot_ready(ws, "snap", "source", ws.snapshot_class(), READY_TIMEOUT)
    content = ws.get("VolumeSnapshotContent", snap["status"]["boundVolumeSnapshotContentName"]) or {}
    managed = (content.get("metadata", {}).get("labels") or {}).get(MANAGED_BY)
    x.expect(managed == node, f"VolumeSnapshotContent {o.name(content)} is labelled {MANAGED_BY}={managed}; the "
             f"snapshot-controller labels it with the node matching the source PV's nodeAffinity, {node}",
             content, ws=ws)

    _restored_claim(ws, "restored", sc, "VolumeSnapshot", "snap")
    _shell_pod(ws, "reader", "restored", READER)
    x.pod_runs(ws, "reader", timeout=120)
    x.runs_where_its_volume_is(ws, "reader", "restored")
    allowed = tc.allowed_nodes(x.bound_volume(ws, "restored"), ws.nodes())
    if ws.cluster.has("pvchaos-csi-control"):
        x.expect(allowed == {node}, f"the restore of a node-local snapshot of {node} is local to {node}, its PV "
                 f"allows {sorted(allowed)}", x.bound_volume(ws, "restored"), ws=ws)
    else:
        measure.note("restored: on the source's node", str(allowed == {node}).lower())
    read = _checksum(ws, "reader")
    x.expect(read == written, f"the restored node-local volume holds the source's bytes (sha256 {written}), read "
             f"{read}", ws.get("Pod", "reader"), ws=ws)

    other = o.name(second)
    _restored_claim(ws, "elsewhere", sc, "VolumeSnapshot", "snap")
    with allure.step(f"a restore for a pod pinned to {other}, the snapshot's source on {node}"):
        _shell_pod(ws, "stranger", "elsewhere", READER, ws.pin(second))
    if ws.cluster.has("pvchaos-csi-control"):
        x.pod_unschedulable(ws, "stranger", "NODE_AFFINITY_CONFLICT", timeout=90)
        x.expect(tc.allowed_nodes(x.bound_volume(ws, "elsewhere"), ws.nodes()) == {node},
                 f"the restore for a pod pinned to {other} is local to {node}, where the snapshot is",
                 x.bound_volume(ws, "elsewhere"), ws=ws)
        x.explained_as(ws, "stranger", "POD_PINNED_AWAY_FROM_VOLUME")
        return
    measure.note("pinned elsewhere", _pinned_restore_outcome(ws, "stranger", "elsewhere", other))


@allure.feature("Snapshots")
@allure.story("a snapshot outlives its source: the source's claim and volume are deleted, the restore still works")
@pytest.mark.needs("snapshots")
def test_snapshot_outlives_its_source(ws: Workspace) -> None:
    sc, domain, written = _source(ws)
    snap = x.snapshot_ready(ws, "snap", "source", ws.snapshot_class(), READY_TIMEOUT)
    source_pv = o.spec(x.claim_bound(ws, "source")).get("volumeName")
    ws.delete("Pod", "writer")
    ws.delete("PersistentVolumeClaim", "source")
    wait_gone(ws.kube, "PersistentVolume", str(source_pv), None, 60)
    content = snap["status"]["boundVolumeSnapshotContentName"]
    still = ws.get("VolumeSnapshot", "snap") or {}
    x.expect((still.get("status") or {}).get("readyToUse") is True
             and ws.get("VolumeSnapshotContent", content) is not None,
             f"VolumeSnapshot snap and its content {content} are still there and ready after the source's PV "
             f"{source_pv} was deleted", still, ws=ws)
    _copy_is_read(ws, "restored", sc, "VolumeSnapshot", "snap", domain, written,
                  "the restore made after the source was deleted")


@allure.feature("Snapshots")
@allure.story("deleting a snapshot of a Delete class removes its content")
@pytest.mark.needs("snapshots")
@pytest.mark.exercises("snapshots")  # no restore: the snapshot's life is the evidence
def test_deleting_a_snapshot_removes_its_content(ws: Workspace) -> None:
    _source(ws)
    snap = x.snapshot_ready(ws, "snap", "source", ws.snapshot_class(), READY_TIMEOUT)
    content = snap["status"]["boundVolumeSnapshotContentName"]
    ws.delete("VolumeSnapshot", "snap", timeout=READY_TIMEOUT)
    wait_gone(ws.kube, "VolumeSnapshotContent", content, None, READY_TIMEOUT)


@allure.feature("Snapshots")
@allure.story("the VolumeSnapshotClass deleted midway: the snapshot still restores, and deleting it removes its content")
@pytest.mark.needs("snapshots")
def test_snapshot_class_deleted_midway_strands_nothing(ws: Workspace) -> None:
    """An operator removes the class after the snapshot was cut. The snapshot-controller
    notices (the snapshot's status gets a GetSnapshotClassFailed error; readyToUse stays
    true), but nothing it takes needs the class: the external-provisioner restores from the
    VolumeSnapshot and its content (it never reads the class), and csi-snapshotter deletes
    the content with the credentials the content itself carries (v8.7.0 sidecar-controller
    deleteCSISnapshotOperation reads the content's annotations, not the class)."""
    sc, domain, written = _source(ws)
    snapshot_class = ws.snapshot_class()
    snap = x.snapshot_ready(ws, "snap", "source", snapshot_class, READY_TIMEOUT)
    content = snap["status"]["boundVolumeSnapshotContentName"]
    ws.delete("VolumeSnapshotClass", snapshot_class)
    _copy_is_read(ws, "restored", sc, "VolumeSnapshot", "snap", domain, written,
                  f"the restore made after VolumeSnapshotClass {snapshot_class} was deleted")
    ws.delete("Pod", "reader")
    ws.delete("PersistentVolumeClaim", "restored")
    # The external-provisioner takes its source-protection finalizer off the snapshot once
    # the restore is provisioned; when that update loses a race (the snapshot-controller
    # rewrites the snapshot's status: GetSnapshotClassFailed, its class is gone) its orphan
    # sweep does it later, so the deletion is bounded by the sweep interval (seen in a
    # loaded default run before the harness set it: the snapshot kept the finalizer 90 s;
    # and, until the harness served the VolumeSnapshot API before the provisioner started,
    # for good: the provisioner makes its sweep only if that API is there at its start).
    sweep = (SNAPSHOT_ORPHAN_SWEEP_SECONDS if ws.cluster.has("pvchaos-csi-control")
             else UPSTREAM_SNAPSHOT_ORPHAN_SWEEP_SECONDS)
    ws.delete("VolumeSnapshot", "snap", wait=False)
    wait_gone(ws.kube, "VolumeSnapshot", "snap", ws.namespace, READY_TIMEOUT + sweep,
              timer="external-provisioner --snapshot-orphan-sweep-interval")
    wait_gone(ws.kube, "VolumeSnapshotContent", content, None, READY_TIMEOUT)


@allure.feature("Snapshots")
@allure.story("DeleteSnapshot fails (the driver unreachable midway): snapshot and content stay; both gone after restore")
@pytest.mark.needs("snapshots", "csi-proxy")
def test_delete_snapshot_failing_keeps_the_snapshot_until_restore(ws: Workspace) -> None:
    """The driver answers DeleteSnapshot Unavailable, as a driver removed or unreachable
    midway would (the CSI fault proxy, selecting only this snapshot's handle). With
    deletionPolicy Delete the snapshot-controller keeps the VolumeSnapshot's bound
    finalizer until its content is gone, and csi-snapshotter keeps the content's finalizer
    until the driver deleted the snapshot (SnapshotDeleteError meanwhile): nothing is lost
    from the API while the storage still holds the snapshot."""
    _source(ws)
    snap = x.snapshot_ready(ws, "snap", "source", ws.snapshot_class(), READY_TIMEOUT)
    content_name = snap["status"]["boundVolumeSnapshotContentName"]
    content = ws.get("VolumeSnapshotContent", content_name) or {}
    handle = str((content.get("status") or {}).get("snapshotHandle"))
    fault = csi_call_fault(ws, DELETE_SNAPSHOT, code="Unavailable", message="driver unreachable (pvchaos fault)",
                           snapshot_id=handle)
    ws.delete("VolumeSnapshot", "snap", wait=False)
    wait_for_event(ws.kube, content, "Failed to delete snapshot", reason="SnapshotDeleteError", timeout=60)

    def stranded(state: dict[str, Obj]) -> str | None:
        now = state.get(content_name)
        if now is None:
            return f"VolumeSnapshotContent {content_name} is gone while DeleteSnapshot of {handle} fails"
        if CONTENT_FINALIZER not in (now["metadata"].get("finalizers") or []):
            return f"VolumeSnapshotContent {content_name} lost {CONTENT_FINALIZER} while DeleteSnapshot fails"
        if ws.get("VolumeSnapshot", "snap") is None:
            return "VolumeSnapshot snap is gone before its content"
        return None
    holds_for(ws.kube, "VolumeSnapshotContent", stranded, 5,
              f"VolumeSnapshot snap and its content {content_name} stay while DeleteSnapshot fails")
    refused = calls(ws.cluster, rule=fault.touched[0])
    x.expect(len(refused) >= 1, f"csi-snapshotter asked DeleteSnapshot of {handle} and the proxy refused it "
             f"({len(refused)} calls caught)", ws.get("VolumeSnapshotContent", content_name), ws=ws)
    t0 = time.monotonic()
    fault.restore()
    wait_gone(ws.kube, "VolumeSnapshotContent", content_name, None, READY_TIMEOUT)
    wait_gone(ws.kube, "VolumeSnapshot", "snap", ws.namespace, 30)
    measure.since("fault lifted to snapshot deleted, seconds", t0)


@allure.feature("Clones")
@allure.story("a clone holds the source's bytes, and its pod runs where the cloned volume is")
@pytest.mark.needs("clones")
def test_clone_has_the_source_bytes_and_its_pod_follows_the_volume(ws: Workspace) -> None:
    sc, domain, written = _source(ws)
    _copy_is_read(ws, "clone", sc, "PersistentVolumeClaim", "source", domain, written, "the clone")

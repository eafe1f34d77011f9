"""Block volumes (volumeMode Block, issue 37): a raw device a pod writes and the next pod
reads, and what the scheduler and the binder do with a Block claim.

A Block claim goes through the same machinery as a Filesystem one (WaitForFirstConsumer,
the selected node, the driver's accessibility requirements), and the binder must never
pair it with a volume of the other mode: upstream's FindMatchingVolume rejects a volume
mode mismatch in the PV controller and in the scheduler's VolumeBinding plugin alike.
suites/test_static_binding.py checks that for class-less static PVs; here the claims are
of the driver's class, so a mismatching static PV of that very class is on offer and the
right answer is a new volume of the claim's mode from the driver.

The bytes are checked on real kubelets only (KWOK nodes map no devices): the kubelet's
CSI block mapper maps what NodePublishVolume published into the pod as a device, and the
container runtime refuses anything that is not one. A pod's own reading of the device,
printed to its log, is the witness, not the node's backing file: it holds for any driver.
"""

from __future__ import annotations

import allure
import pytest

from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj
from pvchaos.kube.poll import poll_until
from pvchaos.kube.wait import wait_for

pytestmark = [allure.epic("Block volumes"), pytest.mark.needs("dynamic-zonal", "block")]

TEST_IMAGE = "pvchaos.local/busybox:1"  # built into the kind node image (tools/nodeimage)
DEVICE = b.device_path(0)
PAYLOAD_BLOCKS = 16  # 64 KiB in 4 KiB blocks, written at the start of the device
# The writer puts random bytes on the device (fsync'd, so they reach the driver's storage
# before the pod is deleted) and prints their checksum; a reader prints the checksum of
# the same range read back. `test -b` first: a "device" that is a plain file says so. (The
# test image is busybox alone: no /tmp until the writer makes one.)
_DD = f"bs=4096 count={PAYLOAD_BLOCKS}"
WRITER = (f"test -b {DEVICE} || {{ echo not-a-block-device {DEVICE}; exec sleep 3600; }}; "
          f"mkdir -p /tmp && head -c {PAYLOAD_BLOCKS * 4096} /dev/urandom > /tmp/payload && "
          f"dd if=/tmp/payload of={DEVICE} {_DD} conv=fsync 2>/dev/null && sync && "
          f"echo $(sha256sum < /tmp/payload | cut -d' ' -f1) written; exec sleep 3600")
READER = (f"test -b {DEVICE} || {{ echo not-a-block-device {DEVICE}; exec sleep 3600; }}; "
          f"echo $(dd if={DEVICE} {_DD} 2>/dev/null | sha256sum | cut -d' ' -f1) read; exec sleep 3600")
READY_TIMEOUT = 90.0
MODES = {"block-claim-filesystem-volume": ("Block", "Filesystem"),
         "filesystem-claim-block-volume": ("Filesystem", "Block")}


def _device_pod(ws: Workspace, name: str, claim: str, script: str | None = None,
                node_selector: dict[str, str] | None = None) -> Obj:
    """A pod with the claim as its raw device; on real kubelets it runs `script`."""
    pod = b.pod(name, devices=(claim,), node_selector=node_selector)
    if script and ws.cluster.has("real-kubelet"):
        pod["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": ["sh", "-c", script]})
    return ws.create(pod)


def _printed(ws: Workspace, pod: str, word: str) -> str:
    """The checksum the pod printed with `word` ("written", "read"), from its log."""
    def seen() -> str | None:
        for line in kinds.pod_log(ws.kube, pod, ws.namespace).splitlines():
            parts = line.split()
            if parts[:1] == ["not-a-block-device"]:
                return line
            if len(parts) == 2 and parts[1] == word:
                return parts[0]
        return None
    got = poll_until(seen, 30, f"pod {pod} prints the checksum it {word} through {DEVICE}", interval=0.5)
    x.expect(not got.startswith("not-a-block-device"), f"pod {pod}: {got} (volumeDevices must be a block device)",
             ws.get("Pod", pod), ws=ws)
    return got


def _block_claim(ws: Workspace, name: str, sc: str) -> Obj:
    return ws.create(b.persistent_volume_claim(name, "1Gi", sc, volume_mode="Block"))


def _other_node_of_the_domain(ws: Workspace, node: Obj) -> Obj:
    """Another node the volume can reach (its domain's, for a zonal driver), else the same."""
    topo = ws.topology()
    if not topo.key:
        return node
    peers = sorted(topo.domains[topo.domain_of(o.name(node))] - {o.name(node)})
    return next((n for n in ws.nodes() if o.name(n) in peers), node)


@allure.feature("Block I/O")
@allure.story("bytes one pod writes to its Block volume's device are the bytes the next pod reads")
@pytest.mark.needs("real-kubelet")
def test_bytes_written_to_the_device_are_read_by_the_next_pod(ws: Workspace) -> None:
    sc = ws.storage_class("blk")
    _block_claim(ws, "data", sc)
    first = ws.node()
    _device_pod(ws, "writer", "data", WRITER, ws.pin(first))
    x.pod_runs(ws, "writer", timeout=120)
    pv = x.bound_volume(ws, "data")
    x.expect(o.spec(pv).get("volumeMode") == "Block", f"PV {o.name(pv)} of a Block claim is a Block volume", pv, ws=ws)
    written = _printed(ws, "writer", "written")
    ws.delete("Pod", "writer")
    second = _other_node_of_the_domain(ws, first)
    measure.note("reader on another node", str(o.name(second) != o.name(first)).lower())
    _device_pod(ws, "reader", "data", READER, ws.pin(second))
    x.pod_runs(ws, "reader", timeout=120)
    read = _printed(ws, "reader", "read")
    x.expect(read == written, f"the reader on {o.name(second)} read what the writer on {o.name(first)} wrote: "
             f"sha256 {written}, read {read}", ws.get("Pod", "reader"), pv, ws=ws)


@allure.feature("Block scheduling")
@allure.story("a WaitForFirstConsumer Block claim is provisioned where the scheduler put its pod, as a Block volume")
@pytest.mark.quick
def test_block_claim_is_provisioned_in_the_selected_nodes_domain(ws: Workspace) -> None:
    topo = ws.topology()
    target = ws.node(index=len(ws.nodes()) - 1)  # the last node: not where an unpinned default would go
    sc = ws.storage_class("blk-wffc", "WaitForFirstConsumer")
    _block_claim(ws, "data", sc)
    x.claim_stays_pending(ws, "data", "WAIT_FOR_CONSUMER")
    _device_pod(ws, "app", "data", node_selector=ws.pin(target))
    pod = x.pod_scheduled(ws, "app")
    x.expect(x.claim_annotation(ws, "data", o.SELECTED_NODE) == o.node_name(pod),
             f"the claim's selected node is the pod's node {o.node_name(pod)}", ws.get("PersistentVolumeClaim", "data"),
             ws=ws)
    pv = x.bound_volume(ws, "data")  # and placed where the selected node can reach (claim_bound checks it)
    x.expect(o.spec(pv).get("volumeMode") == "Block", f"PV {o.name(pv)} of a Block claim has volumeMode Block",
             pv, ws=ws)
    if topo.key:
        x.volume_within(ws, "data", [topo.domain_of(o.name(target))])
    x.pod_runs(ws, "app", timeout=120)


@allure.feature("Block scheduling")
@allure.story("a claim of the driver's class never binds an Available volume of that class in the other mode")
@pytest.mark.needs("static-pv")
@pytest.mark.parametrize("case", list(MODES))
def test_a_claim_never_binds_a_volume_of_the_other_mode(ws: Workspace, case: str) -> None:
    """The static PV is the best fit in everything but its mode (same class, same size,
    no node affinity), so a binder that ignored the mode would take it; the claim must
    get a new volume of its own mode from the driver instead, and the PV stay Available."""
    claim_mode, pv_mode = MODES[case]
    sc = ws.storage_class("mode", "WaitForFirstConsumer")
    static = ws.name("other-mode")
    ws.create(b.persistent_volume(static, "1Gi", sc, volume_mode=pv_mode))
    x.volume_phase(ws, static, "Available")  # the PV controller has seen it before the claim exists
    ws.create(b.persistent_volume_claim("data", "1Gi", sc, volume_mode=claim_mode))
    if claim_mode == "Block":
        _device_pod(ws, "app", "data")
    else:
        ws.create(b.pod("app", ("data",)))
    pv = x.bound_volume(ws, "data", timeout=120)
    x.expect(o.name(pv) != static, f"a {claim_mode} claim must not bind {pv_mode} PV {static}", pv, ws=ws)
    x.expect(str(o.spec(pv).get("volumeMode") or "Filesystem") == claim_mode
             and o.annotation(pv, "pv.kubernetes.io/provisioned-by") == ws.driver.name,
             f"the claim got a new {claim_mode} volume from {ws.driver.name}", pv, ws=ws)
    x.phase_now(ws, "PersistentVolume", static, "Available")
    x.pod_runs(ws, "app", timeout=120)


@allure.feature("Block I/O")
@allure.story("a restore of a Block volume's snapshot holds the bytes the source had")
@pytest.mark.needs("snapshots", "real-kubelet")
def test_restore_of_a_block_snapshot_holds_the_source_bytes(ws: Workspace) -> None:
    sc = ws.storage_class("blk-snap")
    _block_claim(ws, "source", sc)
    _device_pod(ws, "writer", "source", WRITER, ws.pin(ws.node()))
    x.pod_runs(ws, "writer", timeout=120)
    written = _printed(ws, "writer", "written")
    ws.create(b.volume_snapshot("snap", "source", ws.snapshot_class()))
    wait_for(ws.kube, "VolumeSnapshot", "snap", lambda s: (s.get("status") or {}).get("readyToUse") is True,
             "VolumeSnapshot snap of Block claim source: status.readyToUse true", ws.namespace, READY_TIMEOUT)
    ws.create(b.with_data_source(b.persistent_volume_claim("restored", "1Gi", sc, volume_mode="Block"),
                                 "VolumeSnapshot", "snap"))
    _device_pod(ws, "reader", "restored", READER)
    x.pod_runs(ws, "reader", timeout=120)
    x.runs_where_its_volume_is(ws, "reader", "restored")
    pv = x.bound_volume(ws, "restored")
    x.expect(o.spec(pv).get("volumeMode") == "Block", f"the restored PV {o.name(pv)} is a Block volume", pv, ws=ws)
    read = _printed(ws, "reader", "read")
    x.expect(read == written, f"the restored Block volume holds the source's bytes: sha256 {written}, read {read}",
             ws.get("Pod", "reader"), pv, ws=ws)

"""CSI inline ephemeral volumes (issue 37; upstream's "CSI Ephemeral-volume" pattern): a
pod's `volumes[].csi` of the driver, with no claim and no PV. What Kubernetes does with
one (k8s.io/kubernetes v1.35 pkg/volume/csi, scheduler nodevolumelimits):

- the kubelet takes it only when the driver's CSIDriver lists the `Ephemeral` lifecycle
  mode (else FailedMount: `volume mode "Ephemeral" not supported by driver`); it never
  attaches or stages it, and calls NodePublishVolume with the volume id
  `csi-<sha256(pod UID + volume name)>`, no staging path, the source's volumeAttributes,
  and, with podInfoOnMount, `csi.storage.k8s.io/ephemeral: "true"`;
- it tears the volume down (NodeUnpublishVolume) before it removes a deleted pod from the
  API: a pod that is gone had its volumes unpublished;
- the scheduler's NodeVolumeLimits does not count it: only claims, generic ephemeral
  volumes and migrated in-tree inline volumes count against the CSINode allocatable
  count (a pod with only inline CSI volumes skips the filter at PreFilter).

KWOK nodes (local backend) publish nothing, so the mount tests need a real kubelet (kind);
the scheduling test runs on both.
"""

from __future__ import annotations

import hashlib
import secrets

import allure
import pytest

from pvchaos.api import Workspace, b, kinds, o, x
from pvchaos.chaos.csi_control import node_calls
from pvchaos.clusters.backend import NodeStorageFaults
from pvchaos.kube.poll import poll_until
from pvchaos.tools.nodeimage.recipe import TEST_IMAGE  # busybox, built into the kind node image

pytestmark = [allure.epic("The CSI path"), allure.feature("CSI inline ephemeral volumes"),
              pytest.mark.needs("inline-ephemeral")]

EPHEMERAL_KEY = "csi.storage.k8s.io/ephemeral"
# a pod deleted gracefully (ws.delete(..., graceful=True)) with its own period: with 0 the
# API server removes it at once, before the kubelet has torn anything down, and its
# disappearance would prove nothing
GRACE = {"terminationGracePeriodSeconds": 1}


def kubelet_volume_id(pod_uid: str, volume: str) -> str:
    """The id the kubelet gives an inline volume (pkg/volume/csi makeVolumeHandle)."""
    return "csi-" + hashlib.sha256(f"{pod_uid}{volume}".encode()).hexdigest()


def _writer(ws: Workspace, name: str, payload: str) -> dict:
    """A pod with one inline volume of the driver (/data/0) that writes the payload into it
    and prints what it reads back."""
    pod = b.pod(name, inline=[ws.driver.inline_volume()], extra_spec=GRACE)
    pod["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": [
        "sh", "-c", f"echo {payload} > /data/0/payload && cat /data/0/payload; exec sleep 3600"]})
    return pod


def _no_claim_no_pv(ws: Workspace, pod: dict) -> None:
    """Nothing persistent was made for the pod: no claim in its namespace, no PV for it, no
    VolumeAttachment of the driver on its node without a PV (the kubelet attaches no inline
    CSI volume)."""
    x.expect(not ws.list("PersistentVolumeClaim"), "an inline volume makes no claim", pod, ws=ws)
    mine = [o.name(pv) for pv in kinds.list_objects(ws.kube, "PersistentVolume")[0]
            if ((o.spec(pv).get("claimRef") or {}).get("namespace")) == ws.namespace]
    x.expect(not mine, f"an inline volume makes no PV (found {mine})", pod, ws=ws)
    inline_attachments = [o.name(va) for va in kinds.list_objects(ws.kube, "VolumeAttachment")[0]
                          if o.spec(va).get("attacher") == ws.driver.name
                          and o.spec(va).get("nodeName") == o.node_name(pod)
                          and not (o.spec(va).get("source") or {}).get("persistentVolumeName")]
    x.expect(not inline_attachments, f"an inline volume is not attached (found {inline_attachments})", pod, ws=ws)


def _read_back(ws: Workspace, name: str) -> str:
    # a log cannot be watched: polled, bounded
    return str(poll_until(lambda: next(iter(kinds.pod_log(ws.kube, name, ws.namespace).split()), None), 60,
                          f"pod {name} printed what it read from its inline volume", interval=1.0))


@allure.story("a pod writes and reads its inline volume; once the pod is deleted the kubelet has unpublished it")
@pytest.mark.needs("real-kubelet")
@pytest.mark.quick
def test_inline_volume_is_written_read_and_unpublished_with_its_pod(ws: Workspace) -> None:
    """Any driver with the Ephemeral mode: the pod runs on its inline volume with no claim
    and no PV, reads back what it wrote, and its deletion completes, which the kubelet
    lets happen only after NodeUnpublishVolume succeeded (a driver that cannot unpublish
    keeps the pod Terminating)."""
    payload = secrets.token_hex(8)
    ws.create(_writer(ws, "app", payload))
    pod = x.pod_runs(ws, "app", timeout=120)
    read = _read_back(ws, "app")
    x.expect(read == payload, f"the pod reads back what it wrote into its inline volume: {read!r}, not {payload!r}",
             pod, ws=ws)
    _no_claim_no_pv(ws, pod)
    # graceful: the kubelet removes the pod only once its volumes are torn down
    ws.delete("Pod", "app", timeout=90, graceful=True)


@allure.story("the kubelet publishes an inline volume unstaged, marked ephemeral, with its own id, and unpublishes it")
@pytest.mark.needs("real-kubelet", "pvchaos-csi-control")
def test_kubelet_publishes_the_inline_volume_as_ephemeral_and_unpublishes_it(ws: Workspace) -> None:
    """What the driver was asked, from pvchaos-csi's calls log in the node: NodePublishVolume
    with the kubelet's id for the volume, no staging path, the attributes and
    csi.storage.k8s.io/ephemeral=true with the pod's name; no NodeStageVolume; after the
    pod is gone a NodeUnpublishVolume of the same id and target that succeeded; and the
    volume's directory on the node is gone with it."""
    ws.create(_writer(ws, "app", secrets.token_hex(8)))
    pod = x.pod_runs(ws, "app", timeout=120)
    node, volume_id = o.node_name(pod) or "", kubelet_volume_id(o.uid(pod), "v0")
    ws.delete("Pod", "app", timeout=90, graceful=True)
    calls = [c for c in node_calls(ws.cluster, node) if (c.get("request") or {}).get("volume_id") == volume_id]
    by_method: dict[str, list[dict]] = {}
    for c in calls:
        by_method.setdefault(str(c.get("method")), []).append(c)
    publishes = [c for c in by_method.get("NodePublishVolume", []) if c.get("code") == "OK"]
    x.expect(bool(publishes), f"node {node}: a NodePublishVolume of {volume_id} (the kubelet's id for volume v0 of "
             f"pod {o.uid(pod)}) that succeeded; calls of that id: {[c.get('method') for c in calls]}", pod, ws=ws)
    request = publishes[0].get("request") or {}
    context = request.get("volume_context") or {}
    wanted = ws.driver.inline_volume().get("volumeAttributes") or {}
    x.expect(not request.get("staging_target_path"), f"an inline volume is published unstaged: {request}", pod, ws=ws)
    x.expect(context.get(EPHEMERAL_KEY) == "true" and context.get("csi.storage.k8s.io/pod.name") == "app"
             and all(context.get(k) == v for k, v in wanted.items()),
             f"volume_context carries {EPHEMERAL_KEY}=true, the pod's name and the attributes {wanted}: {context}",
             pod, ws=ws)
    x.expect("NodeStageVolume" not in by_method, "the kubelet stages no inline volume", pod, ws=ws)
    unpublished = [c for c in by_method.get("NodeUnpublishVolume", []) if c.get("code") == "OK"
                   and (c.get("request") or {}).get("target_path") == request.get("target_path")]
    x.expect(bool(unpublished), f"a NodeUnpublishVolume of {volume_id} at {request.get('target_path')} that "
             f"succeeded, before the pod was gone: {by_method.get('NodeUnpublishVolume')}", pod, ws=ws)
    faults = ws.cluster.faults
    assert isinstance(faults, NodeStorageFaults), "node_calls read the node's files already"
    left = faults.node_exec(node, f"ls -d /var/lib/pvchaos-csi/ephemeral/{volume_id} 2>/dev/null || true")
    x.expect(not left.strip(), f"the inline volume's data went with its pod: {left.strip()} is still on {node}",
             pod, ws=ws)


@allure.story("inline volumes need no claim or PV to be scheduled and do not count against the CSINode limit")
@pytest.mark.cluster(csi_max_volumes_per_node=1)
@pytest.mark.needs("attach")
@pytest.mark.exercises("volume-limits")
def test_inline_volumes_do_not_count_against_the_node_volume_limit(ws: Workspace) -> None:
    """A node at its CSINode allocatable count (1): a pod with one more claim of the driver
    is refused there (exceed max volume count: the limit holds), while a pod with two
    inline volumes of the same driver pinned to it is placed and runs: NodeVolumeLimits
    counts claims, not inline CSI volumes, and the pod has no PV whose topology could
    keep it anywhere."""
    node = ws.node()
    pin = ws.pin(node)
    sc = ws.storage_class("limit", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("first", "1Gi", sc))
    ws.create(b.pod("first", ("first",), node_selector=pin))
    x.pod_runs(ws, "first", timeout=120)
    ws.create(b.persistent_volume_claim("one-more", "1Gi", sc))
    x.claim_stays_pending(ws, "one-more", "WAIT_FOR_CONSUMER")  # in the caches before its pod
    ws.create(b.pod("one-more", ("one-more",), node_selector=pin))
    x.pod_unschedulable(ws, "one-more", "MAX_VOLUME_COUNT")
    source = ws.driver.inline_volume()
    ws.create(b.pod("inline", inline=[source, source], node_selector=pin, extra_spec=GRACE))
    pod = x.pod_runs(ws, "inline", timeout=120)
    x.expect(o.node_name(pod) == o.name(node), f"the inline pod runs on {o.name(node)}, the full node it is pinned "
             f"to: {o.node_name(pod)}", pod, ws=ws)
    x.expect(not (ws.get("PersistentVolumeClaim", "inline-v0") or ws.get("PersistentVolumeClaim", "inline-v1")),
             "no claim was made for the inline volumes", pod, ws=ws)

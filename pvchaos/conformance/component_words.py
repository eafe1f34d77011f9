"""A failed canary or wait in the component's own words, where the component said any.

A provisioner that cannot provision says why in a ProvisioningFailed event on the claim
("error generating accessibility requirements: no topology key found for node ..."); an
attacher that cannot attach writes `status.attachError` on the VolumeAttachment. Guessing
"is the provisioner running?" when it runs and said what is wrong sends a person the wrong
way. Only when a component said nothing does the diagnosis name who should have spoken:
a VolumeAttachment with no status at all, of a driver whose CSIDriver requires attach, was
never answered by an attacher. Which of the harness's own CSI processes are not running
is known to the caller (pvchaos/clusters/running.py `csi_not_running`) and named too.

Pure: the caller passes the events, the VolumeAttachment and the CSIDriver it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pvchaos.conformance.types import KubeObject, dig

PROVISIONING_FAILED = "ProvisioningFailed"
# The harness's CSI components (pvchaos/clusters/csi.py COMPONENTS) and what each does.
ROLES = {"csi-controller": "driver controller service (pvchaos-csi)",
         "csi-provisioner": "external-provisioner", "csi-attacher": "external-attacher",
         "csi-resizer": "external-resizer"}


def _source(event: KubeObject) -> str:
    return str(dig(event, "source", "component") or dig(event, "reportingController")
               or dig(event, "reportingComponent") or "")


def _order(event: KubeObject) -> tuple[int, str]:
    """Events in the order they were last written: resourceVersion (etcd's revision, which
    also moves when a repeated event's count goes up), then the second-grained time."""
    rv = str(dig(event, "metadata", "resourceVersion", default=""))
    return (int(rv) if rv.isdigit() else -1, str(dig(event, "lastTimestamp") or dig(event, "eventTime") or ""))


def provisioning_failure(events: Sequence[KubeObject]) -> str | None:
    """The newest ProvisioningFailed event that still stands, with who sent it, or None.
    A failure stands while it is what its sender said last: the PV controller's
    `storageclass ... not found` for a class it had not seen yet is followed by its
    ExternalProvisioning once it has, and is then no cause."""
    latest: dict[str, KubeObject] = {}
    for e in sorted(events, key=_order):
        latest[_source(e)] = e
    failed = [e for e in latest.values() if dig(e, "reason") == PROVISIONING_FAILED and dig(e, "message")]
    if not failed:
        return None
    last = max(failed, key=_order)
    who = _source(last)
    return f"{who + ' says' if who else 'the provisioner says'} (ProvisioningFailed): {str(dig(last, 'message')).strip()}"


def not_running_text(not_running: Sequence[str]) -> str:
    """`csi-attacher` -> "the harness's external-attacher (csi-attacher) is not running"."""
    if not not_running:
        return ""
    names = ", ".join(f"{ROLES.get(c, c)} ({c})" for c in not_running)
    return f"the harness's {names} {'is' if len(not_running) == 1 else 'are'} not running"


def attachment_problem(attachment: KubeObject | None, driver: KubeObject | None, pv: str, node: str,
                       not_running: Sequence[str] = ()) -> str:
    """Why the VolumeAttachment of `pv` to `node` is not attached, in the attacher's
    words (attachError) when it wrote any, else naming the component that should have."""
    down = not_running_text(not_running)
    tail = f"; {down}" if down else ""
    if attachment is None:
        return (f"no VolumeAttachment of {pv} to {node} exists: the attach/detach controller of "
                f"kube-controller-manager made none (is it running, and does node {node} carry "
                f"volumes.kubernetes.io/controller-managed-attach-detach?){tail}")
    name = str(dig(attachment, "metadata", "name", default="?"))
    attacher = str(dig(attachment, "spec", "attacher", default="") or dig(driver, "metadata", "name", default="?"))
    error = dig(attachment, "status", "attachError", "message")
    if error:
        return f"VolumeAttachment {name}: the attacher of {attacher} reports attachError: {error}{tail}"
    if dig(attachment, "status", "attached") is True:
        return f"VolumeAttachment {name} is attached{tail}"
    # No attachError and not attached: nothing answered (the attach/detach controller
    # writes no status, or only attached: false; an attacher writes one or the other).
    required = dig(driver, "spec", "attachRequired")
    why = ("CSIDriver {0} has attachRequired: true" if required else
           "CSIDriver {0} does not say attachRequired: true" if driver is not None else "no CSIDriver {0}")
    ask = down or f"is the external-attacher of {attacher} running?"
    said = "has no status at all" if not dig(attachment, "status") else "says attached: false with no attachError"
    return f"VolumeAttachment {name} {said}: no attacher answered it ({why.format(attacher)}); {ask}"


def unattached_volumes(node: str, pvs: Sequence[KubeObject], attachments: Sequence[KubeObject],
                       drivers: Mapping[str, KubeObject]) -> list[str]:
    """For a pod on `node` that does not run: each of its CSI volumes that must be attached
    there and is not, in `attachment_problem`'s words (pure; empty when none is waited on).
    A pod's own events only say its volume is not attached yet; the VolumeAttachment says
    who did not answer. A volume needs attaching unless its CSIDriver says attachRequired
    false (no CSIDriver means attach, as the kubelet's CSI plugin decides)."""
    problems = []
    for pv in pvs:
        driver_name = dig(pv, "spec", "csi", "driver")
        if not driver_name:
            continue
        driver = drivers.get(str(driver_name))
        pv_name = str(dig(pv, "metadata", "name", default="?"))
        attachment = next((va for va in attachments if dig(va, "spec", "nodeName") == node
                           and dig(va, "spec", "source", "persistentVolumeName") == pv_name), None)
        if attachment is None and driver is not None and dig(driver, "spec", "attachRequired") is False:
            continue
        if dig(attachment, "status", "attached") is True:
            continue
        problems.append(attachment_problem(attachment, driver, pv_name, node))
    return problems


MANAGED_BY = "snapshot.storage.kubernetes.io/managed-by"  # distributed snapshotting's content label


def unready_snapshot(snapshot: KubeObject | None, content: KubeObject | None) -> str:
    """Why a VolumeSnapshot is not ready, in the words of the object that stopped: the
    content's error (the csi-snapshotter's), or who should have cut it and did not. A
    content labelled `managed-by: <node>` waits for that node's csi-snapshotter
    (--node-deployment) alone; an unlabelled one for a central csi-snapshotter, as a
    --node-deployment sidecar never takes it."""
    name = str(dig(snapshot or {}, "metadata", "name") or "?")
    error = dig(snapshot or {}, "status", "error", "message")
    if content is None:
        bound = dig(snapshot or {}, "status", "boundVolumeSnapshotContentName")
        said = f"; its error: {error}" if error else ""
        return (f"VolumeSnapshot {name} has no VolumeSnapshotContent{' (' + str(bound) + ' is gone)' if bound else ''}: "
                f"the snapshot-controller made none{said}")
    content_name = str(dig(content, "metadata", "name"))
    content_error = dig(content, "status", "error", "message")
    if content_error:
        return f"VolumeSnapshotContent {content_name} of VolumeSnapshot {name}: {content_error}"
    if dig(content, "status", "snapshotHandle"):
        return f"VolumeSnapshotContent {content_name} has a snapshot handle but readyToUse is not true"
    node = dig(content, "metadata", "labels", MANAGED_BY)
    if node:
        return (f"VolumeSnapshotContent {content_name} is labelled {MANAGED_BY}={node} and no snapshot was cut: "
                f"only node {node}'s csi-snapshotter (--node-deployment) takes it, and it did not answer")
    return (f"VolumeSnapshotContent {content_name} has no {MANAGED_BY} label and no snapshot was cut: a central "
            f"csi-snapshotter takes it (one run with --node-deployment never does, so with snapshots cut on the "
            f"nodes the snapshot-controller must run with --enable-distributed-snapshotting)")

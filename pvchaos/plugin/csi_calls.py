"""The CSI calls of a test's volumes, attached to its Allure result, passed or failed.

Why always: with real CSI in the loop, what the driver was asked (CreateVolume's
accessibility requirements, ControllerPublishVolume for the pod's node) is the evidence
that the test exercised the path it claims to, and a reader of a passing test should see
it too. The driver logs every RPC as one JSON line (`<cluster dir>/csi/calls.jsonl`); a
call belongs to the test when it names one of the test's volumes: the PV name
external-provisioner gives CreateVolume (`pvc-<claim uid>`, also in its
`--extra-create-metadata` parameters) or a PV's volume handle (the driver's volume id,
which ControllerPublish/Unpublish carry).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import allure

from pvchaos.clusters.csi import CsiPaths
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.poll import PollTimeout, poll_until

PUBLISH_WAIT = 5.0  # an attach the attach/detach controller has asked for lands within this


def matching(lines: Iterable[str], needles: Iterable[str]) -> list[str]:
    """Lines naming any needle (pure; a line is a JSON call record)."""
    wanted = [n for n in needles if n]
    return [ln for ln in lines if ln.strip() and any(n in ln for n in wanted)]


def pretty(lines: list[str]) -> str:
    """One call per line as logged, so the order and timestamps stay readable."""
    out = []
    for ln in lines:
        try:
            out.append(json.dumps(json.loads(ln), sort_keys=False))
        except ValueError:
            out.append(ln.rstrip())
    return "\n".join(out)


def _volumes(ws: Workspace) -> tuple[list[str], dict[str, str]]:
    """The test's volume names (pvc-<uid> of each claim, the bound PV names) and each
    bound PV's volume handle (the driver's volume id)."""
    names, handles = [], {}
    for claim in ws.list("PersistentVolumeClaim"):
        names.append(f"pvc-{o.uid(claim)}")
        volume = (claim.get("spec") or {}).get("volumeName")
        if volume:
            names.append(volume)
            pv = kinds.get(ws.kube, "PersistentVolume", volume)
            handle = (((pv or {}).get("spec") or {}).get("csi") or {}).get("volumeHandle")
            if handle:
                handles[volume] = handle
    return names, handles


def _asked_to_attach(ws: Workspace, handles: dict[str, str]) -> list[str]:
    """Handles of the test's volumes the attach/detach controller asked to attach."""
    out = []
    for va in kinds.list_objects(ws.kube, "VolumeAttachment")[0]:
        pv = ((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
        if pv in handles:
            out.append(handles[pv])
    return out


def _published(log: Path, handle: str) -> bool:
    return any("ControllerPublishVolume" in ln for ln in matching(_read(log), [handle]))


def attach_csi_calls(ws: Workspace) -> None:
    """Attach `csi-calls.jsonl` when the cluster runs the CSI stack and the driver was
    asked about the test's claims."""
    if ws.cluster.directory is None:
        return
    log = CsiPaths(ws.cluster.directory).calls_log
    if not log.exists():
        return
    try:
        names, handles = _volumes(ws)
        if not names:
            return
        pending = _asked_to_attach(ws, handles)
        if pending:  # let a publish the attach/detach controller already asked for reach the log
            try:
                poll_until(lambda: True if all(_published(log, h) for h in pending) else None,
                           PUBLISH_WAIT, "ControllerPublishVolume of the test's volumes", interval=0.1)
            except PollTimeout:
                pass
        lines = matching(_read(log), [*names, *handles.values()])
        if lines:  # static claims never reach the driver: nothing to show
            # one JSON object per line, which a JSON viewer would refuse: shown as text
            allure.attach(pretty(lines), "csi-calls.jsonl", allure.attachment_type.TEXT)
    except Exception as exc:  # noqa: BLE001 - evidence is best effort; the verdict stands
        allure.attach(f"could not read the CSI calls: {exc}", "csi-calls-error.txt", allure.attachment_type.TEXT)


def _read(log: Path) -> list[str]:
    return log.read_text(errors="replace").splitlines()

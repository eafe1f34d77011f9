"""Observations the suites make again and again, each an Allure step that shows its
arguments and returns what it saw. All waiting goes through `pvchaos.waiting`."""

from __future__ import annotations

import allure

from clusters.topology import HOSTNAME_KEY
from conformance import messages
from kube import objects as o
from kube.errors import ExpectationFailed
from kube.kinds import Obj
from kube.wait import WaitTimeout, describe, pod_cannot_run, pod_running, wait_for, wait_for_event
from kube import builders as b
from pvchaos.workspace import Workspace


@allure.step("PVC {name} becomes Bound")
def claim_bound(ws: Workspace, name: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "PersistentVolumeClaim", name, lambda c: o.phase(c) == "Bound", "phase Bound",
                    ws.namespace, timeout)


def bound_volume(ws: Workspace, claim: str, timeout: float = 60) -> Obj:
    """The PV a claim is Bound to (waits for the binding)."""
    pvc = claim_bound(ws, claim, timeout)
    pv = ws.get("PersistentVolume", pvc["spec"]["volumeName"])
    assert pv is not None, f"PVC {claim} names PV {pvc['spec']['volumeName']}, which does not exist"
    return pv


@allure.step("PV {name} reaches phase {phase}")
def volume_phase(ws: Workspace, name: str, phase: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "PersistentVolume", name, lambda v: o.phase(v) == phase, f"phase {phase}", None, timeout)


@allure.step("{kind} {obj_name} carries an event containing {key}")
def event(ws: Workspace, kind: str, obj_name: str, key: str, timeout: float = 60, **fmt: object) -> Obj:
    """Wait for the version's wording of message `key` in an event about the object."""
    obj = ws.get(kind, obj_name) or {"kind": kind, "metadata": {"name": obj_name, "namespace": ws.namespace}}
    obj.setdefault("kind", kind)
    wanted = messages.expected(key, ws.cluster.minor, **fmt) if ws.cluster.minor else messages.any_of(key, **fmt)
    return wait_for_event(ws.kube, obj, wanted, reason=messages.REASONS.get(key), timeout=timeout)


@allure.step("PVC {claim} stays Pending: the controller reports {key}")
def claim_stays_pending(ws: Workspace, claim: str, key: str, **fmt: object) -> Obj:
    """A negative made observable: the controller's event proves it evaluated the claim
    and found nothing, then the claim must still be Pending. The controller only judges
    the PVs it has seen: callers wait for their PVs to be Available (set by the same
    controller) before creating the claim, else a later binding goes unseen."""
    event(ws, "PersistentVolumeClaim", claim, key, **fmt)
    pvc = ws.get("PersistentVolumeClaim", claim)
    phase = (pvc or {}).get("status", {}).get("phase")
    if phase != "Pending":
        raise ExpectationFailed(f"PVC {claim} should stay Pending ({key}) but is {phase}:\n{describe(pvc, ws.kube)}")
    return pvc or {}


@allure.step("pod {name} runs")
def pod_runs(ws: Workspace, name: str, timeout: float = 60) -> Obj:
    return wait_for(ws.kube, "Pod", name, pod_running, "phase Running", ws.namespace, timeout, fail_if=pod_cannot_run)


@allure.step("pod {name} cannot be scheduled: {key}")
def pod_unschedulable(ws: Workspace, name: str, key: str, timeout: float = 60) -> Obj:
    """Wait until the scheduler marks the pod Unschedulable, failing at once if it places
    the pod instead; then its FailedScheduling event must carry the reason `key`."""
    def placed(pod: Obj | None) -> str | None:
        node = o.node_name(pod)
        return f"the scheduler placed it on {node}" if node else None

    wait_for(ws.kube, "Pod", name, o.unschedulable, f"Unschedulable ({key})", ws.namespace, timeout, fail_if=placed)
    return event(ws, "Pod", name, key, timeout=timeout)


@allure.step("a no-provisioner WaitForFirstConsumer class with one local PV per node")
def local_class_with_pv_per_node(ws: Workspace, capacity: str = "10Gi") -> str:
    """The classic local-volume set-up (static `local` PVs pinned by hostname); returns the class."""
    sc = ws.name("local")
    ws.create(b.storage_class(sc, "kubernetes.io/no-provisioner", "WaitForFirstConsumer", reclaim="Retain"))
    for node in ws.list("Node"):
        host = label(node, HOSTNAME_KEY) or node["metadata"]["name"]
        ws.create(b.persistent_volume(ws.name(f"local-{node['metadata']['name']}"), capacity, sc,
                                      affinity=b.hostname_affinity(host), local_path="/mnt/disks/vol1"))
    return sc


def node_of(ws: Workspace, pod_name: str) -> Obj:
    pod = ws.get("Pod", pod_name)
    node_name = (pod or {}).get("spec", {}).get("nodeName")
    node = ws.get("Node", node_name) if node_name else None
    assert node is not None, f"pod {pod_name} has no node:\n{describe(pod, ws.kube)}"
    return node


def label(obj: Obj, key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(key)


def expect(condition: bool, message: str, *objects: Obj | None, ws: Workspace | None = None) -> None:
    """Assert with evidence: the objects involved are shown when the condition fails."""
    if not condition:
        shown = "\n---\n".join(describe(o, ws.kube if ws else None) for o in objects)
        raise ExpectationFailed(f"{message}\n{shown}" if objects else message)


__all__ = ["ExpectationFailed", "WaitTimeout", "bound_volume", "claim_bound", "claim_stays_pending", "event",
           "expect", "label", "node_of", "pod_runs", "pod_unschedulable", "volume_phase"]

"""Object sets for the explain unit tests, shaped as a 1.35 API server returns them
(status phases, bind-completed annotations, events with involvedObject), four nodes in
zones a, a, b, c whose hostname labels differ from their names."""

from __future__ import annotations

from typing import Any

from pvchaos.conformance.verdicts import Scene

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NS = "app"
Obj = dict[str, Any]


def node(name: str, zone: str | None, taints: list[Obj] | None = None, unschedulable: bool = False, **labels: str) -> Obj:
    labels = {HOST: f"host-{name}", **labels}
    if zone:
        labels[ZONE] = zone
    spec: Obj = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec}


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")]


def terms(*terms_: list[tuple[str, str, list[str]]], fields: list[Obj] | None = None) -> Obj:
    out = [{"matchExpressions": [{"key": k, "operator": op, "values": v} if v else {"key": k, "operator": op}
                                 for k, op, v in t]} for t in terms_]
    if fields is not None:
        out.append({"matchFields": fields})
    return {"nodeSelectorTerms": out}


def pod(*claims: str, name: str = "app", selector: dict[str, str] | None = None, affinity: Obj | None = None,
        tolerations: list[Obj] | None = None) -> Obj:
    spec: Obj = {"volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]}
    if selector:
        spec["nodeSelector"] = selector
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity}}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"kind": "Pod", "metadata": {"name": name, "namespace": NS, "uid": "u-pod"}, "spec": spec,
            "status": {"phase": "Pending"}}


def pvc(name: str, cls: str | None = "", size: str = "1Gi", volume: str | None = None, phase: str = "Pending",
        modes: tuple[str, ...] = ("ReadWriteOnce",), annotations: dict[str, str] | None = None) -> Obj:
    spec: Obj = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    meta: Obj = {"name": name, "namespace": NS, "uid": f"u-{name}", "annotations": dict(annotations or {})}
    if volume:
        spec["volumeName"] = volume
        if phase in ("Bound", "Lost"):
            meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    return {"kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pv(name: str, affinity: Obj | None = None, claim: str | None = None, cls: str = "", size: str = "1Gi",
       modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str | None = None, labels: dict[str, str] | None = None) -> Obj:
    spec: Obj = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
                 "csi": {"driver": "x", "volumeHandle": name}}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": affinity}
    if claim:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": NS, "name": claim, "uid": f"u-{claim}"}
    return {"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"phase": phase or ("Bound" if claim else "Available")}}


def sc(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "zonal.csi.pvchaos.dev",
       zones: list[str] | None = None) -> Obj:
    obj: Obj = {"kind": "StorageClass", "metadata": {"name": name}, "provisioner": provisioner,
                "volumeBindingMode": mode, "reclaimPolicy": "Delete"}
    if zones:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return obj


def failed_scheduling(message: str, name: str = "app", when: str = "2026-12-03T07:00:00Z") -> Obj:
    return {"kind": "Event", "reason": "FailedScheduling", "type": "Warning", "message": message,
            "involvedObject": {"kind": "Pod", "name": name, "namespace": NS, "uid": "u-pod"},
            "lastTimestamp": when, "metadata": {"name": f"{name}.1", "namespace": NS}}


def scene(the_pod: Obj, claims: list[Obj] = (), pvs: list[Obj] = (), classes: list[Obj] = (),
          nodes: list[Obj] | None = None, events: list[Obj] = (), minor: int | None = 35) -> Scene:
    return Scene(pod=the_pod, nodes=NODES if nodes is None else nodes,
                 claims={f"{NS}/{c['metadata']['name']}": c for c in claims}, pvs=list(pvs),
                 classes={c["metadata"]["name"]: c for c in classes}, events=list(events), minor=minor)

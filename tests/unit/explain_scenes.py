"""Object sets for the explain unit tests, shaped as a 1.35 API server returns them
(status phases, bind-completed annotations, events with involvedObject), four nodes in
zones a, a, b, c whose hostname labels differ from their names."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from pvchaos.conformance.verdicts import Scene

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NS = "app"
Obj = dict[str, Any]


def node(name: str, zone: str | None, taints: list[Obj] | None = None, unschedulable: bool = False,
         allocatable: dict[str, str] | None = None, **labels: str) -> Obj:
    labels = {HOST: f"host-{name}", **labels}
    if zone:
        labels[ZONE] = zone
    spec: Obj = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    out: Obj = {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec}
    if allocatable is not None:
        out["status"] = {"allocatable": allocatable}
    return out


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


# ---- checking a suggested command ------------------------------------------------------------

VERBS = {"get", "describe", "delete", "patch", "edit", "uncordon", "cordon", "taint", "label", "annotate", "apply"}
RESOURCES = {"pod": "Pod", "pods": "Pod", "pvc": "PersistentVolumeClaim", "pv": "PersistentVolume",
             "storageclass": "StorageClass", "node": "Node", "nodes": "Node", "csidriver": "CSIDriver",
             "events": "Event", "replicaset": "ReplicaSet", "deployment": "Deployment", "statefulset": "StatefulSet",
             "job": "Job", "daemonset": "DaemonSet", "csinode": "CSINode", "volumeattachments": "VolumeAttachment",
             "csistoragecapacities": "CSIStorageCapacity"}
CHECKED = {"Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Node"}  # kinds a scene holds
VALUE_FLAGS = {"-n", "--namespace", "-o", "--output", "-p", "--patch", "--type", "--field-selector", "-f", "-L",
               "-l", "--selector", "--context", "--kubeconfig"}
SEPARATORS = {"&&", "||", "|", ";"}


def _segments(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for t in tokens:
        if t in SEPARATORS:
            out.append([])
        else:
            out[-1].append(t)
    return [seg for seg in out if seg]


def _positional(seg: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """(positional arguments, flag values, problems) of one kubectl call, redirections dropped."""
    args, flags, problems, i = [], {}, [], 2
    while i < len(seg):
        t = seg[i]
        if t == ">":
            i += 2
            continue
        if t in VALUE_FLAGS:
            if i + 1 >= len(seg) or not seg[i + 1]:
                problems.append(f"flag {t} without a value")
            flags[t] = seg[i + 1] if i + 1 < len(seg) else ""
            i += 2
            continue
        if t.startswith("-"):
            i += 1
            continue
        args.append(t)
        i += 1
    return args, flags, problems


def command_problems(command: str, names: Mapping[str, set[str]], namespace: str) -> list[str]:
    """What is wrong with one suggested command: it must parse (shlex), each part must be a
    kubectl call with a known verb and resource, no empty or placeholder argument, a JSON
    patch that parses, the scene's namespace, and names of objects that exist in the scene."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError as exc:
        return [f"does not parse: {exc}"]
    problems = []
    for seg in _segments(tokens):
        if seg[0] != "kubectl" or len(seg) < 2:
            problems.append(f"not a kubectl call: {seg}")
            continue
        verb = seg[1]
        if verb not in VERBS:
            problems.append(f"unknown verb {verb!r}")
            continue
        args, flags, more = _positional(seg)
        problems += more
        problems += [f"empty or placeholder argument {a!r}" for a in args if not a.strip() or "<" in a or ">" in a]
        if flags.get("-n", namespace) != namespace:
            problems.append(f"namespace {flags['-n']!r}, the scene's is {namespace!r}")
        if "-p" in flags:
            try:
                json.loads(flags["-p"])
            except ValueError:
                problems.append(f"patch is not JSON: {flags['-p']!r}")
        problems += _name_problems(verb, args, flags, names)
    return problems


def _name_problems(verb: str, args: list[str], flags: dict[str, str], names: Mapping[str, set[str]]) -> list[str]:
    if verb == "apply":
        return [] if "-f" in flags else ["apply without -f"]
    if verb in ("cordon", "uncordon"):
        return [f"no node {a!r}" for a in args[:1] if a not in names["Node"]] or ([] if args else ["no node named"])
    if not args:
        return [f"{verb} without a resource"]
    kind = RESOURCES.get(args[0].split(",")[0])
    if kind is None:
        return [f"unknown resource {args[0]!r}"]
    objects = args[1:2] if verb == "taint" else args[1:]
    if verb in ("delete", "patch", "edit", "taint", "label", "annotate") and not objects:
        return [f"{verb} {args[0]} without a name"]
    if kind not in CHECKED:
        return []
    return [f"no {kind} {a!r} in the scene" for a in objects if a not in names[kind]]


def scene_names(s: Scene) -> dict[str, set[str]]:
    """The object names a command may refer to, per kind."""
    def names(objs: Any) -> set[str]:
        return {o["metadata"]["name"] for o in objs}
    return {"Pod": names([s.pod]), "PersistentVolumeClaim": names(s.claims.values()), "PersistentVolume": names(s.pvs),
            "StorageClass": names(s.classes.values()), "Node": names(s.nodes)}

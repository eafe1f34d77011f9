"""Pure builders of the Kubernetes objects the suites create, as JSON dicts.

Named parameters keep scenarios readable ("a 100Gi PV in zone-a, class manual") and
keep every test's objects the same shape, so evidence and oracle read them alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pvchaos.kube.objects import HOSTNAME_KEY, UNREACHABLE, ZONE_KEY

Obj = dict[str, Any]
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
UNSET = object()  # "leave the field out", as opposed to "" or None


def _meta(name: str, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def allowed_topologies(by_key: Mapping[str, Sequence[str]]) -> list[Obj]:
    """A StorageClass's allowedTopologies: one term requiring each key to take one of its values."""
    return [{"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in by_key.items()]}] if by_key else []


def node_selector_terms(*terms: list[tuple[str, str, list[str]]]) -> Obj:
    """A NodeSelector from terms of (key, operator, values) expressions."""
    return {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in term]}
        for term in terms
    ]}


def zone_affinity(*zones: str) -> Obj:
    """PV nodeAffinity allowing the given zones."""
    return {"required": node_selector_terms([(ZONE_KEY, "In", list(zones))])}


def label_affinity(key: str, *values: str) -> Obj:
    return {"required": node_selector_terms([(key, "In", list(values))])}


def hostname_affinity(hostname: str) -> Obj:
    return label_affinity(HOSTNAME_KEY, hostname)


NO_PROVISIONER = "kubernetes.io/no-provisioner"  # the provisioner of classes for static (e.g. local) PVs


def storage_class(name: str, provisioner: str, binding_mode: str = "WaitForFirstConsumer",
                  reclaim: str = "Delete", allowed_zones: Sequence[str] | None = None,
                  labels: dict[str, str] | None = None, parameters: Mapping[str, str] | None = None,
                  topologies: Mapping[str, Sequence[str]] | None = None) -> Obj:
    """A StorageClass. `allowed_zones` limits the zone key; `topologies` any other keys
    (e.g. {"topology.kubernetes.io/region": ["r1"]}); `parameters` go to the provisioner."""
    sc: Obj = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": _meta(name, labels),
        "provisioner": provisioner, "volumeBindingMode": binding_mode, "reclaimPolicy": reclaim,
    }
    if parameters:
        sc["parameters"] = dict(parameters)
    keys = {**({ZONE_KEY: list(allowed_zones)} if allowed_zones else {}), **(topologies or {})}
    if keys:
        sc["allowedTopologies"] = allowed_topologies(keys)
    return sc


# gRPC status code names the driver's CreateVolume may fail with (pvchaos.dev/fail-code).
# What upstream's external-provisioner makes of each (pkg/controller/controller.go
# checkError): ResourceExhausted with a selected node gives the claim back to the
# scheduler (selected-node removed), without one it is a final error retried later;
# Canceled, DeadlineExceeded, Unavailable and Aborted leave the operation "in progress"
# (retried, node kept); every other code is a final error (retried, node kept).
FAIL_CODES = ("Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
              "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
              "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated")


def provisioning_failures(times: int | None = None, nodes: Sequence[str] = (), zones: Sequence[str] = (),
                          first_node: bool = False, code: str = "ResourceExhausted", crash: bool = False,
                          reason: str | None = None, delay: str | None = None) -> dict[str, str]:
    """StorageClass parameters that make the harness's CSI driver fail CreateVolume on
    purpose (external-provisioner passes class parameters through). With no node, zone
    or first-node filter every attempt matches; `times` fails only the first N matching
    attempts of each claim (default: all). `code` is the gRPC code returned (see
    FAIL_CODES for what upstream does with it); `crash` makes the controller service exit
    in the middle of the call instead. `reason` is the error's message (it ends in the
    ProvisioningFailed event); `delay` a Go duration to wait before failing."""
    if code not in FAIL_CODES:
        raise ValueError(f"code {code!r}: use a gRPC code name, one of {', '.join(FAIL_CODES)}")
    if times is not None and times < 0:
        raise ValueError(f"times {times}: use a count >= 0, or None for every attempt")
    params = {"pvchaos.dev/fail-action": "crash"} if crash else {"pvchaos.dev/fail-code": code}
    if times is not None:
        params["pvchaos.dev/fail-times"] = str(times)
    if nodes:
        params["pvchaos.dev/fail-nodes"] = ",".join(nodes)
    if zones:
        params["pvchaos.dev/fail-zones"] = ",".join(zones)
    if first_node:
        params["pvchaos.dev/fail-first-node"] = "true"
    if reason:
        params["pvchaos.dev/fail-reason"] = reason
    if delay:
        params["pvchaos.dev/fail-delay"] = delay
    return params


def mountable(pv: Obj, root: str) -> Obj:
    """The PV with a stand-in CSI source replaced by a hostPath directory under `root`
    that a real kubelet creates; `local` and other sources are left alone."""
    spec = pv.get("spec") or {}
    csi = spec.get("csi")
    if not csi or not str(csi.get("driver", "")).endswith(".pvchaos.dev"):
        return pv
    name = pv["metadata"]["name"]
    rest = {k: v for k, v in spec.items() if k != "csi"}
    return {**pv, "spec": {**rest, "hostPath": {"path": f"{root}/{name}", "type": "DirectoryOrCreate"}}}


def csi_driver(name: str, storage_capacity: bool = False, attach_required: bool = False,
               labels: dict[str, str] | None = None) -> Obj:
    """A CSIDriver object; `storage_capacity` makes the scheduler consult CSIStorageCapacity."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": _meta(name, labels),
            "spec": {"attachRequired": attach_required, "podInfoOnMount": False,
                     "storageCapacity": storage_capacity}}


def csi_storage_capacity(name: str, storage_class: str, capacity: str | None,
                         topology: Mapping[str, str] | None = None, maximum_volume_size: str | None = None,
                         labels: dict[str, str] | None = None) -> Obj:
    """What a CSI driver publishes: `capacity` of `storage_class` available on the nodes
    whose labels match `topology` (None: no segment, capacity everywhere unknown)."""
    obj: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": _meta(name, labels),
                "storageClassName": storage_class}
    if topology is not None:
        obj["nodeTopology"] = {"matchLabels": dict(topology)}
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum_volume_size is not None:
        obj["maximumVolumeSize"] = maximum_volume_size
    return obj


def unreachable_toleration(seconds: int) -> Obj:
    """Tolerate the node-lifecycle controller's unreachable NoExecute taint for `seconds`."""
    return {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def persistent_volume(name: str, capacity: str, storage_class: str = "", access_modes: tuple[str, ...] = ("ReadWriteOnce",),
                      volume_mode: str | None = None, reclaim: str = "Retain", affinity: Obj | None = None,
                      labels: dict[str, str] | None = None, local_path: str | None = None,
                      claim_ref: tuple[str, str] | None = None, annotations: Mapping[str, str] | None = None) -> Obj:
    """A static PV. `local_path` makes a `local` volume (which upstream requires to carry
    node affinity); otherwise a CSI volume of a driver that needs no attach."""
    source: Obj = ({"local": {"path": local_path}} if local_path
                   else {"csi": {"driver": "static.csi.pvchaos.dev", "volumeHandle": name}})
    spec: Obj = {
        "capacity": {"storage": capacity},
        "accessModes": list(access_modes),
        "persistentVolumeReclaimPolicy": reclaim,
        "storageClassName": storage_class,
        **source,
    }
    if volume_mode:
        spec["volumeMode"] = volume_mode
    if affinity is not None:
        spec["nodeAffinity"] = affinity
    if claim_ref:
        spec["claimRef"] = {"namespace": claim_ref[0], "name": claim_ref[1]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": _meta(name, labels, annotations), "spec": spec}


def persistent_volume_claim(name: str, request: str, storage_class: Any = UNSET,
                            access_modes: tuple[str, ...] = ("ReadWriteOnce",), volume_mode: str | None = None,
                            selector: Obj | None = None, volume_name: str | None = None,
                            labels: dict[str, str] | None = None, annotations: Mapping[str, str] | None = None) -> Obj:
    """`storage_class=UNSET` leaves the field out (default class); "" asks for class-less PVs."""
    spec: Obj = {"accessModes": list(access_modes), "resources": {"requests": {"storage": request}}}
    if storage_class is not UNSET:
        spec["storageClassName"] = storage_class
    if volume_mode:
        spec["volumeMode"] = volume_mode
    if selector:
        spec["selector"] = selector
    if volume_name:
        spec["volumeName"] = volume_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(name, labels, annotations),
            "spec": spec}


def volume_snapshot(name: str, claim: str, snapshot_class: str, labels: dict[str, str] | None = None) -> Obj:
    """A VolumeSnapshot of a claim of the same namespace (dynamic: the snapshot-controller
    makes its content, the driver's csi-snapshotter cuts it)."""
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": _meta(name, labels),
            "spec": {"volumeSnapshotClassName": snapshot_class, "source": {"persistentVolumeClaimName": claim}}}


def with_data_source(claim: Obj, kind: str, name: str) -> Obj:
    """The claim, made from a VolumeSnapshot (a restore) or a PersistentVolumeClaim (a clone)."""
    group = {"VolumeSnapshot": "snapshot.storage.k8s.io"}.get(kind)
    source = {"kind": kind, "name": name, **({"apiGroup": group} if group else {})}
    return {**claim, "spec": {**claim["spec"], "dataSource": source}}


def device_path(index: int) -> str:
    """Where `pod(..., devices=...)` puts its `index`-th block claim in the container."""
    return f"/dev/block{index}"
def inline_csi_volume(driver: str, attributes: Mapping[str, str] | None = None, read_only: bool = False) -> Obj:
    """A pod volume's `csi` source: a CSI inline ephemeral volume of `driver` (no claim, no
    PV; the kubelet publishes it with the attributes as volume_context)."""
    source: Obj = {"driver": driver}
    if attributes:
        source["volumeAttributes"] = dict(attributes)
    if read_only:
        source["readOnly"] = True
    return source


def pod(name: str, claims: tuple[str, ...] = (), node_selector: dict[str, str] | None = None,
        node_affinity: Obj | None = None, tolerations: list[Obj] | None = None, labels: dict[str, str] | None = None,
        requests: dict[str, str] | None = None, node_name: str | None = None,
        extra_spec: Obj | None = None, annotations: Mapping[str, str] | None = None,
        devices: tuple[str, ...] = (), inline: Sequence[Obj] = ()) -> Obj:
    """A pause pod mounting each claim, then each inline CSI source (`inline_csi_volume`),
    as volumes v0, v1... at /data/0, /data/1..., and giving each claim of `devices`
    (volumeMode Block) as a raw device at `device_path(i)` (`volumeDevices`). KWOK runs it
    without looking at the volumes; the scheduler still requires bound claims and
    matching PV affinity."""
    container: Obj = {"name": "app", "image": PAUSE_IMAGE}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    sources: list[Obj] = [{"persistentVolumeClaim": {"claimName": c}} for c in claims]
    sources += [{"csi": dict(source)} for source in inline]
    if sources:
        container["volumeMounts"] = [{"name": f"v{i}", "mountPath": f"/data/{i}"} for i in range(len(sources))]
    if devices:
        container["volumeDevices"] = [{"name": f"d{i}", "devicePath": device_path(i)} for i in range(len(devices))]
    spec: Obj = {
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
        "volumes": [{"name": f"v{i}", **source} for i, source in enumerate(sources)]
        + [{"name": f"d{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(devices)],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": node_affinity}}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    spec.update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, labels, annotations), "spec": spec}


def ephemeral_deployment(name: str, storage_class: str, request: str = "1Gi", pod_spec_extra: Obj | None = None) -> Obj:
    """A one-replica Deployment of a pause pod with a generic ephemeral volume `data`: the
    ephemeral-volume controller makes each pod its own claim (`<pod>-data`, owned by the
    pod), WaitForFirstConsumer like any claim of the class, and it goes with the pod."""
    match = {"app": name}
    template = {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                "resources": {"requests": {"storage": request}}}
    spec: Obj = {
        "containers": [{"name": "app", "image": PAUSE_IMAGE, "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "terminationGracePeriodSeconds": 0,
        "volumes": [{"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": template}}}],
        **(pod_spec_extra or {}),
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {}},
            "spec": {"replicas": 1, "selector": {"matchLabels": match},
                     "template": {"metadata": {"labels": match}, "spec": spec}}}


def statefulset(name: str, replicas: int, storage_class: str, request: str = "1Gi",
                pod_spec_extra: Obj | None = None, labels: dict[str, str] | None = None) -> Obj:
    """A StatefulSet of pause pods, each with one claim from `storage_class`."""
    match = {"app": name}
    spec: Obj = {
        "containers": [{"name": "app", "image": PAUSE_IMAGE, "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "terminationGracePeriodSeconds": 0,
        **(pod_spec_extra or {}),
    }
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": {**match, **(labels or {})}}, "spec": spec},
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                         "resources": {"requests": {"storage": request}}},
            }],
        },
    }

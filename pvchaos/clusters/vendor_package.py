"""A vendor's CSI driver package, read and checked without a cluster: the storage stack
a cluster can be started with (pvchaos/clusters/storage.py) and what `pvchaos certify`
certifies.

A driver directory is read once into a typed `DriverPackage` (load, validate, then pass the
typed thing): manifests in name order, image archives, an optional driver profile, the
CSIDriver object. Everything that can be refused before a cluster starts is refused here,
in one line: no manifests, a YAML document that is not a Kubernetes object, no CSIDriver,
no StorageClass of that driver, no workload, an archive that is not what `docker save`
writes, an image the manifests use that no archive holds (there is no registry).

A package may provision centrally (a Deployment or StatefulSet beside the driver's
controller) or per node (external-provisioner with --node-deployment in the node
DaemonSet, no controller at all): both are packages vendors ship.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")

class PackageError(ValueError):
    """A driver directory was refused; the message is one line naming the file and why."""


class MissingImage(PackageError):
    """An image the manifests run is in no archive of images/."""


def _per_node(args: list[str]) -> bool:
    """A sidecar run per node (upstream's `--node-deployment`)."""
    return "--node-deployment" in args or "--node-deployment=true" in args


@dataclass(frozen=True)
class Workload:
    """A Deployment, StatefulSet or DaemonSet of the package, and the images it runs."""

    kind: str
    namespace: str
    name: str
    images: tuple[str, ...]

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class DriverPackage:
    """A validated driver directory."""

    directory: Path
    manifests: tuple[Path, ...]
    images: tuple[Path, ...]
    image_names: tuple[str, ...]  # the RepoTags of the archives
    profile: Path | None
    driver_name: str
    storage_class: str
    workloads: tuple[Workload, ...]
    csidriver: Mapping[str, Any] = field(default_factory=dict)  # the CSIDriver object as the manifests hold it
    objects: tuple[tuple[Path, Mapping[str, Any]], ...] = ()  # every object, with its file, in apply order

    @property
    def attach_required(self) -> bool:
        """CSIDriver spec.attachRequired (the API server's default is true)."""
        return bool((self.csidriver.get("spec") or {}).get("attachRequired", True))

    @property
    def publishes_capacity(self) -> bool:
        """CSIDriver spec.storageCapacity: its provisioner publishes CSIStorageCapacity objects."""
        return bool((self.csidriver.get("spec") or {}).get("storageCapacity", False))

    @property
    def lifecycle_modes(self) -> tuple[str, ...]:
        """CSIDriver spec.volumeLifecycleModes (the API server's default is [Persistent]):
        with Ephemeral the kubelet takes the driver's inline volumes (pods' `volumes[].csi`)."""
        return tuple(str(m) for m in (self.csidriver.get("spec") or {}).get("volumeLifecycleModes") or ["Persistent"])

    @property
    def provisions_immediate(self) -> bool:
        """Claims of an Immediate class get volumes. Not where external-provisioner runs per
        node (`--node-deployment`) with `--node-deployment-immediate-binding=false`: it then
        provisions only for the node a pod was scheduled to (WaitForFirstConsumer)."""
        return not any(_per_node(args) and "--node-deployment-immediate-binding=false" in args
                       for _, args in self._containers())

    @property
    def runs_snapshotter(self) -> bool:
        """A container of the package runs upstream's csi-snapshotter sidecar (by its image
        name, as vendors ship it): the driver's part of snapshots; the cluster brings the
        CRDs and the snapshot-controller."""
        return any("csi-snapshotter" in normalise_image(i).rsplit("/", 1)[-1] for w in self.workloads for i in w.images)

    @property
    def snapshots_on_nodes(self) -> bool:
        """Its csi-snapshotter runs per node (`--node-deployment`, upstream's distributed
        snapshotting): the cluster's snapshot-controller must then label each content with
        the node that cuts it (`--enable-distributed-snapshotting`), or no sidecar takes it."""
        return any("csi-snapshotter" in normalise_image(image) and _per_node(args)
                   for image, args in self._containers())

    def _containers(self) -> Iterator[tuple[str, list[str]]]:
        """(image, args) of every container of the package's pod templates."""
        for _, obj in self.objects:
            pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
            for c in pod.get("containers") or []:
                if isinstance(c, dict):
                    yield str(c.get("image", "")), [str(a) for a in c.get("args") or []]

    @property
    def runs_resizer(self) -> bool:
        """A container of the package runs upstream's csi-resizer sidecar: the driver's part
        of expansion and of VolumeAttributesClass changes (kube-controller-manager's expand
        controller hands the claim to it)."""
        return any("csi-resizer" in normalise_image(i).rsplit("/", 1)[-1] for w in self.workloads for i in w.images)

    @property
    def controllers(self) -> tuple[Workload, ...]:
        return tuple(w for w in self.workloads if w.kind != "DaemonSet")

    @property
    def node_plugins(self) -> tuple[Workload, ...]:
        return tuple(w for w in self.workloads if w.kind == "DaemonSet")


def _docs(path: Path) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PackageError(f"{path}: not readable YAML: {first}") from None


def _is_profile(docs: list[Any]) -> bool:
    return len(docs) == 1 and isinstance(docs[0], dict) and "DriverInfo" in docs[0]


def _images_of(obj: Mapping[str, Any]) -> tuple[str, ...]:
    pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = list(pod.get("initContainers") or []) + list(pod.get("containers") or [])
    return tuple(str(c.get("image")) for c in containers if isinstance(c, dict) and c.get("image"))


def normalise_image(name: str) -> str:
    """`busybox` and `docker.io/library/busybox:latest` are the same image to containerd."""
    if "@" not in name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    first = name.split("/", 1)[0]
    if "/" not in name or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name if '/' in name else 'library/' + name}"
    return name


def archive_tags(path: Path) -> tuple[str, ...]:
    """The image names in a `docker save` (or OCI layout) archive; refuses anything else."""
    try:
        with tarfile.open(path) as tar:
            names = set(tar.getnames())
            if "manifest.json" in names:
                member = tar.extractfile("manifest.json")
                manifest = json.loads(member.read()) if member else []
                return tuple(t for entry in manifest for t in entry.get("RepoTags") or [])
            if "index.json" in names and "oci-layout" in names:
                member = tar.extractfile("index.json")
                index = json.loads(member.read()) if member else {}
                return tuple(str(m.get("annotations", {}).get("io.containerd.image.name")
                                 or m.get("annotations", {}).get("org.opencontainers.image.ref.name") or "")
                             for m in index.get("manifests") or [] if m.get("annotations"))
    except (OSError, tarfile.TarError, ValueError, AttributeError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PackageError(f"{path}: not an image archive ({why}); give what `docker save` writes") from None
    raise PackageError(f"{path}: not an image archive (no manifest.json or index.json; give what `docker save` writes)")


def load_package(directory: Path | str, need_images: bool = True) -> DriverPackage:
    """Read and check a driver directory. `need_images`: every image the manifests run must
    be in images/*.tar (the kind backend; an existing cluster pulls its own)."""
    root = Path(directory)
    if not root.is_dir():
        raise PackageError(f"--driver-dir {root}: not a directory")
    manifests: list[Path] = []
    profile: Path | None = None
    objects: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted([*root.glob("*.yaml"), *root.glob("*.yml")], key=lambda p: p.name):
        docs = _docs(path)
        if _is_profile(docs):
            if profile is not None:
                raise PackageError(f"{path}: a second driver profile (the first is {profile.name}); give one")
            profile = path
            continue
        for i, doc in enumerate(docs, 1):
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if not (isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind")
                    and isinstance(meta, dict) and meta.get("name")):
                raise PackageError(f"{path}: document {i} is not a Kubernetes object (apiVersion, kind and "
                                   f"metadata.name are required)")
            objects.append((path, doc))
        if docs:
            manifests.append(path)
    if not manifests:
        raise PackageError(f"--driver-dir {root}: no manifests (*.yaml files with Kubernetes objects)")
    drivers = [d for _, d in objects if d["kind"] == "CSIDriver"]
    if len(drivers) != 1:
        raise PackageError(f"--driver-dir {root}: the manifests hold {len(drivers)} CSIDriver objects; "
                           f"certify needs exactly one")
    driver = str(drivers[0]["metadata"]["name"])
    classes = sorted(str(d["metadata"]["name"]) for _, d in objects
                     if d["kind"] == "StorageClass" and d.get("provisioner") == driver)
    if not classes:
        raise PackageError(f"--driver-dir {root}: no StorageClass with provisioner {driver}; the suites use the "
                           f"vendor's class")
    workloads = tuple(Workload(str(d["kind"]), str(d["metadata"].get("namespace") or "default"),
                               str(d["metadata"]["name"]), _images_of(d))
                      for _, d in objects if d["kind"] in WORKLOAD_KINDS)
    if not workloads:
        raise PackageError(f"--driver-dir {root}: no workload (a Deployment, StatefulSet or DaemonSet) runs the "
                           f"driver")
    archives = tuple(sorted((root / "images").glob("*.tar")))
    tags: list[str] = []
    for archive in archives:
        tags += archive_tags(archive)
    if need_images:
        have = {normalise_image(t) for t in tags}
        for w in workloads:
            for image in w.images:
                if normalise_image(image) not in have:
                    raise MissingImage(f"{w.ref} runs image {image}, which is in no archive of "
                                       f"{root / 'images'} (there is no registry: `docker save` it there)")
    return DriverPackage(root, tuple(manifests), archives, tuple(tags), profile, driver, classes[0], workloads,
                         drivers[0], tuple(objects))

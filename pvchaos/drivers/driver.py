"""What provisions volumes, as an object the suites ask: upstream's TestDriver, in Python.

Upstream's storage suites never build a StorageClass by hand: they call the driver's
`GetDynamicProvisionStorageClass` and then set the binding mode or allowed topologies
the pattern needs (test/e2e/storage/framework/testdriver.go, external/external.go).
Here a suite calls `ws.driver.storage_class(name, binding_mode, allowed_zones)`; the
harness's own test provisioners and a vendor's driver profile answer the same call, so
the profile's class (with its `parameters`) reaches every suite.

- `HarnessDriver`: the cluster's own test provisioners (zonal and node-local), as the
  backend declared them on its handle.
- `ProfileDriver`: a driver profile (drivers/profile.py). `FromName` uses the driver name
  as provisioner; `FromFile` copies the file's class (provisioner, parameters, mount
  options, expansion); `FromExistingClassName` copies the named class from the cluster,
  as upstream does, so the suites never change the vendor's own class.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml

from pvchaos.clusters.backend import Capability, CapabilityMissing, ClusterHandle
from pvchaos.clusters.csi import DRIVER_NAME, INLINE_SIZE_ATTRIBUTE, TOPOLOGY_PARAMETER
from pvchaos.clusters.csi import MUTABLE_TIER_PARAMETER as _TIER
from pvchaos.drivers.profile import DriverProfile, effective_capabilities, missing_reason
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import ZONE_KEY

NO_PROVISIONER = b.NO_PROVISIONER
_COPIED = ("provisioner", "parameters", "mountOptions", "allowVolumeExpansion", "reclaimPolicy")


class DriverError(RuntimeError):
    """The driver cannot give a suite what it asked for; the message names the driver."""


class Driver(Protocol):
    """A storage driver as the suites see it."""

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def missing(self, capability: str) -> CapabilityMissing | None:
        """Why a test needing `capability` cannot run with this driver, or None."""
        ...

    def storage_class(self, name: str, binding_mode: str = "WaitForFirstConsumer",
                      allowed_zones: Sequence[str] | None = None, reclaim: str | None = None,
                      allowed_topologies: Mapping[str, Sequence[str]] | None = None) -> Obj:
        """The body of a dynamic-provisioning class for one test (create it with ws.create)."""
        ...

    def local_class(self, name: str, reclaim: str | None = None) -> Obj:
        """A WaitForFirstConsumer class whose volumes are pinned to one node."""
        ...

    def snapshot_class(self, name: str) -> Obj:
        """The body of a VolumeSnapshotClass of this driver for one test (deletionPolicy
        Delete unless the driver's own class says otherwise)."""
        ...

    def volume_attributes_class(self, name: str) -> Obj:
        """The body of a VolumeAttributesClass of this driver for one test (its parameters
        are the driver's mutable parameters, ControllerModifyVolume's)."""
        ...

    def inline_volume(self, number: int = 0) -> Obj:
        """A pod volume's `csi` source of this driver (a CSI inline ephemeral volume, no
        claim, no PV), with the attributes the driver wants; put it in a pod with
        `b.pod(..., inline=[...])`."""
        ...


def _snapshot_class(name: str, base: Obj) -> Obj:
    """A snapshot class for one test: the driver's base (driver, parameters, policy) with this name."""
    return {"apiVersion": f"{kinds.SNAPSHOT_GROUP}/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": name, "labels": {}}, "driver": base["driver"],
            "deletionPolicy": base.get("deletionPolicy") or "Delete",
            **({"parameters": copy.deepcopy(base["parameters"])} if base.get("parameters") else {})}


def _topologies(allowed_zones: Sequence[str] | None, allowed_topologies: Mapping[str, Sequence[str]] | None,
                zone_key: str) -> list[Obj]:
    """allowedTopologies from zones (on the driver's zone key) and/or any other keys."""
    return b.allowed_topologies({**({zone_key: list(allowed_zones)} if allowed_zones else {}),
                                 **(allowed_topologies or {})})


def _shape(base: Obj, name: str, binding_mode: str, topologies: list[Obj], reclaim: str | None) -> Obj:
    """A class for one test: the driver's base with this test's name, mode and topology."""
    sc = {k: copy.deepcopy(v) for k, v in base.items() if k in _COPIED}
    sc.update({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name, "labels": {}},
               "volumeBindingMode": binding_mode})
    sc["reclaimPolicy"] = reclaim or sc.get("reclaimPolicy") or "Delete"
    if topologies:
        sc["allowedTopologies"] = topologies
    return sc


@dataclass(frozen=True)
class HarnessDriver:
    """The backend's own test provisioners (local: the zonal CSI test driver and the
    node-local one)."""

    cluster: ClusterHandle

    @property
    def name(self) -> str:
        return self.cluster.zonal_class_provisioner or f"{self.cluster.backend} (no provisioner)"

    @property
    def capabilities(self) -> frozenset[str]:
        return self.cluster.capabilities

    def missing(self, capability: str) -> CapabilityMissing | None:
        return missing_for(self.cluster.capabilities, self.cluster.backend, None, capability)

    def storage_class(self, name: str, binding_mode: str = "WaitForFirstConsumer",
                      allowed_zones: Sequence[str] | None = None, reclaim: str | None = None,
                      allowed_topologies: Mapping[str, Sequence[str]] | None = None) -> Obj:
        if not self.cluster.zonal_class_provisioner:
            raise DriverError(f"backend {self.cluster.backend} has no zonal provisioner (no dynamic-zonal)")
        base = {"provisioner": self.cluster.zonal_class_provisioner}
        return _shape(base, name, binding_mode, _topologies(allowed_zones, allowed_topologies, ZONE_KEY), reclaim)

    def local_class(self, name: str, reclaim: str | None = None) -> Obj:
        if not self.cluster.local_class_provisioner:
            raise DriverError(f"backend {self.cluster.backend} has no node-local provisioner (no dynamic-local)")
        sc = b.storage_class(name, self.cluster.local_class_provisioner, "WaitForFirstConsumer",
                             reclaim=reclaim or "Delete")
        if self.cluster.local_class_provisioner == DRIVER_NAME:  # one CSI driver: the class picks node affinity
            sc["parameters"] = {**sc.get("parameters", {}), TOPOLOGY_PARAMETER: "node"}
        return sc

    def snapshot_class(self, name: str) -> Obj:
        if not self.cluster.zonal_class_provisioner:
            raise DriverError(f"backend {self.cluster.backend} has no provisioner (no snapshots)")
        return _snapshot_class(name, {"driver": self.cluster.zonal_class_provisioner})

    def volume_attributes_class(self, name: str) -> Obj:
        """pvchaos-csi's class of attributes: the fast tier (its one mutable parameter)."""
        if not self.cluster.zonal_class_provisioner:
            raise DriverError(f"backend {self.cluster.backend} has no provisioner (no modify-volume)")
        return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                "metadata": {"name": name, "labels": {}}, "driverName": self.cluster.zonal_class_provisioner,
                "parameters": {_TIER: "fast"}}

    def inline_volume(self, number: int = 0) -> Obj:
        """pvchaos-csi's inline volume asks for a size (the node checks its free space for it)."""
        if Capability.INLINE_EPHEMERAL not in self.cluster.capabilities or not self.cluster.zonal_class_provisioner:
            raise DriverError(f"backend {self.cluster.backend} has no inline-ephemeral driver")
        driver = self.cluster.zonal_class_provisioner
        return b.inline_csi_volume(driver, {INLINE_SIZE_ATTRIBUTE: "16Mi"} if driver == DRIVER_NAME else None)


@dataclass(frozen=True)
class ProfileDriver:
    """A vendor's driver, from its profile; `kube` reads a FromExistingClassName class."""

    profile: DriverProfile
    cluster: ClusterHandle
    kube: Kube | None = None

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def capabilities(self) -> frozenset[str]:
        return effective_capabilities(self.cluster.capabilities, self.profile)

    def missing(self, capability: str) -> CapabilityMissing | None:
        return missing_for(self.cluster.capabilities, self.cluster.backend, self.profile, capability)

    def base_class(self) -> Obj:
        """The driver's class as its profile names it (upstream's precedence: FromName,
        FromExistingClassName, FromFile)."""
        source = self.profile.storage_class_source
        if source == "FromExistingClassName":
            if self.kube is None:
                raise DriverError(f"driver {self.name}: FromExistingClassName needs a cluster to read the class from")
            name = self.profile.storage_class_name or ""
            existing = kinds.get(self.kube, "StorageClass", name)
            if existing is None:
                raise DriverError(f"driver {self.name}: StorageClass.FromExistingClassName {name!r} "
                                  f"does not exist in the cluster")
            return existing
        if source in ("FromName", "FromFile") and self.profile.storage_class:
            return self.profile.storage_class
        raise DriverError(f"driver {self.name}: the profile sets no StorageClass source (no dynamic provisioning)")

    def storage_class(self, name: str, binding_mode: str = "WaitForFirstConsumer",
                      allowed_zones: Sequence[str] | None = None, reclaim: str | None = None,
                      allowed_topologies: Mapping[str, Sequence[str]] | None = None) -> Obj:
        zone_key = next((k for k in self.profile.topology_keys if "zone" in k), ZONE_KEY)
        return _shape(self.base_class(), name, binding_mode,
                      _topologies(allowed_zones, allowed_topologies, zone_key), reclaim)

    def local_class(self, name: str, reclaim: str | None = None) -> Obj:
        if Capability.DYNAMIC_LOCAL not in self.capabilities:
            raise DriverError(f"driver {self.name}: no dynamic-local (singleNodeVolume and topology)")
        return self.storage_class(name, "WaitForFirstConsumer", reclaim=reclaim)

    def snapshot_class(self, name: str) -> Obj:
        """The profile's SnapshotClass, as upstream reads it: FromName (the driver's name,
        no parameters), FromExistingClassName (copied from the cluster), FromFile."""
        source = self.profile.snapshot_class_source
        section = self.profile.raw.get("SnapshotClass") or {}
        if source == "FromName":
            return _snapshot_class(name, {"driver": self.name})
        if source == "FromExistingClassName":
            existing_name = str(section.get("FromExistingClassName"))
            existing = kinds.get(self.kube, "VolumeSnapshotClass", existing_name) if self.kube else None
            if existing is None:
                raise DriverError(f"driver {self.name}: SnapshotClass.FromExistingClassName {existing_name!r} "
                                  "does not exist in the cluster")
            return _snapshot_class(name, existing)
        if source == "FromFile":
            path = Path(self.profile.source).parent / str(section.get("FromFile"))
            try:
                return _snapshot_class(name, yaml.safe_load(path.read_text()))
            except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
                raise DriverError(f"driver {self.name}: SnapshotClass.FromFile {path}: {exc}") from None
        raise DriverError(f"driver {self.name}: the profile sets no SnapshotClass source (no snapshots)")

    def volume_attributes_class(self, name: str) -> Obj:
        """The profile's VolumeAttributesClass, as upstream reads it: FromExistingClassName
        (copied from the cluster) or FromFile."""
        section = self.profile.raw.get("VolumeAttributesClass") or {}
        base: Obj | None = None
        if self.profile.volume_attributes_class_source == "FromExistingClassName":
            existing_name = str(section.get("FromExistingClassName"))
            base = kinds.get(self.kube, "VolumeAttributesClass", existing_name) if self.kube else None
            if base is None:
                raise DriverError(f"driver {self.name}: VolumeAttributesClass.FromExistingClassName "
                                  f"{existing_name!r} does not exist in the cluster")
        elif self.profile.volume_attributes_class_source == "FromFile":
            path = Path(self.profile.source).parent / str(section.get("FromFile"))
            try:
                base = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as exc:
                raise DriverError(f"driver {self.name}: VolumeAttributesClass.FromFile {path}: {exc}") from None
        if not isinstance(base, dict):
            raise DriverError(f"driver {self.name}: the profile sets no VolumeAttributesClass (no modify-volume)")
        return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                "metadata": {"name": name, "labels": {}}, "driverName": base.get("driverName") or self.name,
                **({"parameters": copy.deepcopy(base["parameters"])} if base.get("parameters") else {})}
    def inline_volume(self, number: int = 0) -> Obj:
        """The profile's InlineVolumes[number] (upstream's GetVolume): its Attributes as the
        volumeAttributes, ReadOnly as the source's readOnly."""
        entry = self.profile.inline_volume(number)
        if not entry:
            raise DriverError(f"driver {self.name}: the profile lists no InlineVolumes (no inline-ephemeral)")
        return b.inline_csi_volume(self.name, entry.get("Attributes") or None, bool(entry.get("ReadOnly")))


# What a backend reads from the driver's own objects (its package runs csi-snapshotter or
# csi-resizer; its CSIDriver lists Ephemeral): when the backend lacks one, that is the
# reason ("not supported", the backend's missing_details), before what the profile lacks.
_BACKEND_FIRST = (Capability.SNAPSHOTS, Capability.INLINE_EPHEMERAL, Capability.EXPANSION, Capability.MODIFY_VOLUME)


def missing_for(backend_capabilities: frozenset[str], backend: str, profile: DriverProfile | None,
                capability: str) -> CapabilityMissing | None:
    """Why a test needing `capability` cannot run on this backend with this driver (None:
    it can). Needs only the capabilities, so it is decided before a cluster starts."""
    effective = effective_capabilities(backend_capabilities, profile) if profile else backend_capabilities
    if capability in effective:
        return None
    if capability in _BACKEND_FIRST and capability not in backend_capabilities:
        return CapabilityMissing(capability, f"backend {backend}")
    reason = missing_reason(profile, capability) if profile else None
    if reason is None:
        return CapabilityMissing(capability, f"backend {backend}")
    return CapabilityMissing(reason[0], f"driver {profile.name}", reason[1]) if profile else None


def driver_for(cluster: ClusterHandle, profile: DriverProfile | None, kube: Kube | None = None) -> Driver:
    """The driver of this run: the profile's when one was given, else the backend's own."""
    if profile is None:
        return HarnessDriver(cluster)
    return ProfileDriver(profile, cluster, kube)

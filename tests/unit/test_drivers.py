"""Drivers answer the suites' questions (no cluster needed): which class to create,
with the profile's parameters, and why a capability is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvchaos.clusters.backend import Capability, CapabilityMissing, ClusterHandle
from pvchaos.drivers.driver import DriverError, HarnessDriver, ProfileDriver, missing_for
from pvchaos.drivers.profile import parse_profile

LOCAL_CAPS = frozenset({Capability.ZONES, Capability.STATIC_PV, Capability.DYNAMIC_ZONAL, Capability.OWNED})


def handle(**kw: object) -> ClusterHandle:
    fields: dict = {"name": "c", "backend": "local", "kubeconfig": Path("/nowhere"), "context": None,
                    "k8s_version": "v1.35.4", "capabilities": LOCAL_CAPS,
                    "zonal_class_provisioner": "zonal.csi.pvchaos.dev", **kw}
    return ClusterHandle(**fields)


def profile(storage_class: dict, caps: dict | None = None, base: Path | None = None):  # type: ignore[no-untyped-def]
    return parse_profile({"StorageClass": storage_class, "DriverInfo": {
        "Name": "csi.example.com", "TopologyKeys": ["topology.example.com/zone"],
        "Capabilities": caps or {"persistence": True, "topology": True}}}, "driver.yaml", base)


def test_harness_driver_builds_the_backends_class() -> None:
    sc = HarnessDriver(handle()).storage_class("sc-1", "Immediate", ["zone-a"], "Retain")
    assert (sc["metadata"]["name"], sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        "sc-1", "zonal.csi.pvchaos.dev", "Immediate", "Retain")
    assert sc["allowedTopologies"] == [{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["zone-a"]}]}]


def test_harness_driver_without_provisioner_says_so() -> None:
    with pytest.raises(DriverError, match="no zonal provisioner"):
        HarnessDriver(handle(zonal_class_provisioner=None)).storage_class("sc")


def test_from_name_uses_the_driver_name_as_provisioner() -> None:
    sc = ProfileDriver(profile({"FromName": True}), handle()).storage_class("sc-2", allowed_zones=["z1"])
    assert sc["provisioner"] == "csi.example.com"
    # the zone key is the driver's own topology key, as upstream's topology suite uses it
    assert sc["allowedTopologies"][0]["matchLabelExpressions"][0]["key"] == "topology.example.com/zone"


def test_from_file_keeps_the_vendors_parameters(tmp_path: Path) -> None:
    (tmp_path / "sc.yaml").write_text(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: vendor}\n"
        "provisioner: csi.example.com\nparameters: {type: gp3, iops: '3000'}\nmountOptions: [noatime]\n"
        "allowVolumeExpansion: true\n")
    driver = ProfileDriver(profile({"FromFile": "sc.yaml"}, base=tmp_path), handle())
    sc = driver.storage_class("sc-3", "WaitForFirstConsumer", allowed_topologies={"example.com/rack": ["r1"]})
    assert sc["parameters"] == {"type": "gp3", "iops": "3000"} and sc["mountOptions"] == ["noatime"]
    assert sc["allowVolumeExpansion"] is True and sc["metadata"]["name"] == "sc-3"
    assert sc["allowedTopologies"] == [{"matchLabelExpressions": [{"key": "example.com/rack", "values": ["r1"]}]}]


def test_from_existing_class_needs_the_cluster() -> None:
    driver = ProfileDriver(profile({"FromExistingClassName": "gold"}), handle())
    with pytest.raises(DriverError, match="FromExistingClassName"):
        driver.storage_class("sc-4")


def test_missing_capability_is_structured() -> None:
    assert missing_for(LOCAL_CAPS, "local", None, Capability.RWX) == CapabilityMissing("rwx", "backend local")
    no_topology = profile({"FromName": True}, caps={"persistence": True, "topology": False})
    got = missing_for(LOCAL_CAPS, "local", no_topology, Capability.DYNAMIC_ZONAL)
    assert got == CapabilityMissing("dynamic-zonal", "driver csi.example.com",
                                    "profile capability topology=false: not supported")
    assert str(got) == "driver csi.example.com: no dynamic-zonal (profile capability topology=false: not supported)"
    assert missing_for(LOCAL_CAPS, "local", None, Capability.ZONES) is None


def test_capability_words_are_checked() -> None:
    assert Capability.parse("node-failure") is Capability.NODE_FAILURE
    with pytest.raises(ValueError, match="unknown capability 'zone'; known: zones"):
        Capability.parse("zone")

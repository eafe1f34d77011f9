"""Driver profiles: upstream's external storage test driver file, read strictly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pvchaos.clusters.backend import Capability
from pvchaos.clusters.topology import Topology
from pvchaos.drivers.profile import (
    ProfileError,
    check_against_cluster,
    effective_capabilities,
    harness_capabilities,
    load_profile,
    parse_profile,
    skip_reason,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "driver-profile.yaml"
# Upstream's own testdata (test/e2e/storage/external/testdata/driver.yaml and driver.json).
UPSTREAM_YAML = "DriverInfo:\n  Name: foo.example.com\n  SupportedSizeRange:\n    Min: 10Gi\nShortName: foo\n"
UPSTREAM_JSON = '{"DriverInfo": {"Name": "foo.example.com", "SupportedSizeRange": { "Min": "10Gi"}}, "ShortName": "foo"}'


def profile(**driver_info) -> dict:
    return {"StorageClass": {"FromName": True},
            "DriverInfo": {"Name": "csi.example.com", **driver_info}}


def refused(data: dict) -> str:
    with pytest.raises(ProfileError) as err:
        parse_profile(data, "p.yaml")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("driver profile p.yaml: ")
    return msg.removeprefix("driver profile p.yaml: ")


def test_the_shipped_example_parses() -> None:
    p = load_profile(EXAMPLE)
    assert (p.name, p.short_name) == ("zonal.csi.pvchaos.dev", "pvchaos-zonal")
    assert p.storage_class_source == "FromName" and p.storage_class["provisioner"] == "zonal.csi.pvchaos.dev"
    assert p.topology_keys == ("topology.kubernetes.io/zone",) and p.num_allowed_topologies == 1
    assert (p.size_min, p.size_max) == ("1Mi", "1Ti")
    assert p.capabilities["topology"] is True and p.capabilities["exec"] is False
    assert p.timeouts == {"ClaimProvision": "1m", "PodStart": "2m"}
    assert harness_capabilities(p) == {Capability.ZONES, Capability.DYNAMIC_ZONAL, Capability.STATIC_PV,
                                       Capability.BLOCK, Capability.RWX}


@pytest.mark.parametrize("suffix,text", [(".yaml", UPSTREAM_YAML), (".json", UPSTREAM_JSON)])
def test_upstream_testdata_parses_with_upstream_defaults(tmp_path: Path, suffix: str, text: str) -> None:
    f = tmp_path / f"driver{suffix}"
    f.write_text(text)
    p = load_profile(f)
    assert (p.name, p.short_name, p.size_min, p.size_max) == ("foo.example.com", "foo", "10Gi", None)
    assert p.supported_fs_types == ("",) and not p.dynamic and p.capabilities == {}
    assert harness_capabilities(p) == frozenset()


def test_defaults_follow_load_driver_definition() -> None:
    p = parse_profile({"DriverInfo": {"Name": "x", "Capabilities": {"controllerExpansion": True}}})
    assert p.size_min == "5Gi" and p.short_name == "x"
    assert p.capabilities["onlineExpansion"] and p.capabilities["offlineExpansion"]


@pytest.mark.parametrize("data,expected", [
    ({"DriverInfo": {"Name": "x", "Capabilites": {}}},
     "unknown key 'Capabilites' in DriverInfo; did you mean 'Capabilities'?"),
    ({"DriverInfo": {"Name": "x", "Capabilities": {"topolgy": True}}},
     "unknown key 'topolgy' in DriverInfo.Capabilities; did you mean 'topology'?"),
    ({"DriverInfo": {"name": "x"}}, "unknown key 'name' in DriverInfo; did you mean 'Name'?"),
    ({"Driverinfo": {"Name": "x"}}, "unknown key 'Driverinfo' at the top level; did you mean 'DriverInfo'?"),
    ({"DriverInfo": {"Name": "x"}, "StorageClass": {"FromExistingClass": "gold"}},
     "unknown key 'FromExistingClass' in StorageClass; did you mean 'FromExistingClassName'?"),
    ({"DriverInfo": {"Name": "x", "StressTestOptions": {"NumPods": 1, "NumSnapshots": 2}}},
     "unknown key 'NumSnapshots' in DriverInfo.StressTestOptions; 'NumSnapshots' belongs in "
     "DriverInfo.VolumeSnapshotStressTestOptions or DriverInfo.VolumeGroupSnapshotStressTestOptions"),
    ({"DriverInfo": {"Name": "x"}, "InlineVolumes": [{"Attributes": {}, "Sharde": True}]},
     "unknown key 'Sharde' in InlineVolumes[0]; did you mean 'Shared'?"),
    ({"DriverInfo": {"Name": "x"}, "Timeouts": {"PodStartt": "5m"}},
     "unknown key 'PodStartt' in Timeouts; did you mean 'PodStart'?"),
    ({"DriverInfo": {"Name": "x", "RequiredAccessModes": ["ReadWriteOnly"]}},
     "unknown key 'ReadWriteOnly' in DriverInfo.RequiredAccessModes; did you mean 'ReadWriteOnce'?"),
])
def test_typos_are_refused_with_the_nearest_key(data: dict, expected: str) -> None:
    assert refused(data) == expected


def test_impossible_values_are_refused() -> None:
    assert refused(profile(SupportedSizeRange={"Min": "20Gi", "Max": "10Gi"})) == \
        "DriverInfo.SupportedSizeRange.Min 20Gi is larger than Max 10Gi"
    assert refused(profile(SupportedSizeRange={"Max": "1Gi"})) == \
        "DriverInfo.SupportedSizeRange.Min 5Gi is larger than Max 1Gi"  # upstream's default Min
    assert refused(profile(SupportedSizeRange={"Min": "10 Gi"})) == \
        "DriverInfo.SupportedSizeRange.Min '10 Gi' is not a quantity such as 5Gi"
    assert refused(profile(NumAllowedTopologies=0)) == "DriverInfo.NumAllowedTopologies must be positive, got 0"
    assert refused(profile(NumAllowedTopologies=-2)) == "DriverInfo.NumAllowedTopologies must be positive, got -2"
    assert refused({"DriverInfo": {"SupportedSizeRange": {"Min": "1Gi"}}}) == "DriverInfo.Name not set"
    p = parse_profile(profile(SupportedSizeRange={"Min": "1Gi", "Max": "1024Mi"}))
    assert (p.size_min, p.size_max) == ("1Gi", "1024Mi")


def test_wrong_types_are_refused() -> None:
    assert refused(profile(Capabilities={"persistence": "yes"})) == \
        "DriverInfo.Capabilities.persistence must be true or false, got str 'yes'"
    assert "upstream decodes a set" in refused(profile(SupportedFsType=["ext4", "xfs"]))
    assert refused(profile(NumAllowedTopologies=1.5)) == "DriverInfo.NumAllowedTopologies must be an integer, got float 1.5"
    assert refused({"DriverInfo": {"Name": "x"}, "Timeouts": {"PodStart": "5 minutes"}}) == \
        "Timeouts.PodStart must be a Go duration such as 5m or 90s, got str '5 minutes'"


def test_set_fields_take_upstream_mappings_and_timeouts_ignore_case() -> None:
    data = yaml.safe_load('DriverInfo:\n  Name: x\n  SupportedFsType: {"ext4", "xfs"}\n'
                          '  SupportedMountOption:\nTimeouts:\n  podStart: 90s\n  ClaimProvision: 1h30m\n')
    p = parse_profile(data)
    assert p.supported_fs_types == ("ext4", "xfs")
    assert p.timeouts == {"PodStart": "90s", "ClaimProvision": "1h30m"}


def test_storage_class_sources_follow_upstream_precedence(tmp_path: Path) -> None:
    (tmp_path / "sc.yaml").write_text("apiVersion: storage.k8s.io/v1\nkind: StorageClass\n"
                                      "metadata: {name: gold}\nprovisioner: csi.example.com\n")
    f = tmp_path / "driver.yaml"
    f.write_text(yaml.safe_dump({"DriverInfo": {"Name": "csi.example.com"}, "StorageClass": {"FromFile": "sc.yaml"}}))
    p = load_profile(f)
    assert p.storage_class_source == "FromFile" and p.storage_class["metadata"]["name"] == "gold"
    both = parse_profile({"DriverInfo": {"Name": "d"}, "StorageClass": {"FromName": True, "FromFile": "sc.yaml"}})
    assert both.storage_class_source == "FromName"
    existing = parse_profile({"DriverInfo": {"Name": "d"}, "StorageClass": {"FromExistingClassName": "gold",
                                                                           "FromFile": "x.yaml"}})
    assert (existing.storage_class_source, existing.storage_class_name) == ("FromExistingClassName", "gold")
    f.write_text(yaml.safe_dump({"DriverInfo": {"Name": "d"}, "StorageClass": {"FromFile": "missing.yaml"}}))
    with pytest.raises(ProfileError, match=r"StorageClass.FromFile 'missing.yaml': no such file"):
        load_profile(f)


def test_unreadable_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="driver profile .*nope.yaml: No such file"):
        load_profile(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match=r"bad.json: not valid json"):
        load_profile(bad)


# ---- against a cluster ---------------------------------------------------------------

def test_topology_keys_must_exist_on_some_node() -> None:
    nodes = [n.to_node_object() for n in Topology().nodes()]
    good = parse_profile(profile(TopologyKeys=["topology.kubernetes.io/zone"]))
    assert check_against_cluster(good, nodes) is None
    assert check_against_cluster(good, [{"topology.kubernetes.io/zone": "a"}]) is None  # plain label maps
    bad = parse_profile(profile(TopologyKeys=["topology.kubernetes.io/zone", "topology.ebs.csi.aws.com/zone"]), "p.yaml")
    with pytest.raises(ProfileError) as err:
        check_against_cluster(bad, nodes)
    assert str(err.value) == ("driver profile p.yaml: DriverInfo.TopologyKeys entry 'topology.ebs.csi.aws.com/zone' "
                              "is on no node of the cluster; did you mean 'topology.kubernetes.io/zone'?")


# ---- capabilities --------------------------------------------------------------------

def test_capabilities_map_to_harness_names() -> None:
    p = parse_profile(profile(Capabilities={"topology": True, "block": True, "persistence": True,
                                            "singleNodeVolume": True}, TopologyKeys=["kubernetes.io/hostname"]))
    assert harness_capabilities(p) == {Capability.ZONES, Capability.DYNAMIC_ZONAL, Capability.DYNAMIC_LOCAL,
                                       Capability.STATIC_PV, Capability.BLOCK}
    no_keys = parse_profile(profile(Capabilities={"topology": True}))
    assert Capability.ZONES not in harness_capabilities(no_keys), "upstream skips topology tests without keys"


def test_skip_reasons_name_the_profile_capability() -> None:
    off = parse_profile(profile(Capabilities={"topology": False, "RWX": False}, TopologyKeys=["k"]))
    assert skip_reason(off, Capability.ZONES) == "driver csi.example.com: no topology (profile capability topology=false)"
    assert skip_reason(off, Capability.RWX) == "driver csi.example.com: no rwx (profile capability RWX=false)"
    assert skip_reason(off, Capability.BLOCK) == \
        "driver csi.example.com: no block (profile capability block unset, read as false)"
    static = parse_profile({"DriverInfo": {"Name": "d", "Capabilities": {"topology": True}, "TopologyKeys": ["k"]}})
    assert skip_reason(static, Capability.DYNAMIC_ZONAL) == ("driver d: no dynamic-zonal (profile sets no "
                                                             "StorageClass.FromName, FromExistingClassName or FromFile)")
    assert skip_reason(static, Capability.ZONES) is None
    assert skip_reason(off, Capability.NODE_FAILURE) is None, "the driver does not decide node faults"


def test_effective_capabilities_combine_backend_and_driver() -> None:
    backend = {Capability.ZONES, Capability.STATIC_PV, Capability.NODE_FAILURE, Capability.DYNAMIC_ZONAL,
               Capability.MUTABLE_PV_AFFINITY}
    p = parse_profile(profile(Capabilities={"topology": True, "block": True}, TopologyKeys=["k"]))
    assert effective_capabilities(backend, p) == {Capability.ZONES, Capability.NODE_FAILURE,
                                                  Capability.DYNAMIC_ZONAL, Capability.MUTABLE_PV_AFFINITY,
                                                  Capability.BLOCK}
    single_zone = effective_capabilities({Capability.STATIC_PV}, p)
    assert Capability.ZONES not in single_zone and Capability.DYNAMIC_ZONAL in single_zone


def test_json_and_yaml_give_the_same_profile(tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    (tmp_path / "p.json").write_text(json.dumps(data))
    a, b = load_profile(EXAMPLE), load_profile(tmp_path / "p.json")
    assert (a.name, a.capabilities, a.topology_keys, a.timeouts) == (b.name, b.capabilities, b.topology_keys, b.timeouts)


def test_no_profile_driver_has_the_failure_knob() -> None:
    """The local backend's provisioners fail on pvchaos.dev/fail-*; a vendor's driver run on
    the same backend does not, so the rescheduling suite skips with the reason."""
    p = parse_profile(profile(Capabilities={"topology": True, "persistence": True}, TopologyKeys=["k"]))
    backend = {Capability.ZONES, Capability.DYNAMIC_ZONAL, Capability.PROVISIONING_FAILURES}
    assert Capability.PROVISIONING_FAILURES not in effective_capabilities(backend, p)
    assert skip_reason(p, Capability.PROVISIONING_FAILURES) == (
        "driver csi.example.com: no provisioning-failures (only the harness's own provisioners fail on "
        "pvchaos.dev/fail-* class parameters)")

"""Driver profiles: upstream's external storage test driver file, read as upstream reads it;
what upstream passes over silently is a warning naming the key and the nearest valid one."""

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


def warned(data: dict) -> list[str]:
    """The warnings of an accepted profile, without the file prefix."""
    p = parse_profile(data, "p.yaml")
    assert all("\n" not in w and w.startswith("driver profile p.yaml: ") for w in p.warnings)
    return [w.removeprefix("driver profile p.yaml: ") for w in p.warnings]


@pytest.mark.parametrize("data,expected", [
    ({"DriverInfo": {"Name": "x", "Capabilites": {}}},
     "unknown key 'Capabilites' in DriverInfo, ignored, as upstream ignores it; did you mean 'Capabilities'?"),
    ({"DriverInfo": {"Name": "x", "Capabilities": {"topolgy": True}}},
     "unknown capability 'topolgy' in DriverInfo.Capabilities, read by no upstream suite; did you mean 'topology'?"),
    ({"DriverInfo": {"Name": "x", "name": "y"}},
     "key 'name' in DriverInfo is ignored, as upstream ignores it (names match case-sensitively there); "
     "did you mean 'Name'?"),
    ({"DriverInfo": {"Name": "x"}, "StorageClass": {"FromExistingClass": "gold"}},
     "unknown key 'FromExistingClass' in StorageClass, ignored, as upstream ignores it; "
     "did you mean 'FromExistingClassName'?"),
    ({"DriverInfo": {"Name": "x", "StressTestOptions": {"NumPods": 1, "NumSnapshots": 2}}},
     "unknown key 'NumSnapshots' in DriverInfo.StressTestOptions, ignored, as upstream ignores it; 'NumSnapshots' "
     "belongs in DriverInfo.VolumeSnapshotStressTestOptions or DriverInfo.VolumeGroupSnapshotStressTestOptions"),
    ({"DriverInfo": {"Name": "x"}, "InlineVolumes": [{"Attributes": {}, "Sharde": True}]},
     "unknown key 'Sharde' in InlineVolumes[0], ignored, as upstream ignores it; did you mean 'Shared'?"),
    ({"DriverInfo": {"Name": "x"}, "Timeouts": {"PodStartt": "5m"}},
     "unknown timeout 'PodStartt' in Timeouts, ignored, as upstream ignores it; did you mean 'PodStart'?"),
    ({"DriverInfo": {"Name": "x", "RequiredAccessModes": ["ReadWriteOnly"]}},
     "unknown access mode 'ReadWriteOnly' in DriverInfo.RequiredAccessModes, passed by upstream to claims, "
     "which the API server refuses; did you mean 'ReadWriteOnce'?"),
    ({"DriverInfo": {"Name": "x"}, "Bogus": 1}, "unknown key 'Bogus' at the top level, ignored, as upstream "
     "ignores it; valid: ShortName, DriverInfo, StorageClass, VolumeAttributesClass, SnapshotClass, "
     "GroupSnapshotClass, InlineVolumes, ClientNodeName, NodeSelectors, Timeouts"),
])
def test_what_upstream_ignores_is_a_warning_with_the_nearest_key(data: dict, expected: str) -> None:
    """Accepted, as upstream accepts it; a key unknown in every spelling is named unknown,
    a key in another case says upstream's names are case-sensitive."""
    assert warned(data) == [expected]


def test_ignored_keys_leave_the_fields_as_upstream_leaves_them() -> None:
    p = parse_profile({"DriverInfo": {"Name": "x", "topologyKeys": ["k"], "Capabilities": {"Topology": True}},
                       "storageClass": {"FromName": True}, "InlineVolumes": [{"shared": True}]})
    assert p.topology_keys == () and not p.dynamic and not p.has("topology")
    assert p.raw["InlineVolumes"] == [{}] and p.inline_volumes == 1
    assert len(p.warnings) == 4


def test_values_no_upstream_test_can_use_are_warnings() -> None:
    assert warned(profile(SupportedSizeRange={"Min": "20Gi", "Max": "10Gi"})) == [
        "DriverInfo.SupportedSizeRange.Min 20Gi is larger than Max 10Gi (upstream's default Min is 5Gi); "
        "upstream fails every test that sizes a volume"]
    assert len(warned(profile(SupportedSizeRange={"Max": "1Gi"}))) == 1  # against upstream's default Min
    assert warned(profile(SupportedSizeRange={"Min": "10 Gi"})) == [
        "DriverInfo.SupportedSizeRange.Min '10 Gi' is not a quantity such as 5Gi; upstream reads the file but "
        "fails every test that sizes a volume with it"]
    assert parse_profile(profile(NumAllowedTopologies=0)).num_allowed_topologies == 1  # upstream's topology suite
    assert warned(profile(NumAllowedTopologies=-2)) == ["DriverInfo.NumAllowedTopologies -2 is negative; read as 1"]
    p = parse_profile(profile(SupportedSizeRange={"Min": "1Gi", "Max": "1024Mi"}))
    assert (p.size_min, p.size_max, p.warnings) == ("1Gi", "1024Mi", ())


def test_what_upstream_refuses_is_refused() -> None:
    assert refused({"DriverInfo": {"SupportedSizeRange": {"Min": "1Gi"}}}) == "DriverInfo.Name not set"
    assert refused(profile(Capabilities={"persistence": "yes"})) == \
        "DriverInfo.Capabilities.persistence must be true or false, got str 'yes' (upstream's decoder refuses it too)"
    assert "upstream decodes a set" in refused(profile(SupportedFsType=["ext4", "xfs"]))
    assert "upstream decodes a set" in refused(profile(SupportedFsType={"ext4": ""}))
    assert refused(profile(NumAllowedTopologies=1.5)) == \
        "DriverInfo.NumAllowedTopologies must be an integer, got float 1.5 (upstream's decoder refuses it too)"
    assert refused(profile(SupportedSizeRange={"Min": 5})) == \
        "DriverInfo.SupportedSizeRange.Min must be a quantity string such as 5Gi, got int 5 (upstream's decoder refuses it too)"
    assert refused({"DriverInfo": {"Name": "x"}, "Timeouts": {"PodStart": 5}}).startswith("Timeouts must be")
    assert refused({"DriverInfo": {"Name": "x"}, "InlineVolumes": {"Shared": True}}).startswith("InlineVolumes must be a list")


def test_set_fields_add_to_upstreams_default_and_timeouts_ignore_case() -> None:
    data = yaml.safe_load('DriverInfo:\n  Name: x\n  SupportedFsType: {"ext4", "xfs"}\n'
                          '  SupportedMountOption:\nTimeouts:\n  podStart: 90s\n  ClaimProvision: 1h30m\n')
    p = parse_profile(data)
    assert p.supported_fs_types == ("", "ext4", "xfs"), "a JSON object adds to the preset {''}"
    assert p.timeouts == {"PodStart": "90s", "ClaimProvision": "1h30m"} and p.warnings == ()
    assert parse_profile({"DriverInfo": {"Name": "x", "SupportedFsType": None}}).supported_fs_types == ()
    both = parse_profile({"DriverInfo": {"Name": "x"}, "Timeouts": {"PodStart": "1m", "podstart": "2m"}})
    assert both.timeouts == {"PodStart": "2m"}, "encoding/json sees the keys sorted; the later match wins"
    bad = parse_profile({"DriverInfo": {"Name": "x"}, "Timeouts": {"PodStart": "5 minutes", "PVDelete": "1m"}})
    assert bad.timeouts == {} and len(bad.warnings) == 1, "upstream keeps every default then"


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
    assert skip_reason(off, Capability.ZONES) == ("driver csi.example.com: no topology "
                                                  "(profile capability topology=false: not supported)")
    assert skip_reason(off, Capability.RWX) == "driver csi.example.com: no rwx (profile capability RWX=false: not supported)"
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


def test_the_fault_proxy_counts_for_a_profile_driver_only_where_it_fronts_that_driver() -> None:
    """Local's proxy fronts pvchaos-csi, not a profile's driver; kind's fronts a vendor's
    package whose sockets it rewired (csi-proxy-vendor), and then csi_faults runs (issue 36)."""
    p = parse_profile(profile(Capabilities={"topology": True}, TopologyKeys=["k"]))
    assert Capability.CSI_PROXY not in effective_capabilities({Capability.CSI_PROXY}, p)
    assert "fronts pvchaos-csi's own stack" in (skip_reason(p, Capability.CSI_PROXY) or "")
    fronted = effective_capabilities({Capability.CSI_PROXY, Capability.CSI_PROXY_VENDOR}, p)
    assert Capability.CSI_PROXY in fronted

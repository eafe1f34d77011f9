"""Driver files shaped like the ones vendors ship, read to the values upstream's e2e reader
gets from them (recorded by running apimachinery's decoder on the same files:
data/profiles/upstream-decoder), with a warning for each key upstream passes over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvchaos.drivers.profile import ProfileError, load_profile

DATA = Path(__file__).parent / "data" / "profiles"
RECORDED: dict[str, dict[str, Any]] = json.loads((DATA / "upstream-decoder" / "recorded.json").read_text())


def test_every_profile_file_was_recorded() -> None:
    files = sorted(p.name for p in DATA.iterdir() if p.suffix in (".yaml", ".json"))
    assert files == sorted(RECORDED), "re-run upstream-decoder (see its main.go) after adding a file"


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_accepted_and_refused_as_upstream(name: str) -> None:
    """Upstream's decoder refused it, or it decoded without DriverInfo.Name (which
    AddDriverDefinition refuses): refused here in one line. Otherwise the same values."""
    record = RECORDED[name]
    decoded = record.get("Decoded")
    if decoded is None or not decoded["DriverInfo"]["Name"]:
        with pytest.raises(ProfileError) as err:
            load_profile(DATA / name)
        assert "\n" not in str(err.value)
        return
    p = load_profile(DATA / name)
    info = decoded["DriverInfo"]
    caps = dict(info["Capabilities"] or {})
    if caps.get("controllerExpansion"):  # what loadDriverDefinition adds after decoding
        caps.setdefault("onlineExpansion", True)
        caps.setdefault("offlineExpansion", True)
    assert p.name == info["Name"] and p.capabilities == caps
    assert p.topology_keys == tuple(info["TopologyKeys"] or ())
    assert p.supported_fs_types == tuple(record["SupportedFsType"])
    assert (p.size_min, p.size_max or "") == (info["SupportedSizeRange"]["Min"], info["SupportedSizeRange"]["Max"])
    assert p.required_access_modes == tuple(info["RequiredAccessModes"] or ())
    assert p.num_allowed_topologies == (info["NumAllowedTopologies"] or 1)
    sc = decoded["StorageClass"]
    assert p.storage_class_name == (sc["FromExistingClassName"] or None)
    assert p.dynamic == bool(sc["FromName"] or sc["FromFile"] or sc["FromExistingClassName"])
    assert p.inline_volumes == len(decoded["InlineVolumes"] or ())
    assert [v or {} for v in p.raw.get("InlineVolumes") or []] == [
        {k: v for k, v in vol.items() if v} for vol in decoded["InlineVolumes"] or []]


def test_hostpath_lower_case_shared_is_ignored_with_a_warning() -> None:
    """The maintainers' own file: accepted; `shared` reaches no field upstream either."""
    p = load_profile(DATA / "hostpath-distributed.yaml")
    assert p.topology_keys == ("topology.hostpath.example.org/node",) and p.storage_class_name == "hostpath-fast"
    assert p.warnings == (
        f"driver profile {DATA / 'hostpath-distributed.yaml'}: key 'shared' in InlineVolumes[0] is ignored, as "
        "upstream ignores it (names match case-sensitively there); did you mean 'Shared'?",)


def test_a_misspelt_section_is_named_with_its_nearest_key() -> None:
    p = load_profile(DATA / "hostpath-release.yaml")
    assert p.capabilities["onlineExpansion"] and p.capabilities["offlineExpansion"]
    assert [w.split(": ", 1)[1] for w in p.warnings] == [
        "unknown key 'VolumeAttributeClass' at the top level, ignored, as upstream ignores it; "
        "did you mean 'VolumeAttributesClass'?",
        "key 'shared' in InlineVolumes[0] is ignored, as upstream ignores it (names match case-sensitively there); "
        "did you mean 'Shared'?",
    ]


def test_capability_in_another_case_and_a_key_of_another_section() -> None:
    p = load_profile(DATA / "array-vendor.yaml")
    assert p.supported_fs_types == ("", "nfs") and p.timeouts == {"ClaimProvision": "6m", "PVDelete": "5m",
                                                                  "PodStart": "10m"}
    assert not p.has("readWriteOncePod"), "upstream's suites look the capability up by its exact name"
    assert [w.split(": ", 1)[1] for w in p.warnings] == [
        "capability 'ReadWriteOncePod' in DriverInfo.Capabilities is read by no upstream suite "
        "(names match case-sensitively there); did you mean 'readWriteOncePod'?",
        "unknown key 'NumSnapshots' in DriverInfo.StressTestOptions, ignored, as upstream ignores it; "
        "'NumSnapshots' belongs in DriverInfo.VolumeSnapshotStressTestOptions or "
        "DriverInfo.VolumeGroupSnapshotStressTestOptions",
    ]


def test_one_bad_timeout_drops_them_all_as_upstream_does() -> None:
    p = load_profile(DATA / "cloud-zonal.json")
    assert p.timeouts == {}
    assert p.storage_class is not None and p.storage_class["parameters"] == {"type": "balanced"}
    assert [w.split(": ", 1)[1] for w in p.warnings] == [
        "Timeouts.PodDelete 'bogus' is not a Go duration such as 5m or 90s; upstream then uses its default "
        "timeouts, all of them, and so does pvchaos"]


def test_a_file_of_lower_case_keys_is_refused_with_the_reason() -> None:
    with pytest.raises(ProfileError) as err:
        load_profile(DATA / "lowercase.json")
    assert str(err.value).endswith(
        "DriverInfo.Name not set; first of what upstream ignored: key 'driverInfo' at the top level is ignored, "
        "as upstream ignores it (names match case-sensitively there); did you mean 'DriverInfo'?")


def test_a_value_of_the_wrong_type_is_refused_like_upstream() -> None:
    with pytest.raises(ProfileError) as err:
        load_profile(DATA / "wrong-type.yaml")
    assert str(err.value) == (f"driver profile {DATA / 'wrong-type.yaml'}: DriverInfo.Capabilities.persistence must "
                              "be true or false, got str 'yes please' (upstream's decoder refuses it too)")

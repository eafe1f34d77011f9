"""Driver profiles: upstream's external storage test driver file, read as upstream reads it.

CSI vendors already describe their driver for the Kubernetes e2e suite with a file given
to `-storage.testdriver` (kubernetes test/e2e/storage/external/external.go, struct
`driverDefinition`, and framework/testdriver.go, struct `DriverInfo` and the `Cap*`
constants). Upstream decodes it with apimachinery's non-strict universal decoder: YAML is
turned into JSON, then sigs.k8s.io/json fills the structs, matching field names
**case-sensitively** and dropping every key it does not know (checked against
apimachinery v0.35.4 by decoding files with it; see docs/backends.md). So every file
upstream accepts is accepted here, and read to the same values: a key in another case
(`shared` for `Shared`, as csi-driver-host-path's own file has it) is ignored, as
upstream ignores it. What upstream ignores silently is a *warning* here
(`DriverProfile.warnings`), naming the key, where it is and the nearest valid key, so a
typo does not quietly disable tests. What upstream's decoder refuses (a value of the wrong
JSON type, no DriverInfo.Name) is refused here in one line. The key lists are the union of
Kubernetes 1.35.4, 1.36.3, 1.37.2 and 1.38.0-beta.0 (read from their source), plus `ShortName`: upstream's own
testdata and many vendor files carry it at the top level; pvchaos reads it as a display
name and upstream ignores it.

A profile's capabilities become harness capability names (`harness_capabilities`), and a
suite that needs one the driver lacks skips with a reason naming the profile capability.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from pvchaos.clusters.backend import Capability
from pvchaos.conformance.quantity import parse_quantity

UPSTREAM_CAPABILITIES = (
    "persistence", "block", "fsGroup", "volumeMountGroup", "exec", "snapshotDataSource",
    "snapshotMetadata", "groupSnapshot", "pvcDataSource", "multipods", "RWX", "controllerExpansion",
    "nodeExpansion", "offlineExpansion", "onlineExpansion", "volumeLimits", "singleNodeVolume",
    "topology", "capacity", "FSResizeFromSourceNotSupported", "readWriteOncePod",
    "multiplePVsSameID", "capReadOnlyMany", "seLinuxMount",
)
TIMEOUT_KEYS = (
    "Poll", "PodStart", "PodStartShort", "PodStartSlow", "PodDelete", "ClaimProvision",
    "DataSourceProvision", "ClaimProvisionShort", "ClaimBound", "PVReclaim", "PVBound", "PVCreate",
    "PVDelete", "PVDeleteSlow", "SnapshotCreate", "SnapshotDelete", "SnapshotControllerMetrics",
    "SystemPodsStartup", "NodeSchedulable", "SystemDaemonsetStartup", "NodeNotReady",
    "ClaimUnusedCondition",
)
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
DEFAULT_SIZE_MIN = "5Gi"  # what loadDriverDefinition presets

_CLASS = {"FromName": "bool", "FromFile": "str", "FromExistingClassName": "str"}
_DRIVER_INFO: dict[str, Any] = {
    "Name": "str", "InTreePluginName": "str", "TestTags": "list", "MaxFileSize": "int",
    "SupportedSizeRange": {"Min": "quantity", "Max": "quantity", "Step": "quantity"},
    "SupportedFsType": "set", "SupportedMountOption": "set", "RequiredMountOption": "set",
    "Capabilities": "capabilities", "RequiredAccessModes": "accessmodes",
    "TopologyKeys": "strlist", "NumAllowedTopologies": "int",
    "StressTestOptions": {"NumPods": "int", "NumRestarts": "int"},
    "VolumeSnapshotStressTestOptions": {"NumPods": "int", "NumSnapshots": "int"},
    "VolumeModifyStressTestOptions": {"NumPods": "int"},
    "VolumeGroupSnapshotStressTestOptions": {"NumPods": "int", "NumSnapshots": "int"},
    "SnapshotMetadataStressTestOptions": {"NumPods": "int", "NumSnapshotPairs": "int"},
    "PerformanceTestOptions": {"ProvisioningOptions": {
        "VolumeSize": "quantity", "Count": "int",
        "ExpectedMetrics": {"AvgLatency": "int", "Throughput": "number"}}},
}
SCHEMA: dict[str, Any] = {
    "ShortName": "str",
    "DriverInfo": _DRIVER_INFO,
    "StorageClass": _CLASS,
    "VolumeAttributesClass": {"FromFile": "str", "FromExistingClassName": "str"},
    "SnapshotClass": _CLASS,
    "GroupSnapshotClass": _CLASS,
    "InlineVolumes": [{"Attributes": "strmap", "Shared": "bool", "ReadOnly": "bool"}],
    "ClientNodeName": "str",
    "NodeSelectors": "strmap",
    "Timeouts": "timeouts",
}
_DURATION = re.compile(r"^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$")

HARNESS_PROVISIONER = "harness-provisioner"  # a requirement no driver profile meets
HARNESS_DRIVER_ONLY = "pvchaos-csi-only"  # likewise: only pvchaos-csi has control files
HARNESS_STACK = "harness-csi-stack"  # nor this: the fault proxy fronts the harness's own driver only

# Harness capability -> what the profile must declare ("dynamic": a StorageClass source;
# "TopologyKeys": a non-empty list, as upstream's topology suite skips without one).
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    Capability.ZONES: ("topology", "TopologyKeys"),
    Capability.DYNAMIC_ZONAL: ("dynamic", "topology", "TopologyKeys"),
    Capability.DYNAMIC_LOCAL: ("dynamic", "topology", "TopologyKeys", "singleNodeVolume"),
    Capability.STATIC_PV: ("persistence",),
    Capability.BLOCK: ("block",),
    Capability.RWX: ("RWX",),
    # Only the harness's own provisioners read pvchaos.dev/fail-*: no profile has it.
    Capability.PROVISIONING_FAILURES: (HARNESS_PROVISIONER,),
    # Only pvchaos-csi has control files (capacity knobs, volume moves, calls log): a
    # vendor's driver never has this, and a test that needs it says so when it skips.
    Capability.HARNESS_DRIVER: (HARNESS_DRIVER_ONLY,),
    # The backends put the CSI fault proxy in front of their own driver; a profile's
    # driver runs without it (a vendor package under certify: docs/csi-fault-proxy.md).
    Capability.CSI_PROXY: (HARNESS_STACK,),
    # upstream's snapshottable pattern: the capability and a SnapshotClass to make them with
    Capability.SNAPSHOTS: ("dynamic", "snapshotDataSource", "SnapshotClass"),
    Capability.CLONES: ("dynamic", "pvcDataSource"),
    # upstream's volume-expand pattern, and its volume-modify pattern (a VolumeAttributesClass)
    Capability.EXPANSION: ("dynamic", "controllerExpansion"),
    Capability.MODIFY_VOLUME: ("dynamic", "VolumeAttributesClass"),
    # upstream's CSI inline volume patterns run only with an InlineVolumes entry
    # (external.go SkipUnsupportedTest); its Attributes are the volume's volumeAttributes
    Capability.INLINE_EPHEMERAL: ("InlineVolumes",),
}
DRIVER_GATED = frozenset(REQUIREMENTS)


class ProfileError(ValueError):
    """A profile was refused; the message is one line naming the file, key and reason."""


@dataclass(frozen=True)
class DriverProfile:
    """What the suites need from a driver file; `raw` keeps the file as read."""

    name: str
    short_name: str
    capabilities: dict[str, bool]
    topology_keys: tuple[str, ...] = ()
    num_allowed_topologies: int = 1
    size_min: str = DEFAULT_SIZE_MIN
    size_max: str | None = None
    storage_class_source: str | None = None  # FromName | FromExistingClassName | FromFile
    storage_class_name: str | None = None  # FromExistingClassName
    storage_class: dict[str, Any] | None = None  # FromName (provisioner only) or the FromFile object
    storage_class_file: str | None = None
    snapshot_class_source: str | None = None
    volume_attributes_class_source: str | None = None  # FromExistingClassName | FromFile
    supported_fs_types: tuple[str, ...] = ("",)
    required_access_modes: tuple[str, ...] = ()
    inline_volumes: int = 0
    timeouts: dict[str, str] = field(default_factory=dict)
    source: str = "<profile>"
    warnings: tuple[str, ...] = ()  # what upstream's reader passes over silently, one line each
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def dynamic(self) -> bool:
        return self.storage_class_source is not None

    def inline_volume(self, number: int = 0) -> dict[str, Any]:
        """InlineVolumes[number % count], as upstream's GetVolume picks it: its Attributes
        (the volume's volumeAttributes), Shared and ReadOnly; {} with no InlineVolumes."""
        volumes = self.raw.get("InlineVolumes") or []
        return dict(volumes[number % len(volumes)] or {}) if volumes else {}

    def has(self, capability: str) -> bool:
        """Upstream reads a capability missing from the map as false."""
        return bool(self.capabilities.get(capability, False))


# ---- reading as upstream reads ------------------------------------------------------

def _where(path: str) -> str:
    return f"in {path}" if path else "at the top level"


def _homes(key: str, spec: Any = SCHEMA, path: str = "") -> list[str]:
    """Where else in the schema `key` is valid: the usual mistake is the wrong section."""
    if isinstance(spec, list):
        return _homes(key, spec[0], f"{path}[]")
    if not isinstance(spec, dict):
        return []
    found = [path or "the top level"] if key in spec else []
    for name, sub in spec.items():
        found += _homes(key, sub, f"{path}.{name}" if path else name)
    return found


def _ignored(source: str, key: Any, path: str, valid: Iterable[str], what: str = "key",
             consequence: str = "ignored, as upstream ignores it") -> str:
    """The warning for a name upstream's decoder passes over: the name, where, the nearest
    valid name (another case of it first: upstream matches names case-sensitively)."""
    key, valid = str(key), list(valid)
    folded = next((v for v in valid if v.lower() == key.lower()), None)
    if folded is not None:
        return (f"driver profile {source}: {what} {key!r} {_where(path)} is {consequence} "
                f"(names match case-sensitively there); did you mean {folded!r}?")
    near = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    homes = _homes(key) if what == "key" else []
    if near:
        hint = f"did you mean {near[0]!r}?"
    elif homes:
        hint = f"{key!r} belongs in {' or '.join(homes)}"
    else:
        hint = f"valid: {', '.join(valid)}"
    return f"driver profile {source}: unknown {what} {key!r} {_where(path)}, {consequence}; {hint}"


def _type_error(source: str, path: str, want: str, value: Any) -> ProfileError:
    return ProfileError(f"driver profile {source}: {path} must be {want}, got {type(value).__name__} {value!r} "
                        "(upstream's decoder refuses it too)")


def _check(source: str, spec: Any, value: Any, path: str, warnings: list[str]) -> Any:
    """`value` as upstream's decoder fills the field `spec` describes: unknown keys dropped
    (each a warning), a value of the wrong type refused, Timeouts keys made canonical."""
    if value is None:  # null leaves a Go field at its zero value
        return None
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise _type_error(source, path or "the file", "a mapping", value)
        out = {}
        for key, item in value.items():
            if key not in spec:
                warnings.append(_ignored(source, key, path, spec))
                continue
            out[key] = _check(source, spec[key], item, f"{path}.{key}" if path else str(key), warnings)
        return out
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise _type_error(source, path, "a list", value)
        return [_check(source, spec[0], item, f"{path}[{i}]", warnings) for i, item in enumerate(value)]
    return _leaf(source, spec, value, path, warnings)


def _leaf(source: str, kind: str, value: Any, path: str, warnings: list[str]) -> Any:
    simple: dict[str, tuple[type, str]] = {
        "str": (str, "a string"), "bool": (bool, "true or false"), "list": (list, "a list"),
        "quantity": (str, "a quantity string such as 5Gi")}
    if kind in simple:
        typ, want = simple[kind]
        if not isinstance(value, typ):
            raise _type_error(source, path, want, value)
        if kind == "quantity" and _quantity(str(value)) is None:
            warnings.append(f"driver profile {source}: {path} {value!r} is not a quantity such as 5Gi; "
                            "upstream reads the file but fails every test that sizes a volume with it")
        return value
    if kind == "int":  # YAML's 10.0 reaches Go's decoder as JSON 10
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(source, path, "an integer", value)
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(source, path, "a number", value)
        return value
    if kind == "set":  # sets.String decodes from a mapping of empty objects: `ext4: {}`
        if not isinstance(value, dict) or not all(v is None or v == {} for v in value.values()):
            raise _type_error(source, path, "a mapping such as {ext4: {}} (upstream decodes a set)", value)
        return value
    if kind in ("strlist", "accessmodes"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _type_error(source, path, "a list of strings", value)
        for v in value if kind == "accessmodes" else ():
            if v not in ACCESS_MODES:
                warnings.append(_ignored(source, v, path, ACCESS_MODES, "access mode",
                                         "passed by upstream to claims, which the API server refuses"))
        return value
    if kind == "strmap":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise _type_error(source, path, "a mapping of strings", value)
        return value
    if kind == "capabilities":
        return _capabilities(source, value, path, warnings)
    if kind == "timeouts":
        return _timeouts(source, value, path, warnings)
    raise AssertionError(f"unknown schema kind {kind}")


def _quantity(text: str) -> Fraction | None:
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def _capabilities(source: str, value: Any, path: str, warnings: list[str]) -> dict[str, bool]:
    """map[Capability]bool: any name decodes (a null flag is false); no suite reads a name
    upstream does not define, so each such name is a warning."""
    if not isinstance(value, dict):
        raise _type_error(source, path, "a mapping of capability: true|false", value)
    out = {}
    for cap, flag in value.items():
        if flag is not None and not isinstance(flag, bool):
            raise _type_error(source, f"{path}.{cap}", "true or false", flag)
        if cap not in UPSTREAM_CAPABILITIES:
            warnings.append(_ignored(source, cap, path, UPSTREAM_CAPABILITIES, "capability",
                                     "read by no upstream suite"))
        out[str(cap)] = bool(flag)
    return out


def _timeouts(source: str, value: Any, path: str, warnings: list[str]) -> dict[str, str]:
    """map[string]string, applied by GetTimeouts through encoding/json: a key matches a
    timeout exactly or else case-insensitively, an unknown one is dropped, and one value that
    is not a Go duration makes upstream log it and keep every default."""
    if not isinstance(value, dict) or not all(isinstance(v, str) or v is None for v in value.values()):
        raise _type_error(source, path, "a mapping of timeout: duration", value)
    out: dict[str, str] = {}
    for key in sorted(value, key=str):  # encoding/json sees them sorted; a later match wins
        duration = value[key] or ""
        if not _DURATION.match(duration):
            warnings.append(f"driver profile {source}: {path}.{key} {duration!r} is not a Go duration such as "
                            "5m or 90s; upstream then uses its default timeouts, all of them, and so does pvchaos")
            return {}
        canonical = key if key in TIMEOUT_KEYS else next((k for k in TIMEOUT_KEYS if k.lower() == str(key).lower()), None)
        if canonical is None:
            warnings.append(_ignored(source, key, path, TIMEOUT_KEYS, "timeout"))
            continue
        out[canonical] = duration
    return out


def _fs_types(info: Mapping[str, Any]) -> tuple[str, ...]:
    """Upstream presets the set to {""} and decodes the file's entries into it (a JSON
    object adds to a Go map); a null empties it."""
    if "SupportedFsType" not in info:
        return ("",)
    if info["SupportedFsType"] is None:
        return ()
    return tuple(sorted({"", *info["SupportedFsType"]}))


def _class_source(section: Mapping[str, Any] | None) -> str | None:
    """Upstream's precedence in GetDynamicProvisionStorageClass: FromName, then
    FromExistingClassName, then FromFile."""
    section = section or {}
    if section.get("FromName"):
        return "FromName"
    if section.get("FromExistingClassName"):
        return "FromExistingClassName"
    if section.get("FromFile"):
        return "FromFile"
    return None


def _load_class_file(source: str, name: str, base: Path) -> dict[str, Any]:
    path = Path(name) if Path(name).is_absolute() else base / name
    try:
        obj = yaml.safe_load(path.read_text())
    except OSError:
        raise ProfileError(f"driver profile {source}: StorageClass.FromFile {name!r}: no such file "
                           f"(relative paths are read from {base})") from None
    except yaml.YAMLError:
        raise ProfileError(f"driver profile {source}: StorageClass.FromFile {name!r} is not YAML") from None
    if not isinstance(obj, dict) or obj.get("kind") != "StorageClass":
        raise ProfileError(f"driver profile {source}: StorageClass.FromFile {name!r} holds no StorageClass")
    return obj


def parse_profile(data: Any, source: str = "<profile>", base_dir: Path | None = None) -> DriverProfile:
    """Read a decoded driver file as upstream does and build the profile; `base_dir`
    resolves FromFile. What upstream would pass over is in `warnings`."""
    warnings: list[str] = []
    checked = _check(source, SCHEMA, data, "", warnings)
    if not isinstance(checked, dict):
        raise ProfileError(f"driver profile {source}: the file is empty")
    info = checked.get("DriverInfo") or {}
    name = info.get("Name")
    if not name:  # upstream's AddDriverDefinition refuses this too
        first = f"; first of what upstream ignored: {warnings[0].split(': ', 1)[1]}" if warnings else ""
        raise ProfileError(f"driver profile {source}: DriverInfo.Name not set{first}")
    sizes = info.get("SupportedSizeRange") or {}
    size_min, size_max = sizes.get("Min") or DEFAULT_SIZE_MIN, sizes.get("Max") or None
    low, high = _quantity(size_min), _quantity(size_max) if size_max else None
    if low is not None and high is not None and low > high:
        warnings.append(f"driver profile {source}: DriverInfo.SupportedSizeRange.Min {size_min} is larger than "
                        f"Max {size_max} (upstream's default Min is {DEFAULT_SIZE_MIN}); upstream fails every test "
                        "that sizes a volume")
    num_topologies = info.get("NumAllowedTopologies") or 1  # upstream's topology suite reads 0 as 1
    if num_topologies < 0:
        warnings.append(f"driver profile {source}: DriverInfo.NumAllowedTopologies {num_topologies} is negative; "
                        "read as 1")
        num_topologies = 1
    caps = dict(info.get("Capabilities") or {})
    if caps.get("controllerExpansion"):  # as loadDriverDefinition does, for compatibility
        caps.setdefault("onlineExpansion", True)
        caps.setdefault("offlineExpansion", True)
    sc = checked.get("StorageClass") or {}
    sc_source = _class_source(sc)
    sc_obj: dict[str, Any] | None = None
    if sc_source == "FromName":
        sc_obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": name}
    elif sc_source == "FromFile" and base_dir is not None:
        sc_obj = _load_class_file(source, sc["FromFile"], base_dir)
    return DriverProfile(
        name=name, short_name=checked.get("ShortName") or name, capabilities=caps,
        topology_keys=tuple(info.get("TopologyKeys") or ()), num_allowed_topologies=num_topologies,
        size_min=size_min, size_max=size_max, storage_class_source=sc_source,
        storage_class_name=sc.get("FromExistingClassName") if sc_source == "FromExistingClassName" else None,
        storage_class=sc_obj, storage_class_file=sc.get("FromFile") if sc_source == "FromFile" else None,
        snapshot_class_source=_class_source(checked.get("SnapshotClass")),
        volume_attributes_class_source=_class_source(checked.get("VolumeAttributesClass")),
        supported_fs_types=_fs_types(info),
        required_access_modes=tuple(info.get("RequiredAccessModes") or ()),
        inline_volumes=len(checked.get("InlineVolumes") or ()), timeouts=dict(checked.get("Timeouts") or {}),
        source=source, warnings=tuple(warnings), raw=checked,
    )


def load_profile(path: Path | str) -> DriverProfile:
    """Read a .yaml or .json driver file (JSON is YAML, so one loader serves both)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"driver profile {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0]
        raise ProfileError(f"driver profile {path}: not valid {path.suffix.lstrip('.') or 'YAML'}: {first}") from None
    return parse_profile(data, str(path), path.parent)


def check_against_cluster(profile: DriverProfile, nodes: Iterable[Mapping[str, Any]]) -> None:
    """Refuse a profile whose TopologyKeys name a label no node has. `nodes` are Node
    objects as Kubernetes JSON, or plain label mappings."""
    present: set[str] = set()
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") if "metadata" in node else node
        present |= set(labels or {})
    for key in profile.topology_keys:
        if key not in present:
            near = difflib.get_close_matches(key, sorted(present), n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ProfileError(f"driver profile {profile.source}: DriverInfo.TopologyKeys entry {key!r} "
                               f"is on no node of the cluster{hint}")


# ---- capabilities --------------------------------------------------------------------

def _missing(profile: DriverProfile, capability: str) -> str | None:
    """The first profile requirement of a harness capability that is not met, or None."""
    for need in REQUIREMENTS.get(capability, ()):
        if need == "dynamic" and not profile.dynamic:
            return need
        if need == "TopologyKeys" and not profile.topology_keys:
            return need
        if need == "SnapshotClass" and profile.snapshot_class_source is None:
            return need
        if need == "VolumeAttributesClass" and profile.volume_attributes_class_source is None:
            return need
        if need == "InlineVolumes" and not profile.inline_volumes:
            return need
        if need in (HARNESS_PROVISIONER, HARNESS_DRIVER_ONLY, HARNESS_STACK):
            return need
        if need not in ("dynamic", "TopologyKeys", "SnapshotClass", "VolumeAttributesClass", "InlineVolumes") \
                and not profile.has(need):
            return need
    return None


def harness_capabilities(profile: DriverProfile) -> frozenset[str]:
    """The driver-dependent harness capabilities this driver provides."""
    return frozenset(c for c in REQUIREMENTS if _missing(profile, c) is None)


def effective_capabilities(backend: Iterable[str], profile: DriverProfile) -> frozenset[str]:
    """What a run with this driver on this backend may use: the backend's own capabilities,
    minus the driver-dependent ones the driver lacks, plus the driver-only ones it has
    (block, RWX and dynamic provisioning come from the driver, not from the nodes)."""
    backend = frozenset(backend)
    driver = harness_capabilities(profile)
    driver_only = {Capability.BLOCK, Capability.RWX, Capability.DYNAMIC_ZONAL, Capability.DYNAMIC_LOCAL}
    # the proxy fronts this very driver where the backend put it in front of a vendor's package
    fronted = {Capability.CSI_PROXY} & backend if Capability.CSI_PROXY_VENDOR in backend else set()
    return (backend - DRIVER_GATED) | (backend & driver) | (driver & driver_only) | fronted


def missing_reason(profile: DriverProfile, needed_capability: str) -> tuple[str, str] | None:
    """(the capability word to report, the profile field that decides it) when a suite
    needing `needed_capability` cannot run with this driver; None if it may run."""
    need = _missing(profile, needed_capability)
    if need is None:
        return None
    word = "topology" if needed_capability == Capability.ZONES and need == "topology" else needed_capability
    if need == "dynamic":
        return word, "profile sets no StorageClass.FromName, FromExistingClassName or FromFile"
    if need == "TopologyKeys":
        return word, "profile lists no DriverInfo.TopologyKeys"
    if need == "SnapshotClass":
        return word, "profile sets no SnapshotClass.FromName, FromExistingClassName or FromFile"
    if need == "InlineVolumes":
        return word, "profile lists no InlineVolumes (upstream's CSI inline volume tests skip without one too)"
    if need == HARNESS_PROVISIONER:
        return word, "only the harness's own provisioners fail on pvchaos.dev/fail-* class parameters"
    if need == HARNESS_DRIVER_ONLY:
        return word, "pvchaos-csi only: the test reads or writes that driver's control files"
    if need == HARNESS_STACK:
        return word, ("the CSI fault proxy fronts pvchaos-csi's own stack, or a vendor's package on kind whose "
                      "registrar and sidecars name their sockets in flags (docs/certify.md); the cluster's log "
                      "says which socket could not be rewired")
    if need in profile.capabilities:
        # the vendor says the driver lacks it: a certification shows it "not supported"
        return word, f"profile capability {need}={str(profile.capabilities[need]).lower()}: not supported"
    return word, f"profile capability {need} unset, read as false"


def skip_reason(profile: DriverProfile, needed_capability: str) -> str | None:
    """Why a suite needing `needed_capability` skips with this driver; None if it may run."""
    reason = missing_reason(profile, needed_capability)
    return None if reason is None else f"driver {profile.name}: no {reason[0]} ({reason[1]})"

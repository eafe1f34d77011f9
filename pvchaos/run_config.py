"""Options resolved once: the declared options (clusters/options.py) turned into a typed
run configuration, parsed and validated in one place (STYLE 14: load, default, validate,
then pass the typed thing).

`resolve(options)` parses the topology, the feature gates, the version (defaulted), the
driver profile and the scale shape once; the runner and the pytest plugin both take the
`RunConfig` instead of parsing the same strings again. `scale_problem` and
`available_memory_mib` live here (not in the runner or the plugin) so that the two of
them no longer import each other (issue 22: the project's one import circle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pvchaos.clusters import providers
from pvchaos.clusters.local.config import minor_of, parse_feature_gates
from pvchaos.clusters.options import Options
from pvchaos.clusters.pool import ClusterDefaults
from pvchaos.clusters.provider import Feature
from pvchaos.clusters.storage import VendorStorage
from pvchaos.clusters.topology import Topology
from pvchaos.clusters.vendor_package import PackageError, load_package
from pvchaos.drivers.profile import DriverProfile, load_profile
from pvchaos.kit.storm_plan import StormShape, memory_refusal, suite_shape
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

__all__ = ["RunConfig", "available_memory_mib", "resolve", "scale_problem"]


def available_memory_mib() -> int:
    """MemAvailable of this machine in MiB (4096 where /proc/meminfo cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 4096


@dataclass(frozen=True)
class RunConfig:
    """A run's options, parsed: nothing downstream parses the strings again."""

    options: Options
    topology: Topology
    feature_gates: dict[str, bool] = field(default_factory=dict)
    k8s_version: str = DEFAULT_K8S_VERSION  # the version asked for, or the default
    minor: int = 0
    profile: DriverProfile | None = None
    scale_shape: StormShape | None = None  # the storm's shape with --scale, else None
    storage: VendorStorage | None = None  # --driver-package: the vendor's stack of every cluster


    @property
    def backend(self) -> str:
        return self.options.backend

    @property
    def cluster_defaults(self) -> ClusterDefaults:
        """The shape, gates and version the cluster pool starts clusters with."""
        return ClusterDefaults(self.topology, self.feature_gates, self.k8s_version, self.storage)


def resolve(options: Options, *, read_profile: bool = True) -> RunConfig:
    """The typed configuration of `options`, or ValueError naming the flag and value.
    Only well-formedness is checked here; what needs binaries (a gate known to a version)
    stays with `clusters.options.check_feature_gates`."""
    try:
        topology = Topology.parse(options.zones, options.nodes_per_zone)
    except ValueError as exc:
        raise ValueError(f"--zones {options.zones}: {exc}") from None
    gates = parse_feature_gates(options.feature_gates)
    version = options.k8s_version or DEFAULT_K8S_VERSION
    minor = minor_of(version) if "," not in version else 0  # a matrix is resolved per version
    shape = None
    if options.scale:
        try:
            shape = suite_shape(options.scale_size, topology.zones)
        except ValueError as exc:
            raise ValueError(f"--scale-size {options.scale_size}: {exc}") from None
    storage = None
    if options.driver_package:
        try:
            storage = VendorStorage(load_package(options.driver_package))
        except PackageError as exc:
            raise ValueError(f"--driver-package: {exc}") from None
    # the package's own profile when the run names none: its StorageClass (parameters and
    # all) is then every test's, as under certify; without it a test's class would carry
    # the driver's name only
    profile_path = options.profile or (storage.package.profile if storage is not None else None)
    profile = load_profile(profile_path) if read_profile and profile_path else None
    return RunConfig(options=options, topology=topology, feature_gates=gates, k8s_version=version,
                     minor=minor, profile=profile, scale_shape=shape, storage=storage)


def scale_problem(opts: Options, available_mib: float) -> str | None:
    """Why the scale suite cannot run with these options (one line), or None: a bad
    --scale-size, zero nodes, more zones than nodes, or more memory than the machine has."""
    try:
        shape = suite_shape(opts.scale_size, Topology.parse(opts.zones).zones)
    except ValueError as exc:
        return f"--scale-size {opts.scale_size}: {exc}"
    host = providers.has(opts.backend, Feature.HOST_PROCESSES)  # clusters of this machine share its memory
    return memory_refusal(shape, available_mib) if host else None

"""The storage stack a cluster is started with: part of what a run asks for, like its
zones and gates (issue 35).

- `HarnessStorage`: pvchaos's own driver `pvchaos-csi` with upstream's external-provisioner
  and external-attacher, run as the request's `CsiOptions` say (capacity tracking, strict
  topology, volume limit), or the old test double where a self-check asks for it.
- `VendorStorage`: a vendor's package (manifests and image archives, as its maintainers
  ship it), installed into every cluster the backend starts for the run. The harness
  cannot change how a vendor's sidecars run, so a request for another CSI stack setting
  is answered with the exact reason (`vendor_refusal`), never with a cluster that
  silently runs something else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.vendor_package import DriverPackage

__all__ = ["HarnessStorage", "StorageStack", "VendorStorage", "vendor_refusal"]

VENDOR_WAIT_TIMEOUT = 180.0  # seconds a package has to register and be Ready (certify --wait-timeout)


@dataclass(frozen=True)
class HarnessStorage:
    """pvchaos-csi and upstream's sidecars (or the old test double), run as `csi` says."""

    csi: CsiOptions = field(default_factory=CsiOptions)
    test_double: bool = False

    @property
    def driver(self) -> str:
        from pvchaos.clusters.csi import DRIVER_NAME
        return DRIVER_NAME


@dataclass(frozen=True)
class VendorStorage:
    """A vendor's package: the only storage of the clusters it is part of."""

    package: DriverPackage
    wait_timeout: float = VENDOR_WAIT_TIMEOUT

    @property
    def driver(self) -> str:
        return self.package.driver_name


StorageStack = HarnessStorage | VendorStorage


def vendor_refusal(package: DriverPackage, csi: CsiOptions) -> str | None:
    """Why a vendor's package cannot run as a request's CSI options ask (one line), or None.

    Capacity tracking is the package's own (its CSIDriver's storageCapacity); the
    provisioner's flags and the node plugin's volume limit are the vendor's sidecars'
    and driver's, which the harness does not rewrite."""
    default = CsiOptions()
    name = package.driver_name
    if csi.capacity_tracking and not package.publishes_capacity:
        return (f"driver {name}: not applicable: its CSIDriver sets storageCapacity false, so no "
                f"CSIStorageCapacity is published (the test needs capacity tracking)")
    flags = [flag for flag, asked, usual in (
        ("--strict-topology", csi.strict_topology, default.strict_topology),
        ("--immediate-topology=false", not csi.immediate_topology, not default.immediate_topology),
        (f"--capacity-poll-interval={csi.capacity_poll_seconds}s", csi.capacity_poll_seconds,
         default.capacity_poll_seconds),
    ) if asked != usual]
    if flags:
        return (f"driver {name}: its package runs its own external-provisioner; the test needs it run with "
                f"{', '.join(flags)}, which the harness does not set on a vendor's sidecar")
    if csi.max_volumes_per_node != default.max_volumes_per_node:
        return (f"driver {name}: its node plugin reports its own volume limit (CSINode allocatable); the test "
                f"needs a limit of {csi.max_volumes_per_node}, which the harness sets on pvchaos-csi only")
    if csi.attach_required != default.attach_required:
        return (f"driver {name}: its CSIDriver's attachRequired is the package's own; the test needs "
                f"attachRequired {str(csi.attach_required).lower()}, which the harness sets on pvchaos-csi only")
    if csi.node_snapshots and not package.snapshots_on_nodes:
        return (f"driver {name}: its package runs no csi-snapshotter with --node-deployment; the test needs "
                f"snapshots cut on the nodes (distributed snapshotting), which the harness sets on pvchaos-csi only")
    if csi.fs_group_policy != default.fs_group_policy:
        return (f"driver {name}: its CSIDriver's fsGroupPolicy is the package's own; the test needs "
                f"fsGroupPolicy {csi.fs_group_policy}, which the harness sets on pvchaos-csi only")
    return None

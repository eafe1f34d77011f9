"""The storage system's free space, as the harness's CSI driver reports it: a zone's
capacity is set in the driver's control file (re-read on every GetCapacity and
CreateVolume), the way a storage array fills up. Undo registered first (STYLE 5)."""

from __future__ import annotations

import allure

from pvchaos.chaos.csi_control import control_file, read_map, write_map
from pvchaos.clusters.backend import ClusterHandle
from pvchaos.kube.cleanup import Cleanup

CAPACITY_FILE = "capacity.json"  # pvchaos-csi --control-dir: {"<zone>": "<quantity>"}


@allure.step("zone {zone} has {quantity} of storage (driver's capacity)")
def set_zone_capacity(cleanup: Cleanup, cluster: ClusterHandle, zone: str, quantity: str) -> dict[str, str]:
    """Set one zone's total capacity; returns the capacities in force. The previous value
    comes back at cleanup (absent: unlimited)."""
    path = control_file(cluster, CAPACITY_FILE)
    before = read_map(path)

    def restore() -> None:
        now = read_map(path)
        if zone in before:
            now[zone] = before[zone]
        else:
            now.pop(zone, None)
        write_map(path, now)

    cleanup.push(f"restore the capacity of {zone}", restore)
    after = {**before, zone: quantity}
    write_map(path, after)
    return after

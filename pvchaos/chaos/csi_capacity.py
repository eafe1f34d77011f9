"""The storage system's free space, as the harness's CSI driver reports it: a zone's
capacity is set in the driver's control file (re-read on every GetCapacity and
CreateVolume), the way a storage array fills up. Undo registered first (STYLE 5)."""

from __future__ import annotations

from collections.abc import Callable

import allure

from pvchaos.chaos.csi_control import control_file, read_map, write_map
from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.chaos.old_forms import old_form

CAPACITY_FILE = "capacity.json"  # pvchaos-csi --control-dir: {"<zone>": "<quantity>"}


def _set_zone_capacity_0_1(new: Callable[..., Fault], ws: Target, zone: str, quantity: str) -> dict[str, str]:
    """0.1 returned the capacities in force."""
    new(ws, zone, quantity)
    return read_map(control_file(ws.cluster, CAPACITY_FILE))


@old_form(("cleanup", "cluster"), _set_zone_capacity_0_1)
@allure.step("zone {zone} has {quantity} of storage (driver's capacity)")
def set_zone_capacity(ws: Target, zone: str, quantity: str) -> Fault:
    """Set one zone's total capacity. The previous value comes back on restore (absent:
    unlimited)."""
    path = control_file(ws.cluster, CAPACITY_FILE)
    before = read_map(path)

    def restore() -> None:
        now = read_map(path)
        if zone in before:
            now[zone] = before[zone]
        else:
            now.pop(zone, None)
        write_map(path, now)

    return apply(ws.cleanup, f"zone {zone} has {quantity}", (zone,), lambda: write_map(path, {**before, zone: quantity}),
                 restore, f"restore the capacity of {zone}")

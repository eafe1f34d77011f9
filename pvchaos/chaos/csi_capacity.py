"""The storage system's free space, as the harness's CSI driver reports it: a zone's
capacity is set in the driver's control file (re-read on every GetCapacity and
CreateVolume), the way a storage array fills up. Undo registered first (STYLE 5)."""

from __future__ import annotations

import json
from pathlib import Path

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle

CAPACITY_FILE = "capacity.json"  # pvchaos-csi --control-dir: {"<zone>": "<quantity>"}


def _control_file(cluster: ClusterHandle) -> Path:
    if cluster.directory is None or not csi.paths_for(cluster.directory).root.is_dir():
        raise ClusterError(f"cluster {cluster.name}: no pvchaos-csi control directory (not the harness's CSI driver)")
    return csi.paths_for(cluster.directory).control_dir / CAPACITY_FILE


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write(path: Path, capacities: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(capacities), encoding="utf-8")
    tmp.replace(path)  # the driver never reads half a file


@allure.step("zone {zone} has {quantity} of storage (driver's capacity)")
def set_zone_capacity(ws: Target, zone: str, quantity: str) -> Fault:
    """Set one zone's total capacity. The previous value comes back on restore (absent:
    unlimited)."""
    path = _control_file(ws.cluster)
    before = _read(path)

    def restore() -> None:
        now = _read(path)
        if zone in before:
            now[zone] = before[zone]
        else:
            now.pop(zone, None)
        _write(path, now)

    return apply(ws.cleanup, f"zone {zone} has {quantity}", (zone,), lambda: _write(path, {**before, zone: quantity}),
                 restore, f"restore the capacity of {zone}")

"""The operator's move of a node-local volume to another node (the harness's CSI driver,
pvchaos/tools/csidriver/driver/move.go): its directory is copied to the new node, and the
driver's control file `moves.json` says where the volume is now, so the controller
publishes it there. This is the storage side of KEP-5381's maintenance scenario; the PV's
nodeAffinity, Kubernetes' side, is the suite's to change. Undo registered first (STYLE 5)."""

from __future__ import annotations

import json
from pathlib import Path

import allure

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.kube.cleanup import Cleanup

MOVES_FILE = "moves.json"  # pvchaos-csi --control-dir: {"<volume id>": "<hostname>"}


def _moves_file(cluster: ClusterHandle) -> Path:
    if cluster.directory is None or not csi.paths_for(cluster.directory).root.is_dir():
        raise ClusterError(f"cluster {cluster.name}: no pvchaos-csi control directory (not the harness's CSI driver)")
    return csi.paths_for(cluster.directory).control_dir / MOVES_FILE


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write(path: Path, moves: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(moves), encoding="utf-8")
    tmp.replace(path)  # the driver never reads half a file


@allure.step("the operator moves volume {volume_id} from node {source} to node {target}")
def move_local_volume(cleanup: Cleanup, cluster: ClusterHandle, volume_id: str, volume_dir: str,
                      source: str, target: str, target_hostname: str, copy_data: bool = True) -> None:
    """Copy the volume's directory from `source` to `target` (node containers: kind) and
    record the move for the driver's controller. The record is dropped at cleanup.
    `copy_data=False` records the move only: an operator step whose copy never happened."""
    faults = cluster.faults
    if copy_data and (faults is None or not hasattr(faults, "copy_between_nodes")):
        raise ClusterError(f"cluster {cluster.name}: backend {cluster.backend} cannot copy between nodes")
    path = _moves_file(cluster)

    def forget() -> None:
        now = _read(path)
        now.pop(volume_id, None)
        _write(path, now)

    cleanup.push(f"forget the move of volume {volume_id}", forget)
    if copy_data:
        faults.copy_between_nodes(source, target, volume_dir)  # type: ignore[union-attr]
    _write(path, {**_read(path), volume_id: target_hostname})

"""The operator's move of a node-local volume to another node (the harness's CSI driver,
pvchaos/tools/csidriver/driver/move.go): its directory is copied to the new node, and the
driver's control file `moves.json` says where the volume is now, so the controller
publishes it there. This is the storage side of KEP-5381's maintenance scenario; the PV's
nodeAffinity, Kubernetes' side, is the suite's to change. A `Fault` (chaos/fault.py):
restoring forgets the move record (the copied bytes stay, as after a real copy)."""

from __future__ import annotations

import allure

from pvchaos.chaos.csi_control import control_file, read_map, write_map
from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.clusters.backend import ClusterError, NodeStorageFaults

MOVES_FILE = "moves.json"  # pvchaos-csi --control-dir: {"<volume id>": "<hostname>"}


@allure.step("the operator moves volume {volume_id} from node {source} to node {target}")
def move_local_volume(ws: Target, volume_id: str, volume_dir: str, source: str, target: str,
                      target_hostname: str, copy_data: bool = True) -> Fault:
    """Copy the volume's directory from `source` to `target` (node containers: kind) and
    record the move for the driver's controller. `copy_data=False` records the move only:
    an operator step whose copy never happened."""
    cluster = ws.cluster
    faults = cluster.faults
    if copy_data and not isinstance(faults, NodeStorageFaults):
        raise ClusterError(f"cluster {cluster.name}: backend {cluster.backend} cannot copy between nodes")
    path = control_file(cluster, MOVES_FILE)

    def forget() -> None:
        now = read_map(path)
        now.pop(volume_id, None)
        write_map(path, now)

    def move() -> None:
        if copy_data:
            assert isinstance(faults, NodeStorageFaults)
            faults.copy_between_nodes(source, target, volume_dir)
        write_map(path, {**read_map(path), volume_id: target_hostname})

    return apply(ws.cleanup, f"move volume {volume_id} from {source} to {target}", (source, target), move, forget,
                 f"forget the move of volume {volume_id}")

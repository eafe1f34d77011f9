"""A CSI driver deregistered from one node for a while (kubernetes #126921: a restarted
node plugin; the kubelet takes the driver out of the node's CSINode until it registers
again). Where node plugins are real (kind) the plugin is stopped, so the kubelet does it;
on KWOK nodes the CSINode entry is taken out as that kubelet would, and put back on
restore exactly as it was. The undo is registered first (STYLE 5)."""

from __future__ import annotations

import allure

from pvchaos.chaos.csi_node_plugin import stop_node_plugin
from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.clusters.backend import ClusterError, NodeStorageFaults
from pvchaos.kube import kinds
from pvchaos.kube.kinds import Obj


def _entries(csinode: Obj | None) -> list[Obj]:
    return list(((csinode or {}).get("spec") or {}).get("drivers") or [])


@allure.step("CSI driver {driver} deregistered from node {node}")
def deregister_driver(ws: Target, node: str, driver: str) -> Fault:
    if isinstance(ws.cluster.faults, NodeStorageFaults):
        return stop_node_plugin(ws, node)
    csinode = kinds.get(ws.kube, "CSINode", node)
    entry = next((d for d in _entries(csinode) if d.get("name") == driver), None)
    if csinode is None or entry is None:
        raise ClusterError(f"node {node}: driver {driver} is not in its CSINode {_entries(csinode)}")

    def write(drivers: list[Obj]) -> None:
        now = kinds.get(ws.kube, "CSINode", node) or csinode
        kinds.replace(ws.kube, {**now, "kind": "CSINode", "spec": {**(now.get("spec") or {}), "drivers": drivers}})

    def restore() -> None:
        now = kinds.get(ws.kube, "CSINode", node) or csinode
        write([*(d for d in _entries(now) if d.get("name") != driver), entry])

    return apply(ws.cleanup, f"CSI driver {driver} deregistered from node {node}", (node,),
                 lambda: write([d for d in _entries(csinode) if d.get("name") != driver]), restore,
                 f"register CSI driver {driver} on node {node} again")

"""The CSI node plugin gone from one node (kind: its systemd unit stopped and its
registration socket removed): the kubelet deregisters the driver, as after a node
plugin DaemonSet pod crash-loops or is evicted. A `Fault` (chaos/fault.py): the plugin's
restart is registered first (STYLE 5), so a pod still mounted there can be unmounted at
teardown."""

from __future__ import annotations

from functools import partial

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.clusters.backend import ClusterError, NodeStorageFaults


@allure.step("stop the CSI node plugin on node {node}")
def stop_node_plugin(ws: Target, node: str) -> Fault:
    faults = ws.cluster.faults
    if not isinstance(faults, NodeStorageFaults):
        raise ClusterError(f"cluster {ws.cluster.name}: backend {ws.cluster.backend} runs no node plugin it can stop")
    return apply(ws.cleanup, f"stop the CSI node plugin on node {node}", (node,), partial(faults.stop_node_plugin, node),
                 partial(faults.start_node_plugin, node), f"start the CSI node plugin on node {node}")

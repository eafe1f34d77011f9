"""The CSI node plugin gone from one node (kind: its systemd unit stopped and its
registration socket removed): the kubelet deregisters the driver, as after a node
plugin DaemonSet pod crash-loops or is evicted. The plugin's restart is registered first
(STYLE 5), so a pod still mounted there can be unmounted at teardown."""

from __future__ import annotations

from typing import Any

import allure

from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.kube.cleanup import Cleanup


@allure.step("stop the CSI node plugin on node {node}")
def stop_node_plugin(cleanup: Cleanup, cluster: ClusterHandle, node: str) -> None:
    faults = cluster.faults
    if faults is None or not hasattr(faults, "stop_node_plugin"):
        raise ClusterError(f"cluster {cluster.name}: backend {cluster.backend} runs no node plugin it can stop")
    plugin: Any = faults  # a container backend's faults (kind.KindFaults)
    cleanup.push(f"start the CSI node plugin on node {node}", lambda: plugin.start_node_plugin(node))
    plugin.stop_node_plugin(node)

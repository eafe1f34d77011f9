"""A node joining the running cluster (kubernetes #95911's shape: pods wait for room, a
node arrives, and what its node plugin will report is not there yet for a moment).
Local only (`NodeJoins`): the Node object alone, the CSI registrar then writes its
CSINode as late as a node plugin would. The node's removal is registered first (STYLE 5)."""

from __future__ import annotations

from functools import partial

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.clusters.backend import ClusterError, NodeJoins


@allure.step("node {name} joins zone {zone}")
def join_node(ws: Target, name: str, zone: str, labels: dict[str, str] | None = None) -> Fault:
    faults = ws.cluster.faults
    if not isinstance(faults, NodeJoins):
        raise ClusterError(f"cluster {ws.cluster.name}: backend {ws.cluster.backend} cannot add a node while it runs")
    return apply(ws.cleanup, f"node {name} joins zone {zone}", (name,),
                 partial(faults.join_node, name, zone, dict(labels or {})), partial(faults.remove_node, name),
                 f"remove the joined node {name}")

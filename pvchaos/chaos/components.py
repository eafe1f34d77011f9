"""Control-plane restarts: stop kube-scheduler, kube-controller-manager, the test double
or a CSI process (the driver's controller service, either sidecar; e.g. after the
`crash` knob) and start it again with the same command line (local backend)."""

from __future__ import annotations

import allure

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterHandle
from pvchaos.kube.cleanup import Cleanup

RESTARTABLE = ("kube-scheduler", "kube-controller-manager", "provisioner", *csi.COMPONENTS)


@allure.step("stop {component}")
def stop_component(cleanup: Cleanup, cluster: ClusterHandle, component: str) -> str:
    if component not in RESTARTABLE:
        raise ValueError(f"cannot restart {component!r}; restartable: {RESTARTABLE}")
    if cluster.faults is None:
        raise RuntimeError(f"backend {cluster.backend} cannot restart components")
    faults = cluster.faults
    cleanup.push(f"start {component}", lambda: faults.start_component(component))
    faults.stop_component(component)
    return component


@allure.step("start {component}")
def start_component(cluster: ClusterHandle, component: str) -> str:
    assert cluster.faults is not None
    cluster.faults.start_component(component)
    return component

"""Control-plane restarts: stop kube-scheduler, kube-controller-manager, the test double
or a CSI process (the driver's controller service, either sidecar; e.g. after the
`crash` knob) and start it again with the same command line (local backend)."""

from __future__ import annotations

from functools import partial

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.chaos.old_forms import old_form, returns_argument
from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterHandle

RESTARTABLE = ("kube-scheduler", "kube-controller-manager", "provisioner", *csi.COMPONENTS)


@old_form(("cleanup", "cluster"), returns_argument)
@allure.step("stop {component}")
def stop_component(ws: Target, component: str) -> Fault:
    """Stop a control-plane component; its start is registered first, and the handle's
    `restore()` starts it again with the same command line."""
    if component not in RESTARTABLE:
        raise ValueError(f"cannot restart {component!r}; restartable: {RESTARTABLE}")
    cluster = ws.cluster
    if cluster.faults is None:
        raise RuntimeError(f"backend {cluster.backend} cannot restart components")
    faults = cluster.faults
    return apply(ws.cleanup, f"stop {component}", (component,), partial(faults.stop_component, component),
                 partial(faults.start_component, component), f"start {component}")


@allure.step("start {component}")
def start_component(cluster: ClusterHandle, component: str) -> str:
    """Start a component that no handle holds (a fault's own `restore()` is the rule)."""
    assert cluster.faults is not None
    cluster.faults.start_component(component)
    return component

"""Upgrade a running local cluster in place, component by component, and measure how long
each one was unavailable.

etcd keeps running (its data is the cluster); each control-plane component is stopped
and started again with the new version's binary on the same data, ports and flags
(clusters.local.upgrade_plan decides the order and the command lines). A component's
unavailable window runs from the moment it is asked to stop until its /readyz
(kube-apiserver) or /healthz answers 200 again. The nodes are KWOK's: "upgrading the
kubelet" is the node reporting the new version in status.nodeInfo.kubeletVersion.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pvchaos.clusters.backend import Capability, ClusterError, ClusterHandle
from pvchaos.clusters.local.cluster import COMPONENT_PORT, LocalCluster, admin_token
from pvchaos.clusters.local.loopback_http import get as get_url
from pvchaos.clusters.local.upgrade_plan import (
    CONTROL_PLANE_ORDER,
    NODES,
    UpgradePlan,
    unknown_gates,
    upgraded_argv,
)
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.client import connect
from pvchaos.tools.build import Binaries
from pvchaos.tools.gates import known_gates

HEALTH_PATH = {"kube-apiserver": "/readyz", "kube-controller-manager": "/healthz", "kube-scheduler": "/healthz"}


def upgradable(handle: ClusterHandle) -> LocalCluster:
    """The cluster behind a handle with the in-place-upgrade capability, to upgrade; a
    suite asks for the capability (`needs("in-place-upgrade")`), never for the class."""
    local = handle.faults
    if not handle.has(Capability.IN_PLACE_UPGRADE) or not isinstance(local, LocalCluster):
        raise ClusterError(f"backend {handle.backend}: no in-place-upgrade")
    return local


@dataclass(frozen=True)
class Window:
    """How long one component was unavailable during the upgrade."""

    component: str
    seconds: float
    detail: str = ""
    unavailable: bool = True  # False for the nodes' step: nothing stops, the time is the patches'

    def __str__(self) -> str:
        what = "unavailable" if self.unavailable else "taken"
        return f"{self.component}: {self.seconds:.2f}s {what}" + (f" ({self.detail})" if self.detail else "")


def check_binaries(plan: UpgradePlan, binaries: Binaries) -> None:
    """Refuse before touching anything when the new version would not start with our gates."""
    unknown = unknown_gates(plan, known_gates(binaries.kube_apiserver))
    if unknown:
        raise ClusterError(f"feature gate(s) {', '.join(unknown)} do not exist in {plan.to_version}; "
                           "its components would refuse to start")


def upgrade(local: LocalCluster, plan: UpgradePlan, binaries: Binaries,
            step_starting: Callable[[str], None] | None = None,
            step_done: Callable[[str, Window], None] | None = None) -> list[Window]:
    """Run the plan on a running cluster; returns each step's window. A component that
    does not come back raises ClusterError naming it, with its log's last lines.
    `step_starting` runs just before a component is stopped (a test creates what must
    wait out that component's absence there)."""
    if local.state is None:
        raise ClusterError(f"cluster {local.cfg.name} is not running")
    check_binaries(plan, binaries)
    windows: list[Window] = []
    for step in plan.steps:
        if step_starting is not None:
            step_starting(step)
        window = _restart_with(local, step, binaries, plan) if step in CONTROL_PLANE_ORDER else _report_version(local, plan)
        windows.append(window)
        if step_done is not None:
            step_done(step, window)
    local.cfg = replace(local.cfg, k8s_version=plan.to_version)
    local.state.k8s_version = plan.to_version
    local.state.save()
    return windows


def _restart_with(local: LocalCluster, component: str, binaries: Binaries, plan: UpgradePlan) -> Window:
    assert local.state is not None
    record = local.state.processes[component]
    argv = upgraded_argv(component, record.argv, binaries.all()[component], plan)
    started = time.monotonic()
    local.stop_component(component)
    stopped = time.monotonic()
    local.state.processes[component] = replace(record, argv=argv)
    local.state.save()
    local.start_component(component)
    _await_healthy(local, component)
    seconds = time.monotonic() - started
    detail = f"stopping {stopped - started:.2f}s, starting to {HEALTH_PATH[component]} 200 {seconds - (stopped - started):.2f}s"
    if component == "kube-apiserver":
        served = _served_version(local)
        if served != plan.to_version:
            raise ClusterError(f"kube-apiserver answers as {served} after its upgrade to {plan.to_version}")
    return Window(component, seconds, detail)


def _await_healthy(local: LocalCluster, component: str) -> None:
    assert local.state is not None
    url = f"https://127.0.0.1:{local.state.ports[COMPONENT_PORT[component]]}{HEALTH_PATH[component]}"
    token = admin_token(local.directory) if component == "kube-apiserver" else None
    local.await_healthy(component, url, token, after="its upgrade")


def _served_version(local: LocalCluster) -> str:
    assert local.state is not None
    status, body = get_url(f"https://127.0.0.1:{local.state.ports['apiserver']}/version", admin_token(local.directory))
    return str(json.loads(body).get("gitVersion")) if status == 200 else f"(HTTP {status})"


def _report_version(local: LocalCluster, plan: UpgradePlan) -> Window:
    """Every node reports the new kubelet version (what a drained-and-upgraded kubelet
    does); nothing becomes unavailable, so the window is the time the patches took."""
    kube = connect(local.directory / "kubeconfig")
    started = time.monotonic()
    try:
        nodes = kinds.list_objects(kube, "Node")[0]
        body: dict[str, Any] = {"status": {"nodeInfo": {"kubeletVersion": plan.to_version}}}
        for node in nodes:
            kube.core.patch_node_status(o.name(node), body)
    finally:
        kube.api.close()
    return Window(NODES, time.monotonic() - started, f"{len(nodes)} nodes report kubelet {plan.to_version}",
                  unavailable=False)

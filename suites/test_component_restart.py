"""Control-plane restarts mid-binding (SPEC 4): claims pending while the scheduler or the
controller-manager is down still bind once it returns, and no PV is bound twice (the
invariant checker runs after the test)."""

from __future__ import annotations

import time

import allure
import pytest

from pvchaos.chaos import components
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.objects import name, phase, scheduled
from pvchaos.kube.wait import pod_running

pytestmark = [allure.epic("Control plane"), allure.feature("Component restarts"), pytest.mark.disruptive,
              pytest.mark.needs("component-restart")]


@allure.story("scheduler down while WaitForFirstConsumer pods arrive")
@pytest.mark.needs("dynamic-zonal")
@pytest.mark.quick
def test_scheduler_restart_mid_binding(ws: Workspace) -> None:
    sc = ws.storage_class("zonal", "WaitForFirstConsumer")
    stopped = components.stop_component(ws, "kube-scheduler")
    claims = [f"data-{i}" for i in range(6)]
    for i, c in enumerate(claims):
        ws.create(b.persistent_volume_claim(c, "1Gi", sc))
        ws.create(b.pod(f"app-{i}", (c,)))
    placed = [name(p) for p in ws.list("Pod") if scheduled(p)]
    x.expect(not placed, f"no pod is scheduled while the scheduler is down: {placed}")
    t0 = time.monotonic()
    stopped.restore()
    x.all_reach(ws, "Pod", len(claims), pod_running, "Running", timeout=90)
    x.all_reach(ws, "PersistentVolumeClaim", len(claims), lambda c: phase(c) == "Bound", "Bound", timeout=90)
    measure.since("recovery seconds", t0)


@allure.story("controller-manager down while claims wait for static PVs")
@pytest.mark.needs("static-pv")
def test_controller_manager_restart_mid_binding(ws: Workspace) -> None:
    iso = ws.case_labels
    stopped = components.stop_component(ws, "kube-controller-manager")
    claims = [f"data-{i}" for i in range(5)]
    for i in range(len(claims)):
        ws.create(b.persistent_volume(ws.name(f"pv{i}"), f"{i + 1}Gi", labels=iso))
    for c in claims:
        ws.create(b.persistent_volume_claim(c, "1Gi", "", selector={"matchLabels": iso}))
    bound = [name(c) for c in ws.list("PersistentVolumeClaim") if phase(c) == "Bound"]
    x.expect(not bound, f"nothing binds while the controller-manager is down: {bound}")
    t0 = time.monotonic()
    stopped.restore()
    x.all_reach(ws, "PersistentVolumeClaim", len(claims), lambda c: phase(c) == "Bound", "Bound", timeout=90)
    measure.since("recovery seconds", t0)
    volumes = [c["spec"]["volumeName"] for c in ws.list("PersistentVolumeClaim")]
    x.expect(len(set(volumes)) == len(volumes), f"each claim got its own PV: {volumes}")

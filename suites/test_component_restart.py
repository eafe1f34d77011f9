"""Control-plane restarts mid-binding (SPEC 4): claims pending while the scheduler or the
controller-manager is down still bind once it returns, and no PV is bound twice (the
invariant checker runs after the test)."""

from __future__ import annotations

import time

import allure
import pytest

from chaos import components
from kube import builders as b
from pvchaos.kit import measure
from pvchaos.kit import expect as x
from kube.wait import wait_for_state
from pvchaos.kit.workspace import Workspace

pytestmark = [allure.epic("Control plane"), allure.feature("Component restarts"), pytest.mark.disruptive,
              pytest.mark.needs("component-restart")]


def _all_bound(ws: Workspace, claims: list[str], timeout: float = 90) -> None:
    wait_for_state(ws.kube, "PersistentVolumeClaim",
                   lambda st: True if all(st.get(f"{ws.namespace}/{c}", {}).get("status", {}).get("phase") == "Bound"
                                          for c in claims) else None,
                   f"claims {claims} Bound", ws.namespace, timeout)


@allure.story("scheduler down while WaitForFirstConsumer pods arrive")
@pytest.mark.needs("dynamic-zonal")
def test_scheduler_restart_mid_binding(ws: Workspace) -> None:
    sc = ws.name("zonal")
    ws.create(b.storage_class(sc, ws.cluster.zonal_class_provisioner or "", "WaitForFirstConsumer"))
    components.stop_component(ws.cleanup, ws.cluster, "kube-scheduler")
    claims = [f"data-{i}" for i in range(6)]
    for i, c in enumerate(claims):
        ws.create(b.persistent_volume_claim(c, "1Gi", sc))
        ws.create(b.pod(f"app-{i}", (c,)))
    pending = [p for p in ws.list("Pod") if p["spec"].get("nodeName")]
    x.expect(not pending, f"no pod is scheduled while the scheduler is down: {[p['metadata']['name'] for p in pending]}")
    t0 = time.monotonic()
    components.start_component(ws.cluster, "kube-scheduler")
    for i in range(len(claims)):
        x.pod_runs(ws, f"app-{i}", timeout=90)
    _all_bound(ws, claims)
    measure.since("recovery seconds", t0)


@allure.story("controller-manager down while claims wait for static PVs")
@pytest.mark.needs("static-pv")
def test_controller_manager_restart_mid_binding(ws: Workspace) -> None:
    iso = ws.case_labels
    components.stop_component(ws.cleanup, ws.cluster, "kube-controller-manager")
    claims = [f"data-{i}" for i in range(5)]
    for i in range(len(claims)):
        ws.create(b.persistent_volume(ws.name(f"pv{i}"), f"{i + 1}Gi", labels=iso))
    for c in claims:
        ws.create(b.persistent_volume_claim(c, "1Gi", "", selector={"matchLabels": iso}))
    bound = [c["metadata"]["name"] for c in ws.list("PersistentVolumeClaim")
             if c.get("status", {}).get("phase") == "Bound"]
    x.expect(not bound, f"nothing binds while the controller-manager is down: {bound}")
    t0 = time.monotonic()
    components.start_component(ws.cluster, "kube-controller-manager")
    _all_bound(ws, claims)
    measure.since("recovery seconds", t0)
    volumes = [c["spec"]["volumeName"] for c in ws.list("PersistentVolumeClaim")]
    x.expect(len(set(volumes)) == len(volumes), f"each claim got its own PV: {volumes}")

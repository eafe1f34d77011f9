"""Volume stress on one node, certify's scale tier (issue 35): N pods with one claim each,
all on one node, timed from creation until every pod is Running, and from deletion until
every pod, claim and provisioned volume is gone. Certification programs run such a test;
upstream's e2e has one too (testsuites/volume_stress.go, DriverInfo.StressTestOptions).

The class is the workspace's, so the volumes are the driver's under test (pvchaos-csi on
local and kind clusters, a vendor's driver under `pvchaos certify`), WaitForFirstConsumer
so each volume is made for the node its pod was placed on, and reclaimPolicy Delete, so
the driver's provisioner both creates and deletes every volume.

N is `--stress-pods` (default 20, sized for 2 cores). A node with room for fewer pods
(allocatable pods less the pods already on it), or a driver that takes fewer volumes per
node (its CSINode allocatable count), sets the number instead, and the result says which.
The times land on the Allure result and in summary.md as measurements (pvchaos.kit.measure).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import allure
import pytest

from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj, list_objects
from pvchaos.kube.wait import State, wait_for_state

pytestmark = [allure.epic("Scale"), allure.feature("Volume stress"), pytest.mark.stress,
              pytest.mark.needs("dynamic-zonal")]
PROVISIONED_BY = ("pv.kubernetes.io/provisioned-by", "volume.kubernetes.io/provisioned-by")


def _phase_timeout(pods: int) -> float:
    """A bound that grows with N: 2 minutes plus 5 s a pod (20 pods: 4 minutes)."""
    return 120.0 + 5.0 * pods


def _room(ws: Workspace, node: Obj, provisioner: str, asked: int) -> tuple[int, str]:
    """How many pods with a volume of `provisioner` this node takes, and why, if fewer than asked."""
    limits = [(asked, f"--stress-pods {asked}")]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    if str(allocatable.get("pods", "")).isdigit():
        running = list_objects(ws.kube, "Pod", None, field_selector=f"spec.nodeName={o.name(node)}")[0]
        limits.append((int(allocatable["pods"]) - len(running),
                       f"node {o.name(node)}: {allocatable['pods']} allocatable pods, {len(running)} already there"))
    csinode = ws.get("CSINode", o.name(node)) or {}
    for driver in (csinode.get("spec") or {}).get("drivers") or []:
        count = (driver.get("allocatable") or {}).get("count")
        if driver.get("name") == provisioner and isinstance(count, int):
            limits.append((count, f"driver {provisioner}: CSINode {o.name(node)} allows {count} volumes"))
    n, why = min(limits, key=lambda limit: limit[0])
    return max(n, 0), why


def _all_gone(ws: Workspace, kind: str, names: Iterable[str], namespace: str | None, timeout: float) -> None:
    """Wait until none of `names` (objects of `kind`) exists; the timeout lists those left."""
    wanted = set(names)

    def gone(state: State) -> bool | None:
        return True if not wanted & {o.name(obj) for obj in state.values()} else None

    wait_for_state(ws.kube, kind, gone, f"all of {len(wanted)} {kind} objects deleted", namespace, timeout)


@allure.story("N pods with one claim each on one node: all Running, then all gone with their volumes")
@pytest.mark.relies_on("binder", "scheduler", "volume-binding", "provisioner")
@pytest.mark.quick
def test_pods_with_volumes_on_one_node(ws: Workspace, request: pytest.FixtureRequest) -> None:
    sc = ws.storage_class("stress", "WaitForFirstConsumer", reclaim="Delete")
    provisioner = str((ws.get("StorageClass", sc) or {}).get("provisioner"))
    node = ws.node()
    asked = int(request.config.getoption("stress_pods"))
    n, limit = _room(ws, node, provisioner, asked)
    measure.note("pods on one node", f"{n} on {o.name(node)} ({'as asked' if n == asked else limit})")
    if n < 1:
        pytest.fail(f"no room for a pod with a volume on {o.name(node)}: {limit}")
    claims, pods = [f"data-{i}" for i in range(n)], [f"app-{i}" for i in range(n)]
    timeout = _phase_timeout(n)

    with allure.step(f"{n} claims of class {sc} and {n} pods pinned to {o.name(node)}: all Running"):
        started = time.monotonic()
        ws.create_all((b.persistent_volume_claim(c, "1Gi", sc) for c in claims), parallel=4)
        ws.create_all((b.pod(p, (c,), node_selector=ws.pin(node)) for p, c in zip(pods, claims, strict=True)),
                      parallel=4)
        running = x.all_reach(ws, "Pod", n, lambda p: o.phase(p) == "Running" and o.node_name(p) == o.name(node),
                              f"Running on {o.name(node)}", timeout=timeout, names=pods)
        up = measure.since("all pods Running", started)
        measure.note("pods Running per second", f"{n / max(up, 1e-3):.2f}")
    x.expect(len(running) == n, f"all {n} pods Running on {o.name(node)}, got {len(running)}")

    volumes = sorted(str(c["spec"].get("volumeName") or "") for c in ws.list("PersistentVolumeClaim") if o.name(c) in claims)
    x.expect(len(set(volumes)) == n and all(volumes), f"each of the {n} claims has its own volume: {volumes}")
    for volume in volumes:
        pv = ws.get("PersistentVolume", volume)
        notes = ((pv or {}).get("metadata") or {}).get("annotations") or {}
        by = next((notes[k] for k in PROVISIONED_BY if k in notes), None)
        x.expect(by == provisioner, f"volume {volume} was provisioned by {provisioner} (the class's provisioner), "
                 f"not {by!r}", pv, ws=ws)

    with allure.step(f"delete the {n} pods and claims: pods, claims and the {n} volumes all gone"):
        started = time.monotonic()
        ws.delete_all("Pod", pods, wait=False)
        ws.delete_all("PersistentVolumeClaim", claims, wait=False)
        _all_gone(ws, "Pod", pods, ws.namespace, timeout)
        _all_gone(ws, "PersistentVolumeClaim", claims, ws.namespace, timeout)
        _all_gone(ws, "PersistentVolume", volumes, None, timeout)
        measure.since("all pods, claims and volumes gone", started)

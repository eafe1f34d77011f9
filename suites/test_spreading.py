"""Spreading replicas and their volumes across zones (SPEC 3): topologySpreadConstraints
with a WaitForFirstConsumer class, and the per-zone StorageClass pattern with pod
anti-affinity."""

from __future__ import annotations

import allure
import pytest

from clusters.topology import ZONE_KEY
from conformance.affinity import node_matches_pv_affinity
from kube import builders as b
from pvchaos.kit import expect as x
from kube.wait import wait_for
from pvchaos.kit.workspace import Workspace

pytestmark = [allure.epic("Scheduling with volumes"), allure.feature("Spreading across zones"),
              pytest.mark.needs("zones", "dynamic-zonal")]


def _zones(ws: Workspace) -> list[str]:
    return sorted({x.label(n, ZONE_KEY) or "" for n in ws.list("Node")} - {""})


def _replica_zone(ws: Workspace, pod: str, claim: str) -> str:
    node = x.node_of(ws, pod)
    pv = x.bound_volume(ws, claim)
    x.expect(node_matches_pv_affinity(node, pv), f"{pod} must run where its volume is", node, pv, ws=ws)
    return x.label(node, ZONE_KEY) or ""


@allure.story("topologySpreadConstraints on zones spread replicas and their volumes")
def test_topology_spread_puts_replicas_and_volumes_in_distinct_zones(ws: Workspace) -> None:
    zones = _zones(ws)
    sc = ws.name("zonal-wffc")
    ws.create(b.storage_class(sc, ws.cluster.zonal_class_provisioner or "", "WaitForFirstConsumer"))
    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}}}]}
    ws.create(b.statefulset("spread", len(zones), sc, pod_spec_extra=spread))
    wait_for(ws.kube, "StatefulSet", "spread", lambda o: (o or {}).get("status", {}).get("readyReplicas") == len(zones),
             f"{len(zones)} ready replicas", ws.namespace, timeout=90)
    placed = [_replica_zone(ws, f"spread-{i}", f"data-spread-{i}") for i in range(len(zones))]
    x.expect(sorted(placed) == zones, f"one replica per zone, got {placed}")


@allure.story("per-zone StorageClasses with pod anti-affinity")
def test_per_zone_classes_with_anti_affinity(ws: Workspace) -> None:
    zones = _zones(ws)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": ZONE_KEY, "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    for i, zone in enumerate(zones):
        sc = ws.name(f"zonal-{zone}")
        ws.create(b.storage_class(sc, ws.cluster.zonal_class_provisioner or "", "WaitForFirstConsumer",
                                  allowed_zones=[zone]))
        ws.create(b.persistent_volume_claim(f"data-{i}", "1Gi", sc))
        ws.create(b.pod(f"db-{i}", (f"data-{i}",), labels={"app": "db"}, extra_spec={"affinity": anti}))
    placed = []
    for i, zone in enumerate(zones):
        x.pod_runs(ws, f"db-{i}")
        got = _replica_zone(ws, f"db-{i}", f"data-{i}")
        x.expect(got == zone, f"db-{i} uses the {zone} class and must land in {zone}, got {got}")
        placed.append(got)
    x.expect(len(set(placed)) == len(zones), f"anti-affinity keeps replicas apart: {placed}")

"""Spreading replicas and their volumes across zones (SPEC 3): topologySpreadConstraints
with a WaitForFirstConsumer class, and the per-zone StorageClass pattern with pod
anti-affinity."""

from __future__ import annotations

import allure
import pytest

from pvchaos.conformance.topology_class import TopologyClass
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.objects import ZONE_KEY, zone

pytestmark = [allure.epic("Scheduling with volumes"), allure.feature("Spreading across zones"),
              pytest.mark.needs("zones", "dynamic-zonal")]


@allure.story("topologySpreadConstraints on zones spread replicas and their volumes")
@pytest.mark.quick
def test_topology_spread_puts_replicas_and_volumes_in_distinct_zones(ws: Workspace) -> None:
    """The volumes spread with the replicas: a zonal driver's into the replica's zone, a
    per-node driver's onto the replica's node (in that zone)."""
    x.applies_to(ws, TopologyClass.ZONE, TopologyClass.NODE)
    zones = ws.zones()
    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}}}]}
    x.dynamic_statefulset(ws, "spread", len(zones), pod_spec_extra=spread)
    placed = [zone(x.runs_where_its_volume_is(ws, f"spread-{i}", f"data-spread-{i}")) for i in range(len(zones))]
    x.expect(sorted(z or "" for z in placed) == sorted(zones), f"one replica per zone, got {placed}")
    for i, where in enumerate(placed):  # the volumes spread with them, not merely fit anywhere
        x.volume_in_zone(ws, f"data-spread-{i}", where or "")


@allure.story("per-zone StorageClasses with pod anti-affinity")
def test_per_zone_classes_with_anti_affinity(ws: Workspace) -> None:
    x.applies_to(ws, TopologyClass.ZONE)  # a class per zone restricts on the driver's zone key
    zones = ws.zones()
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": ZONE_KEY, "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    for i, name in enumerate(zones):
        sc = ws.storage_class(f"zonal-{name}", "WaitForFirstConsumer", [name])
        ws.create(b.persistent_volume_claim(f"data-{i}", "1Gi", sc))
        ws.create(b.pod(f"db-{i}", (f"data-{i}",), labels={"app": "db"}, extra_spec={"affinity": anti}))
    placed = []
    for i, name in enumerate(zones):
        x.pod_runs(ws, f"db-{i}")
        got = zone(x.runs_where_its_volume_is(ws, f"db-{i}", f"data-{i}"))
        x.expect(got == name, f"db-{i} uses the {name} class and must land in {name}, got {got}")
        x.volume_in_zone(ws, f"data-{i}", name)
        placed.append(got)
    x.expect(len(set(placed)) == len(zones), f"anti-affinity keeps replicas apart: {placed}")

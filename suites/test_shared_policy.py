"""The "shared policy" risk (KEP-5381): many PVs carry one nodeAffinity policy (a
StatefulSet's volumes, all allowed in the same zones), and the policy is tightened on
all of them at once. A mutation evicts nothing (SPEC 1), so the pods outside the new
policy keep running there until they restart; this measures how they are rescheduled
when they do, and how long the cluster takes to settle (every replica Running where
its volume allows), with a restart of the misplaced pods and with nodes failing.

Minutes of cluster time, so `long` (`pvchaos run --long`, the nightly job); the figures
are in docs/findings.md#shared-policy-tightening.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import allure
import pytest

from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.chaos import pv_affinity as mut
from pvchaos.conformance.types import NodeName
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import State, holds_for, pod_running, wait_for_state

pytestmark = [allure.epic("PV node affinity mutation (KEP-5381)"), allure.feature("One policy on many PVs"),
              pytest.mark.long, pytest.mark.disruptive,
              pytest.mark.needs("static-pv", "zones", "mutable-pv-affinity", "node-failure")]

STS = "web"
REPLICAS = 30
EVICT_AFTER_S = 2  # the pods' unreachable toleration: evicted 2 s after their node is lost
SETTLE_TIMEOUT_S = 300


def _shared_policy_statefulset(ws: Workspace) -> tuple[list[str], str, str]:
    """REPLICAS static PVs with one policy (two zones), pre-bound to the StatefulSet's
    claims, and the StatefulSet spread over both zones; (PV names, kept zone, dropped zone)."""
    zones = ws.zones()
    if len(zones) < 2:
        pytest.skip("one zone: the policy has no zone to drop")
    kept, dropped = zones[0], zones[1]
    sc = ws.no_provisioner_class(binding_mode="Immediate")
    policy = b.zone_affinity(kept, dropped)
    pvs = [b.persistent_volume(ws.name(f"shared-{i}"), "1Gi", sc, affinity=policy,
                               claim_ref=(ws.namespace, f"data-{STS}-{i}"), labels=ws.case_labels)
           for i in range(REPLICAS)]
    names = [o.name(pv) for pv in ws.create_all(pvs, parallel=8)]
    spread = [{"maxSkew": 1, "topologyKey": o.ZONE_KEY, "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app": STS}}}]
    ws.create(b.statefulset(STS, REPLICAS, sc, pod_spec_extra={
        "topologySpreadConstraints": spread, "tolerations": [b.unreachable_toleration(EVICT_AFTER_S)]}))
    x.statefulset_ready(ws, STS, REPLICAS, timeout=SETTLE_TIMEOUT_S)
    return names, kept, dropped


def _zones_of_nodes(ws: Workspace) -> dict[str, str]:
    return {o.name(n): str(o.zone(n)) for n in ws.nodes()}


def _replicas(state: State) -> list[Obj]:
    return [p for p in state.values() if (p.get("metadata") or {}).get("labels", {}).get("app") == STS]


def _settled(zone_of: dict[str, str], allowed: str, usable: set[str]) -> Callable[[State], dict[str, int] | None]:
    """Every replica Running on a usable node of the allowed zone: the placement then."""
    def done(state: State) -> dict[str, int] | None:
        pods = [p for p in _replicas(state) if not o.terminating(p)]
        placed = [str(o.node_name(p)) for p in pods if pod_running(p)]
        ok = len(pods) == REPLICAS and len(placed) == REPLICAS and \
            all(zone_of.get(n) == allowed and n in usable for n in placed)
        return dict(Counter(placed)) if ok else None
    return done


def _gone(uids: set[str], state: State) -> str | None:
    gone = uids - {o.uid(p) for p in _replicas(state) if not o.terminating(p)}
    return f"{len(gone)} of the misplaced replicas were stopped or replaced" if gone else None


def _tighten_all(ws: Workspace, pvs: list[str], zone: str) -> float:
    """The shared policy -> one zone, on every PV at once (8 parallel updates); returns when."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda pv: mut.allow_zones(ws.kube, pv, zone), pvs))
    measure.since(f"tighten {len(pvs)} PVs", started)
    return time.monotonic()


def _misplaced(ws: Workspace, zone_of: dict[str, str], allowed: str) -> list[Obj]:
    return [p for p in ws.list("Pod", label_selector=f"app={STS}") if zone_of.get(str(o.node_name(p))) != allowed]


def _failed_scheduling(ws: Workspace) -> int:
    """FailedScheduling events about the replicas so far (with their repeat counts): the
    difference across the settling is how often the scheduler found no place for one."""
    return sum(int(ev.get("count") or 1) for ev in ws.list("Event")
               if ev.get("reason") == "FailedScheduling"
               and str((ev.get("involvedObject") or {}).get("name") or "").startswith(f"{STS}-"))


def _record_settle(ws: Workspace, zone_of: dict[str, str], allowed: str, usable: set[str], started: float,
                   failures_before: int, what: str) -> dict[str, int]:
    placement: dict[str, int] = wait_for_state(
        ws.kube, "Pod", _settled(zone_of, allowed, usable),
        f"all {REPLICAS} replicas Running on usable nodes of {allowed}", ws.namespace, SETTLE_TIMEOUT_S)
    measure.since(f"shared policy settle {what} recovery", started)
    measure.note("placement after", ", ".join(f"{n}={c}" for n, c in sorted(placement.items())))
    measure.note("FailedScheduling events while settling", _failed_scheduling(ws) - failures_before)
    x.statefulset_ready(ws, STS, REPLICAS, timeout=60)
    return placement


@allure.story(f"{REPLICAS} PVs of one policy tightened at once; the misplaced pods restarted")
def test_shared_policy_tightened_then_misplaced_pods_restarted(ws: Workspace) -> None:
    pvs, kept, dropped = _shared_policy_statefulset(ws)
    zone_of = _zones_of_nodes(ws)
    _tighten_all(ws, pvs, kept)
    misplaced = _misplaced(ws, zone_of, kept)
    measure.note("pods outside the new policy", len(misplaced))
    x.expect(bool(misplaced), f"some replicas ran in {dropped} before the tightening (spread over both zones)")
    with allure.step(f"for 5 s nothing moves: a mutation evicts no pod (SPEC 1), {len(misplaced)} keep running in "
                     f"{dropped}"):
        uids = {o.uid(p) for p in misplaced}
        holds_for(ws.kube, "Pod", lambda st: _gone(uids, st), 5, "misplaced pods kept", ws.namespace)
    started, failures = time.monotonic(), _failed_scheduling(ws)
    ws.delete_all("Pod", [o.name(p) for p in misplaced], wait=False)
    placement = _record_settle(ws, zone_of, kept, set(zone_of), started, failures, "after restart")
    x.expect(sum(placement.values()) == REPLICAS and all(zone_of[n] == kept for n in placement),
             f"every replica runs in {kept}, where the tightened policy allows: {placement}")


@allure.story(f"{REPLICAS} PVs of one policy tightened at once while nodes fail")
def test_shared_policy_tightened_while_nodes_fail(ws: Workspace) -> None:
    pvs, kept, dropped = _shared_policy_statefulset(ws)
    zone_of = _zones_of_nodes(ws)
    kept_nodes = sorted(n for n, z in zone_of.items() if z == kept)
    if len(kept_nodes) < 2:
        pytest.skip(f"one node in {kept}: failing it leaves the policy nowhere to run")
    lost = [NodeName(n) for n, z in zone_of.items() if z == dropped] + [NodeName(kept_nodes[0])]
    _tighten_all(ws, pvs, kept)
    started, failures = time.monotonic(), _failed_scheduling(ws)
    outage = chaos_nodes.fail_nodes(ws, lost, f"zone {dropped} and {kept_nodes[0]}")
    usable = set(kept_nodes[1:])
    placement = _record_settle(ws, zone_of, kept, usable, started, failures, "under node failure")
    measure.note("nodes lost", ", ".join(lost))
    x.expect(set(placement) <= usable, f"every replica runs on {sorted(usable)}: {placement}")
    outage.restore()

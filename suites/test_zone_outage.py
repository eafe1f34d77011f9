"""Zone outages (SPEC 4). The node-lifecycle controller rates NoExecute tainting per
zone: a fully disrupted zone (others healthy) is tainted at the normal rate; a
partially disrupted zone of a small cluster (<= 50 nodes) is not tainted at all; and
when every zone is down it enters "master disruption mode", removes NoExecute taints
and evicts nothing (node_lifecycle_controller.go ComputeZoneState / handleDisruption).
Each cluster is sized so the asserted behaviour is the one that happens."""

from __future__ import annotations

import time
from collections.abc import Sequence

import allure
import pytest

from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.conformance import messages, timings
from pvchaos.conformance.topology_class import TopologyClass
from pvchaos.conformance.types import NodeName
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.node_health import wait_taint_gone
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.kinds import Obj, list_objects
from pvchaos.kube.objects import UNREACHABLE, gone_or_terminating, has_taint, name, node_name, terminating, uid, zone
from pvchaos.kube.objects import ready as node_ready_status
from pvchaos.kube.poll import poll_until
from pvchaos.kube.wait import holds_for, wait_for, wait_for_state, wait_gone

pytestmark = [allure.epic("Node loss and recovery"), allure.feature("Zone outage"), pytest.mark.disruptive,
              pytest.mark.needs("node-failure", "zones")]


# Every zone down: pods tolerate the unreachable taint this long, and the test watches past
# it (an eviction the disruption mode should have prevented shows within the margin).
ALL_DOWN_TOLERATION = 5
ALL_DOWN_HOLD = ALL_DOWN_TOLERATION + 6


def _pods_on_every_node(ws: Workspace, tolerate: int) -> dict[str, str]:
    """One pod per node tolerating the unreachable taint for `tolerate` s; pod -> node."""
    placed = {}
    for n in ws.nodes():
        pod = f"on-{name(n)}"
        ws.create(b.pod(pod, node_selector=ws.pin(n), tolerations=[b.unreachable_toleration(tolerate)]))
        placed[pod] = name(n)
    for pod in placed:
        x.pod_runs(ws, pod)
    return placed


def _tainted(state: dict[str, Obj], nodes: Sequence[str]) -> list[str]:
    return [n for n in nodes if has_taint(state.get(n), UNREACHABLE, "NoExecute")]


@allure.story("one zone down, others healthy: its nodes are tainted and its pods evicted; other zones untouched")
@pytest.mark.relies_on("scheduler", "node-lifecycle")  # no volumes
@pytest.mark.quick
def test_single_zone_outage_evicts_that_zone(ws: Workspace) -> None:
    placed = _pods_on_every_node(ws, tolerate=0)
    zone = ws.zones()[0]
    settings = x.lifecycle(ws)
    bound = timings.zone_tainted(len(ws.nodes(zone)), settings)
    t0 = time.monotonic()
    outage = chaos_nodes.zone_outage(ws, zone)
    down = outage.touched
    wait_for_state(ws.kube, "Node", lambda st: True if len(_tainted(st, down)) == len(down) else None,
                   f"every node of {zone} tainted {UNREACHABLE}:NoExecute", timeout=bound.seconds + 30,
                   timer="node-monitor-grace-period, node-eviction-rate")
    x.within(bound, measure.since("until the whole zone is tainted, seconds", t0))
    for pod, node in placed.items():
        if node in down:
            x.pod_evicted(ws, pod, 30, f"evicted from {node}")  # tolerationSeconds 0: no timer
    for pod, node in placed.items():
        if node not in down:
            other = ws.get("Pod", pod)
            x.expect(not terminating(other), f"{pod} in a healthy zone stays", other, ws=ws)
    t1 = time.monotonic()
    outage.restore()
    wait_for_state(ws.kube, "Node", lambda st: True if all(node_ready_status(st.get(n)) == "True" for n in down)
                   else None, f"nodes of {zone} Ready again", timeout=60)
    measure.since("recovery seconds", t1)


@allure.story("a replica on a volume of the down zone: evicted, its replacement Pending until the zone returns, then there")
@pytest.mark.needs("dynamic-zonal")
def test_replica_on_a_volume_of_the_down_zone_waits_for_it(ws: Workspace) -> None:
    """The driver's own volume (zonal, or pinned to a node of the zone): the outage evicts
    the replica (toleration 0), and the StatefulSet's replacement cannot go to a healthy
    zone, since its claim stays bound to the volume in the down one (volume node affinity
    conflict; the zone's own nodes carry the unreachable taint). When the zone returns the
    replacement runs there, on the same volume."""
    x.applies_to(ws, TopologyClass.ZONE, TopologyClass.NODE)
    x.dynamic_statefulset(ws, "db", 1, pod_spec_extra={"tolerations": [b.unreachable_toleration(0)]})
    first = ws.get("Pod", "db-0")
    home = zone(ws.get("Node", node_name(first) or ""))
    assert home is not None
    volume = x.claim_bound(ws, "data-db-0")["spec"]["volumeName"]
    down = [name(n) for n in ws.nodes(home)]
    bound = timings.zone_tainted(len(down), x.lifecycle(ws))
    outage = chaos_nodes.zone_outage(ws, home)
    # The zone is tainted a node at a time (its rate limiter), so a replacement may first
    # land on a sibling not tainted yet and be evicted again: seen on local, two placements.
    wait_for_state(ws.kube, "Node", lambda st: True if len(_tainted(st, down)) == len(down) else None,
                   f"every node of {home} tainted {UNREACHABLE}:NoExecute", timeout=bound.seconds + 30,
                   timer="node-monitor-grace-period, node-eviction-rate")
    wait_for(ws.kube, "Pod", "db-0", lambda p: uid(p) != uid(first) and not node_name(p) and not terminating(p),
             f"a replacement of db-0, not placed, once all of {home} is tainted", ws.namespace, 60)
    with allure.step(f"the replacement cannot run: its volume is in {home}, {home}'s nodes are tainted"):
        ev = x.failed_scheduling(ws, "db-0", "NODE_AFFINITY_CONFLICT", timeout=60)
        x.expect(messages.matches("UNTOLERATED_TAINT", ev.get("message", ""), ws.cluster.minor),
                 f"the down zone's nodes are excluded by their taint: {ev.get('message')}")
    still = x.claim_bound(ws, "data-db-0")
    x.expect(still["spec"]["volumeName"] == volume, f"the claim stays bound to {volume}, not a new volume elsewhere",
             still, ws=ws)
    placed = [e for e in ws.list("Event", field_selector="involvedObject.name=db-0") if e.get("reason") == "Scheduled"]
    measure.note("placements of db-0 before the outage was complete", len(placed) - 1)
    t0 = time.monotonic()
    outage.restore()
    # A returning node loses its NoSchedule taint before its NoExecute one, and a pod that
    # tolerates unreachable:NoExecute (here for 0 s) passes the scheduler's TaintToleration:
    # it is placed there and evicted again until the NoExecute taint goes (seen 4 times on
    # local). The replica's return is judged once the zone is clean.
    for n in down:
        wait_taint_gone(ws, n, UNREACHABLE, timeout=60)
    pod = x.pod_runs(ws, "db-0", timeout=180)
    measure.since("recovery seconds", t0)
    back = ws.get("Node", node_name(pod) or "")
    x.expect(zone(back) == home, f"the replacement runs in {home}, where its volume is", pod, back, ws=ws)


@allure.story("a generic ephemeral volume in the down zone: the pod's claim goes with it, its replacement gets a new "
              "claim in a healthy zone")
@pytest.mark.needs("dynamic-zonal")
def test_generic_ephemeral_volume_is_made_anew_outside_the_down_zone(ws: Workspace) -> None:
    """A Deployment's pod with a generic ephemeral volume (a WaitForFirstConsumer claim per
    pod, owned by it) in the zone that goes down: the zone's taint evicts the pod
    (toleration 0), the garbage collector deletes its claim with it, and the replacement,
    once the whole zone is tainted, is scheduled to a healthy zone and gets a claim of its
    own provisioned there. Unlike a StatefulSet's claim (the test above) nothing ties it to
    the down zone, so it must not wait for the zone."""
    sc = ws.storage_class("ephemeral")
    ws.create(b.ephemeral_deployment("web", sc, pod_spec_extra={"tolerations": [b.unreachable_toleration(0)]}))
    first = x.all_reach(ws, "Pod", 1, lambda p: p["status"].get("phase") == "Running", "Running", timeout=120)[0]
    old_claim = f"{name(first)}-data"
    x.claim_bound(ws, old_claim)
    home = zone(ws.get("Node", node_name(first) or ""))
    assert home is not None
    down = [name(n) for n in ws.nodes(home)]
    bound = timings.zone_tainted(len(down), x.lifecycle(ws))
    t0 = time.monotonic()
    outage = chaos_nodes.zone_outage(ws, home)
    wait_for_state(ws.kube, "Node", lambda st: True if len(_tainted(st, down)) == len(down) else None,
                   f"every node of {home} tainted {UNREACHABLE}:NoExecute", timeout=bound.seconds + 30,
                   timer="node-monitor-grace-period, node-eviction-rate")
    # As in the test above, a replacement may first land on a sibling not tainted yet (and
    # get a claim there, evicted in turn): the one judged runs outside the zone.
    pod = wait_for_state(ws.kube, "Pod", lambda st: next(
        (p for p in st.values() if uid(p) != uid(first) and p["status"].get("phase") == "Running"
         and node_name(p) not in down and not terminating(p)), None),
        f"a replacement of {name(first)} Running outside {home}", ws.namespace, timeout=120)
    measure.since("outage to replacement Running seconds", t0)
    new_claim = f"{name(pod)}-data"
    x.claim_bound(ws, new_claim)
    x.runs_where_its_volume_is(ws, name(pod), new_claim)
    where = zone(ws.get("Node", node_name(pod) or ""))
    x.expect(where != home, f"the replacement {name(pod)} runs in {where}, not the down {home}", pod, ws=ws)
    wait_gone(ws.kube, "PersistentVolumeClaim", old_claim, ws.namespace, 60)
    outage.restore()
    for n in down:
        wait_taint_gone(ws, n, UNREACHABLE, timeout=60)


@allure.story("every zone down: master disruption mode stops tainting and evicting (an in-flight taint is measured)")
@pytest.mark.relies_on("scheduler", "node-lifecycle")  # no volumes
def test_all_zones_down_evicts_nothing(ws: Workspace) -> None:
    """Upstream enters "master disruption mode": it removes NoExecute taints and stops the
    tainters. Measured here in 1.35: a taint already in flight (one per zone at most) can
    land just after that and is then never removed, so pods on that node are evicted on
    their toleration. The test asserts the rule for every other node and reports the race."""
    outside = [name(n) for n in ws.list("Node") if not zone(n)]
    if outside:
        pytest.skip(f"nodes {outside} are in no zone and stay up (kind's control plane): the node-lifecycle "
                    "controller counts them as a healthy zone, so every zone is never down")
    placed = _pods_on_every_node(ws, tolerate=ALL_DOWN_TOLERATION)
    nodes = sorted(set(placed.values()))
    zones = ws.zones()
    chaos_nodes.cluster_outage(ws)
    wait_for_state(ws.kube, "Node", lambda st: True if all(node_ready_status(st.get(n)) == "Unknown" for n in nodes)
                   else None, "every node Unknown", timeout=60, timer="node-monitor-grace-period")
    log = ws.cluster.directory / "logs" / "kube-controller-manager.log" if ws.cluster.directory else None
    if log is not None:
        poll_until(lambda: True if "Entering master disruption mode" in log.read_text(errors="replace") else None,
                   15, "kube-controller-manager enters master disruption mode")
    tainted_late: set[str] = set()

    def evicted_untainted(st: dict[str, Obj]) -> str | None:
        node_objs = {o["metadata"]["name"]: o for o in list_objects(ws.kube, "Node")[0]} if st else {}
        tainted_late.update(_tainted(node_objs, nodes))
        gone = [p for p, n in placed.items() if n not in tainted_late and gone_or_terminating(st.get(f"{ws.namespace}/{p}"))]
        return f"pods on untainted nodes evicted although every zone is down: {gone}" if gone else None

    with allure.step(f"for {ALL_DOWN_HOLD} s (past the {ALL_DOWN_TOLERATION} s tolerations) no pod on an "
                     "untainted node is evicted"):
        holds_for(ws.kube, "Pod", evicted_untainted, ALL_DOWN_HOLD, "no eviction while all zones are down",
                  ws.namespace, timer="tolerationSeconds")
    measure.note("nodes tainted after master disruption mode", ",".join(sorted(tainted_late)) or "none")
    print(f"all zones down: nodes NoExecute-tainted despite master disruption mode: {sorted(tainted_late) or 'none'}")
    x.expect(len(tainted_late) <= len(zones),
             f"at most one in-flight taint per zone may land after master disruption mode: {sorted(tainted_late)}")


@allure.story("three of four nodes of a zone down in a small cluster: tainting stops (partial disruption)")
@pytest.mark.cluster(zones=("zone-a", "zone-b"), nodes_per_zone=4)
@pytest.mark.relies_on("scheduler", "node-lifecycle")  # no volumes
def test_partial_zone_disruption_stops_tainting(ws: Workspace) -> None:
    zone = ws.zones()[0]
    down = [NodeName(name(n)) for n in ws.nodes(zone)[:3]]
    placed = _pods_on_every_node(ws, tolerate=0)
    settings = x.lifecycle(ws)
    chaos_nodes.fail_nodes(ws, down, f"3 of 4 nodes of {zone}")
    wait_for_state(ws.kube, "Node", lambda st: True if all(node_ready_status(st.get(n)) == "Unknown" for n in down)
                   else None, f"{down} Unknown", timeout=60, timer="node-monitor-grace-period")

    def too_many(st: dict[str, Obj]) -> str | None:
        tainted = _tainted(st, down)
        return f"{tainted} tainted NoExecute in a partially disrupted zone" if len(tainted) == len(down) else None

    window = timings.tainter_would_finish(len(down), settings)  # 25 s at upstream's 0.1 node/s
    with allure.step(f"for {window:g} s (time for {len(down) - 1}+ tokens at {settings.eviction_rate_per_second:g} "
                     "node/s) not every down node gets NoExecute"):
        holds_for(ws.kube, "Node", too_many, window, "partial disruption stops tainting",
                  timer="node-eviction-rate")
    survivors = [p for p, n in placed.items() if n in down and not terminating(ws.get("Pod", p))]
    x.expect(len(survivors) >= 2, f"most pods on the down nodes stay: {survivors}")

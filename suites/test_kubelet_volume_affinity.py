"""KEP-5381's kubelet half, on real kubelets (kind): a bound PV's nodeAffinity is tightened
so that it no longer allows the node a pod using it is bound to, (1) while the pod is
scheduled but not yet started, and (2) when the pod restarts on its node. The KEP wants
the kubelet to refuse such a pod (it fails with reason VolumeNodeAffinity and its
controller recreates it on an allowed node); that half is an open upstream pull request.

What each version does is data (conformance/kubelet_admission.py, checked against each
version's source), one of three outcomes:
- refuses: the test asserts the VolumeNodeAffinity failure and times the recreation on
  the allowed node;
- mount-blocked (1.35.4 to 1.38.0-beta.0): the volume manager's mount-time check fails
  ("MountVolume.NodeAffinity check failed"), the pod stays ContainerCreating, is not
  failed and not replaced: the test asserts that for 20 s, records a finding naming the
  version, then times the way out by hand (delete the pod; the StatefulSet recreates it
  where the PV allows);
- starts: the test asserts the pod runs on the node the PV no longer allows, a finding.

KWOK nodes start nothing, so this suite skips on the local backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import allure
import pytest

from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.chaos import pv_affinity as mut
from pvchaos.conformance import kubelet_admission
from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.node_health import wait_node_ready, wait_node_unreachable
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj
from pvchaos.kube.objects import HOSTNAME_KEY
from pvchaos.kube.wait import State, holds_for, pod_running, wait_for, wait_for_event

pytestmark = [allure.epic("Real kubelets"), allure.feature("KEP-5381's kubelet half: a volume's tightened affinity"),
              pytest.mark.disruptive, pytest.mark.needs("real-kubelet", "static-pv", "mutable-pv-affinity")]

STS = "db"
POD = f"{STS}-0"
CLAIM = f"data-{POD}"  # the StatefulSet's claim for replica 0, made beforehand and bound to our PV
# The pod waits out a stopped kubelet or a crashed node on its node instead of being evicted.
STAY = [{"key": k, "operator": "Exists"} for k in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]


def _hosts(*nodes: Obj) -> Obj:
    return {"required": b.node_selector_terms([(HOSTNAME_KEY, "In", [o.hostname(n) for n in nodes])])}


def _volume_for_two_nodes(ws: Workspace) -> tuple[str, Obj, Obj]:
    """A static PV that allows two nodes, bound to the StatefulSet's claim; (PV, first, second)."""
    workers = ws.nodes()
    if len(workers) < 2:
        pytest.skip("one worker node: the PV's affinity cannot be tightened to another node")
    first, second = workers[0], workers[1]
    return o.name(x.bound_pair(ws, _hosts(first, second), claim=CLAIM)), first, second


def _statefulset(ws: Workspace, prefer: Obj) -> Obj:
    """One replica that prefers `prefer` (so the scheduler's choice is known), tolerating an
    unreachable node so that only the kubelet decides what happens to it."""
    preferred = [{"weight": 100, "preference": {"matchExpressions": [
        {"key": HOSTNAME_KEY, "operator": "In", "values": [o.hostname(prefer)]}]}}]
    extra = {"tolerations": STAY, "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}}
    return ws.create(b.statefulset(STS, 1, "", pod_spec_extra=extra))  # class "": the claim made by bound_pair


def _tighten(ws: Workspace, pv: str, to: Obj, away_from: Obj) -> float:
    """PV `pv` now allows only `to`; returns the moment (monotonic) it was accepted."""
    updated = mut.replace_affinity(ws.kube, pv, _hosts(to))
    x.expect(not node_matches_pv_affinity(away_from, updated) and node_matches_pv_affinity(to, updated),
             f"PV {pv} now allows {o.name(to)} and not {o.name(away_from)}", updated, ws=ws)
    return time.monotonic()


def _running_since(pod: Obj | None) -> datetime | None:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    started = ((statuses[0].get("state") or {}).get("running") or {}).get("startedAt") if statuses else None
    return datetime.fromisoformat(started.replace("Z", "+00:00")) if started else None


def _refused(uid: str) -> Callable[[Obj], bool]:
    return lambda p: o.uid(p) == uid and (p.get("status") or {}).get("reason") == kubelet_admission.REASON


def _outcome(ws: Workspace, pv: str, uid: str, barred: Obj, allowed: Obj, tightened: float, when: str,
             started: Callable[[Obj], bool]) -> None:
    """Assert what this version's kubelet does (the table's row), and record it."""
    expected = kubelet_admission.admission(ws.cluster.minor)
    allure.dynamic.parameter("kubelet outcome (expected)", expected.outcome, excluded=True)
    refused, node = _refused(uid), o.name(barred)
    if expected.outcome == kubelet_admission.REFUSES:
        failed = wait_for(ws.kube, "Pod", POD, refused, f"failed with reason {kubelet_admission.REASON}",
                          ws.namespace, 180,
                          fail_if=lambda p: f"the kubelet of {node} started it {when}: no refusal" if p and
                          o.uid(p) == uid and started(p) else None)
        x.expect(o.node_name(failed) == node, f"the refusal is on {node}", failed, ws=ws)
        _recreated_on(ws, uid, allowed, "refused pod recreated on an allowed node recovery", tightened)
        return
    if expected.outcome == kubelet_admission.STARTS:
        pod = wait_for(ws.kube, "Pod", POD, lambda p: o.uid(p) == uid and started(p),
                       f"the kubelet of {node} starts it {when}", ws.namespace, 180,
                       fail_if=lambda p: f"the kubelet refused it ({kubelet_admission.REASON}), which the table says "
                       f"Kubernetes {ws.cluster.k8s_version} does not do" if p and refused(p) else None)
        x.expect(o.node_name(pod) == node, f"{POD} runs on {node}, where it was bound", pod, ws=ws)
        measure.since("pod started on the barred node", tightened)
    else:  # MOUNT_BLOCKED: neither refused nor started, and nothing recreates it
        pod = ws.get("Pod", POD) or {}
        ev = wait_for_event(ws.kube, pod, kubelet_admission.MOUNT_CHECK, reason="FailedMount", timeout=180)
        measure.since("mount refused on the barred node", tightened)
        measure.note("kubelet event", str(ev.get("message")))
        with allure.step(f"for 20 s {POD} stays on {node}, not started, not failed, not replaced"):
            holds_for(ws.kube, "Pod", lambda st: _moved_or_started(st, uid, started, refused), 20, f"{POD} wedged",
                      ws.namespace)
    line = kubelet_admission.finding(ws.cluster.k8s_version, expected.outcome, POD, node, pv, when)
    measure.note("finding", line)
    allure.attach(f"{line}\nevidence: {expected.evidence}\n", "finding", allure.attachment_type.TEXT)
    if expected.outcome == kubelet_admission.MOUNT_BLOCKED:
        with allure.step(f"the way out by hand: delete {POD}; the StatefulSet recreates it where the PV allows"):
            deleted = time.monotonic()
            ws.delete("Pod", POD, wait=False)
            _recreated_on(ws, uid, allowed, "wedged pod deleted by hand, recreated on an allowed node recovery",
                          deleted)


def _moved_or_started(state: State, uid: str, started: Callable[[Obj], bool], refused: Callable[[Obj], bool]) -> str | None:
    pod = next((p for p in state.values() if o.name(p) == POD), None)
    if pod is None or o.uid(pod) != uid:
        return f"{POD} was replaced or deleted"
    if started(pod) or refused(pod):
        return f"{POD} {'started' if started(pod) else 'was refused'}, which the table says this version does not do"
    return None


def _recreated_on(ws: Workspace, uid: str, allowed: Obj, measurement: str, since: float) -> None:
    again = wait_for(ws.kube, "Pod", POD, lambda p: o.uid(p) != uid and pod_running(p),
                     f"recreated and Running on {o.name(allowed)}", ws.namespace, 180)
    x.expect(o.node_name(again) == o.name(allowed),
             f"the StatefulSet recreated {POD} on {o.name(allowed)}, which the PV allows", again, ws=ws)
    measure.since(measurement, since)


@allure.story("tightened while the pod is scheduled but its kubelet has not started it")
@pytest.mark.quick
def test_affinity_tightened_before_the_kubelet_starts_the_pod(ws: Workspace) -> None:
    pv, first, second = _volume_for_two_nodes(ws)
    kubelet = chaos_nodes.stop_kubelet(ws, o.name(first))
    _statefulset(ws, prefer=first)
    pod = x.pod_scheduled(ws, POD, timeout=60)
    x.expect(o.node_name(pod) == o.name(first), f"the scheduler bound {POD} to {o.name(first)} (preferred, "
             "allowed by the PV)", pod, ws=ws)
    x.expect(not _running_since(pod), f"{POD} has not started: the kubelet of {o.name(first)} is stopped", pod, ws=ws)
    tightened = _tighten(ws, pv, to=second, away_from=first)
    kubelet.restore()
    _outcome(ws, pv, o.uid(pod), first, second, tightened, "when its kubelet started after the tightening",
             lambda p: _running_since(p) is not None)


@allure.story("tightened while the pod runs; its node restarts and the pod with it")
def test_affinity_tightened_then_the_pod_restarts_on_its_node(ws: Workspace) -> None:
    pv, first, second = _volume_for_two_nodes(ws)
    _statefulset(ws, prefer=first)
    pod = x.pod_runs(ws, POD, timeout=120)
    x.expect(o.node_name(pod) == o.name(first), f"{POD} runs on {o.name(first)} (preferred)", pod, ws=ws)
    tightened = _tighten(ws, pv, to=second, away_from=first)
    crashed_at = datetime.now(UTC).replace(microsecond=0)
    crashed = chaos_nodes.crash_node(ws, o.name(first))
    wait_node_unreachable(ws, o.name(first))
    crashed.restore()
    wait_node_ready(ws, o.name(first), timeout=120)
    _outcome(ws, pv, o.uid(pod), first, second, tightened, "again after its node restarted",
             lambda p: (_running_since(p) or crashed_at) > crashed_at)

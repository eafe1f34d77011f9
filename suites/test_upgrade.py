"""A live control-plane upgrade under storage load (`pvchaos upgrade`, docs/upgrade.md).

A local cluster at --upgrade-from holds storage in every state: Bound static, dynamic
and local PVs with their pods Running, WaitForFirstConsumer claims waiting for a pod, a
Released Retain PV, a pod Pending on an impossible affinity, and a Bound PV whose
nodeAffinity was mutated (MutablePVNodeAffinity is on in both versions). It is then
upgraded in place in the version-skew policy's order while new pods with claims keep
arriving, and must come out with nothing moved: no PV changed phase or claimRef, no
claim lost or bound twice, no Running pod evicted, the invariants held throughout, and
what waited for a restarting controller bound and scheduled once it returned. Each
component's unavailable window is measured and reported.

Marked `upgrade`: deselected unless --upgrade-to is given, so `pvchaos run` skips it.
"""

from __future__ import annotations

import os
import sys
import time

import allure
import pytest

from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.local.upgrade import Window, upgradable, upgrade
from pvchaos.clusters.local.upgrade_plan import plan_upgrade
from pvchaos.conformance import stability
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.background import Arrivals, Watch
from pvchaos.kit.canaries import CANARIES, run_canaries
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds, snapshot
from pvchaos.kube import objects as o
from pvchaos.kube.errors import ConditionNotReached, ExpectationFailed
from pvchaos.kube.objects import ZONE_KEY
from pvchaos.kube.wait import pod_running
from pvchaos.plugin import upgrade_options
from pvchaos.tools.build import ensure_binaries

pytestmark = [allure.epic("Control plane"), allure.feature("Live upgrade"), pytest.mark.upgrade,
              pytest.mark.disruptive,
              pytest.mark.needs("component-restart", "static-pv", "dynamic-zonal", "zones", "mutable-pv-affinity")]

WAITING = ("waiting-0", "waiting-1", "waiting-2")
# Which waiting claim gets its pod just before which component goes away: its binding
# needs that component back (the controller-manager binds, the scheduler places).
CONSUMER_BEFORE = {"kube-controller-manager": ("waiting-0", "waiting-1"), "kube-scheduler": ("waiting-2",)}
SETTLE_TIMEOUT = 90.0  # ~40 claims arrive during an upgrade; the provisioner and the binder catch up


def _say(config: pytest.Config, line: str) -> None:
    """A line on the terminal even while pytest captures output (the windows, as they happen)."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None:
        print(f"[pvchaos upgrade] {line}", file=sys.stderr, flush=True)
        return
    with capman.global_and_fixture_disabled():
        print(f"[pvchaos upgrade] {line}", file=sys.stderr, flush=True)


@allure.step("load storage in every state")
def load(ws: Workspace) -> dict[str, str]:
    """Create every state; returns names a later check needs."""
    zones = ws.zones()
    here, there = zones[0], zones[1]
    pinned = {ZONE_KEY: here}
    static_pv = x.bound_pair(ws, b.zone_affinity(here), claim="static")
    ws.create(b.pod("static-app", ("static",), node_selector=pinned))

    immediate = ws.storage_class("zonal-now", "Immediate", allowed_zones=[here])
    ws.create(b.persistent_volume_claim("dynamic", "1Gi", immediate))
    x.claim_bound(ws, "dynamic")
    ws.create(b.pod("dynamic-app", ("dynamic",)))

    local = x.local_class_with_pv_per_node(ws)
    for i in range(2):
        ws.create(b.persistent_volume_claim(f"local-{i}", "1Gi", local))
        ws.create(b.pod(f"local-app-{i}", (f"local-{i}",)))

    released = ws.create(b.persistent_volume(ws.name("retained"), "1Gi", labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("released", "1Gi", "", volume_name=o.name(released)))
    x.claim_bound(ws, "released")
    ws.delete("PersistentVolumeClaim", "released")
    x.volume_phase(ws, o.name(released), "Released")

    mutated = x.bound_pair(ws, b.zone_affinity(here), claim="mutated")
    ws.create(b.pod("mutated-app", ("mutated",), node_selector=pinned))
    ws.patch("PersistentVolume", o.name(mutated), {"spec": {"nodeAffinity": b.zone_affinity(here, there)}})

    waiting = ws.storage_class("zonal-wffc", "WaitForFirstConsumer")
    for claim in WAITING:
        ws.create(b.persistent_volume_claim(claim, "1Gi", waiting))
    ws.create(b.pod("impossible", (), node_selector={ZONE_KEY: "no-such-zone"}))

    running = ["static-app", "dynamic-app", "local-app-0", "local-app-1", "mutated-app"]
    x.all_reach(ws, "Pod", len(running), pod_running, "Running", timeout=90, names=running)
    x.pod_unschedulable(ws, "impossible")
    for claim in WAITING:
        x.phase_now(ws, "PersistentVolumeClaim", claim, "Pending")
    x.phase_now(ws, "PersistentVolume", o.name(released), "Released")
    return {"static-pv": o.name(static_pv), "mutated-pv": o.name(mutated), "released-pv": o.name(released),
            "waiting-class": waiting}


def _diagnosis(ws: Workspace) -> str:
    """The canaries' verdict on the upgraded cluster: "" when binder, scheduler,
    volume binding, provisioner and node leases all work, else what is broken, named."""
    verdicts = run_canaries(ws.kube, ws.cluster, ws.driver, CANARIES)
    failed = [f"{r.name}: {r.diagnosis}" for r in verdicts.values() if not r.ok]
    return ("canaries failed: " + "; ".join(failed)) if failed else ""


def _windows_text(windows: list[Window], load_avg: tuple[float, float, float]) -> str:
    lines = [str(w) for w in windows]
    return "\n".join([*lines, f"load average during the upgrade: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}"])


@allure.story("in-place upgrade, in the version-skew policy's order, under storage load")
@pytest.mark.needs("in-place-upgrade")
def test_live_upgrade(ws: Workspace, request: pytest.FixtureRequest) -> None:
    start, to = upgrade_options.versions(request.config)
    local = upgradable(ws.cluster)  # the test needs("in-place-upgrade"): it skips elsewhere
    x.expect(local.cfg.k8s_version == start, f"the cluster starts at {start}, not {local.cfg.k8s_version}")
    plan = plan_upgrade(local.cfg, to, force_skew=request.config.getoption("upgrade_force_skew"))
    plan = request.config.hook.pytest_pvchaos_upgrade_plan(config=request.config, plan=plan) or plan
    allure.dynamic.parameter("upgrade", f"{start} -> {to}")
    measure.note("upgrade plan", plan.describe())
    binaries = ensure_binaries(to)

    names = load(ws)
    base = stability.baseline(snapshot.take(ws.kube), ws.namespace)
    measure.note("baseline", base.describe())
    watch = Watch(ws.cluster.kubeconfig, base, ws.exempt_pods)
    ws.cleanup.push("stop the stability watch", watch.stop)
    arrivals = Arrivals(ws.cluster.kubeconfig, ws.namespace, names["waiting-class"], ws.labels, every=0.3)
    ws.cleanup.push("stop the arriving pods", arrivals.stop)
    watch.start()
    arrivals.start()

    def before(step: str) -> None:
        for claim in CONSUMER_BEFORE.get(step, ()):
            ws.create(b.pod(f"{claim}-app", (claim,)))

    def done(step: str, window: Window) -> None:
        _say(request.config, f"{plan.from_version} -> {plan.to_version}: {window}")
        measure.seconds(f"{step} {'unavailable' if window.unavailable else 'upgrade'}", window.seconds, 2)

    _say(request.config, plan.describe())
    try:
        with allure.step(f"upgrade {start} -> {to} in place"):
            windows = upgrade(local, plan, binaries, step_starting=before, step_done=done)
    except ClusterError as exc:
        raise AssertionError(f"the upgrade {start} -> {to} broke: {exc}") from None
    finally:
        created = arrivals.stop()
    load_avg = os.getloadavg()
    allure.attach(_windows_text(windows, load_avg), name="unavailable windows", attachment_type=allure.attachment_type.TEXT)
    _say(request.config, f"load average {load_avg[0]:.2f}; {len(created)} pods arrived during the upgrade "
         f"({arrivals.refused} creations refused while the API server restarted)")
    measure.note("pods arriving during the upgrade", len(created))

    waiting = [*WAITING, *created]
    consumers = [f"{c}-app" for c in WAITING] + created
    upgraded = time.monotonic()
    try:
        x.all_reach(ws, "PersistentVolumeClaim", len(waiting), lambda c: o.phase(c) == "Bound", "Bound",
                    timeout=SETTLE_TIMEOUT, names=waiting)
        x.all_reach(ws, "Pod", len(consumers), pod_running, "Running", timeout=SETTLE_TIMEOUT, names=consumers)
    except ConditionNotReached as exc:
        raise ExpectationFailed(f"after the upgrade {start} -> {to}, what waited did not bind and run; "
                                f"{_diagnosis(ws)}\n{exc}") from None
    measure.since("all waiting claims Bound and pods Running after the upgrade", upgraded)
    with allure.step("the upgraded control plane works (canaries)"):
        diagnosis = _diagnosis(ws)
        x.expect(not diagnosis, f"after the upgrade {start} -> {to}, {diagnosis}")
    problems = watch.check_now(ws.kube)
    seen = watch.stop()
    measure.note("stability snapshots", f"{watch.snapshots} ({watch.unreachable} while the API server was away)")
    blips = ", ".join(f"{n} at {t:.1f}s" for n, t in sorted(watch.nodes_not_ready.items())) or "none"
    measure.note("nodes seen not Ready or tainted during the upgrade", blips)
    _say(request.config, f"nodes seen not Ready or tainted: {blips}")
    x.expect(not seen, f"during or after the upgrade {start} -> {to}: " +
             "; ".join(f"{p} (at {t:.1f}s)" for p, t in seen.items()))
    x.expect(not problems, "after the upgrade: " + "; ".join(problems))

    with allure.step("versions after the upgrade"):
        nodes = ws.nodes()
        stale = [f"{o.name(n)}={n['status']['nodeInfo']['kubeletVersion']}" for n in nodes
                 if n["status"]["nodeInfo"]["kubeletVersion"] != to]
        x.expect(not stale, f"every node reports kubelet {to}: {stale}")
        served = ws.kube.version.get_code().git_version
        x.expect(served == to, f"kube-apiserver serves {served}, not {to}")

    impossible = ws.get("Pod", "impossible")
    x.expect(not o.node_name(impossible) and o.unschedulable(impossible),
             "the pod with an impossible affinity is still Pending and Unschedulable", impossible, ws=ws)
    x.phase_now(ws, "PersistentVolume", names["released-pv"], "Released")
    mutated = ws.get("PersistentVolume", names["mutated-pv"]) or {}
    x.expect(len(o.pv_zones(mutated)) == 2, f"PV {names['mutated-pv']} keeps its mutated two-zone affinity",
             mutated, ws=ws)
    with allure.step("MutablePVNodeAffinity still on: the new API server accepts another mutation"):
        ws.patch("PersistentVolume", names["mutated-pv"], {"spec": {"nodeAffinity": b.zone_affinity(*ws.zones())}})
    volumes = [c["spec"]["volumeName"] for c in kinds.list_objects(ws.kube, "PersistentVolumeClaim", ws.namespace)[0]
               if o.phase(c) == "Bound"]
    x.expect(len(volumes) == len(set(volumes)), f"no PV is bound to two claims: {sorted(volumes)}")
    measure.seconds("upgrade total", sum(w.seconds for w in windows), 2)

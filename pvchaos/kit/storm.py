"""Run a PVC storm on a cluster and measure it (the side effects of storm_plan's shape).

One storm, in one workspace:
1. set-up, not timed: the classes and the static local PVs, awaited Available;
2. the baseline: as many pods without volumes, timed from the first create to all Running;
3. the storm: every claim, pod and StatefulSet created by a bounded thread pool while
   two watches (claims, pods) record when each turned Bound or Running;
   with `chaos`, the storm is cut in two: after the first half, one zone's nodes stop
   and the scheduler is stopped; the second half is created while it is down, then it
   starts again;
4. one snapshot judged by conformance.storm (no PV claimed twice, pods where their
   PVs allow, every claim Bound, every pod that can run Running, and after an outage
   nothing undecided landing in the lost zone).
Measured alongside: the apiserver's request latency (its /metrics histogram, before and
after the storm), the peak resident memory of the cluster's processes, the load average.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvchaos.chaos import components as chaos_components
from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.clusters.local.memory import cluster_rss_mib
from pvchaos.conformance import storm as judge
from pvchaos.conformance import timings
from pvchaos.kit.storm_plan import ROLE_LABEL, NodeRef, StormObjects, StormShape, build
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import kinds, snapshot
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.errors import ConditionNotReached
from pvchaos.kube.metrics import apiserver_metrics
from pvchaos.kube.wait import State, wait_for_state

THREADS = 16  # bulk creation: enough to keep the apiserver busy, few enough for 2 cores
MUTATING = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
READING = ("GET", "LIST")
QUANTILES = (0.5, 0.9, 0.99)
SCHEDULER = "kube-scheduler"
WRITES_SHOWN = 8


@dataclass
class StormResult:
    """What one storm measured, and what was wrong at its end."""

    shape: str
    nodes: int
    zones: int
    pods: int
    claims: int
    storm_seconds: float = 0.0  # first create -> every claim Bound and every pod Running
    create_seconds: float = 0.0  # first create -> last create answered
    bare_seconds: float | None = None  # the same number of pods without volumes
    bind_rate: float = 0.0  # claims Bound per second over the storm
    bound_by_kind: dict[str, float] = field(default_factory=dict)  # kind -> seconds until its last claim was Bound
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)  # class -> p50/p90/p99 seconds
    requests: dict[str, float] = field(default_factory=dict)  # class -> requests during the storm
    writes: dict[str, float] = field(default_factory=dict)  # resource[/subresource] -> mutating requests
    peak_mib: float = 0.0
    peak_by_component: dict[str, float] = field(default_factory=dict)
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    settings: dict[str, str] = field(default_factory=dict)
    chaos: dict[str, str] = field(default_factory=dict)
    undecided_pods: int = 0  # with chaos: pods without a node when the zone's nodes were tainted
    completed: bool = True  # False: the waits timed out (the violations say why)
    violations: list[str] = field(default_factory=list)

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.storm_seconds if self.storm_seconds else 0.0

    @property
    def bare_pods_per_second(self) -> float | None:
        return self.pods / self.bare_seconds if self.bare_seconds else None

    @property
    def ratio(self) -> float | None:
        """Pods per second with volumes over pods per second without (1.0: volumes cost nothing)."""
        bare = self.bare_pods_per_second
        return self.pods_per_second / bare if bare else None

    def lines(self) -> list[str]:
        """The result as the bench prints it and the report attaches it."""
        done = (f"all {self.claims} claims Bound and {self.pods} pods Running in {self.storm_seconds:.1f}s "
                f"({self.pods_per_second:.1f} pods/s" if self.completed else
                f"NOT all {self.claims} claims Bound and {self.pods} pods Running after {self.storm_seconds:.1f}s "
                f"(see the violations")
        out = [f"storm: {self.shape}", f"{done}; objects submitted in {self.create_seconds:.1f}s)"]
        if self.bare_seconds is not None:
            out.append(f"without volumes: {self.pods} pods Running in {self.bare_seconds:.1f}s "
                       f"({self.bare_pods_per_second:.1f} pods/s); with/without ratio {self.ratio:.2f}")
        out.append(f"PV binding rate: {self.bind_rate:.1f} claims Bound/s; last claim Bound after, per kind: "
                   + ", ".join(f"{k} {v:.1f}s" for k, v in self.bound_by_kind.items()))
        for cls, qs in self.latency.items():
            text = ", ".join(f"{k} {v * 1000:.0f} ms" if v is not None else f"{k} -" for k, v in qs.items())
            out.append(f"apiserver {cls} latency ({self.requests.get(cls, 0):.0f} requests): {text}")
        if self.writes:
            top = sorted(self.writes.items(), key=lambda kv: -kv[1])[:WRITES_SHOWN]
            out.append("apiserver writes by resource: " + ", ".join(f"{k} {v:.0f}" for k, v in top))
        parts = ", ".join(f"{k} {v:.0f}" for k, v in sorted(self.peak_by_component.items(), key=lambda kv: -kv[1]))
        out.append(f"peak memory of the cluster's processes: {self.peak_mib:.0f} MiB ({parts})")
        out.append(f"load average: {self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f} on {os.cpu_count()} cores")
        out.append("settings: " + ", ".join(f"{k}={v}" for k, v in self.settings.items()))
        out += [f"chaos: {k}: {v}" for k, v in self.chaos.items()]
        out += [f"VIOLATION {v}" for v in self.violations]
        return out


# ---- side effects -----------------------------------------------------------------------

def create_many(kube: Kube, objs: Iterable[kinds.Obj], namespace: str | None, threads: int = THREADS) -> float:
    """Create every object with a bounded thread pool; seconds taken. The first error is
    raised once all have been tried, with how many failed."""
    todo = list(objs)
    started = time.monotonic()
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for fut in [pool.submit(kinds.create, kube, obj, namespace if kinds.kind(obj["kind"]).namespaced else None)
                    for obj in todo]:
            if (exc := fut.exception()) is not None:
                errors.append(exc)
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(todo)} creations failed; first: {errors[0]}") from errors[0]
    return time.monotonic() - started


class MemorySampler:
    """The cluster's resident memory every `interval` s in a thread; keeps the peak total."""

    def __init__(self, directory: Path | None, interval: float = 0.5):
        self.directory = directory
        self.interval = interval
        self.peak = 0.0
        self.at_peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="storm-memory", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        if self.directory is None:
            return
        try:
            now = cluster_rss_mib(self.directory)
        except (OSError, ValueError):
            return
        total = sum(now.values())
        if total > self.peak:
            self.peak, self.at_peak = total, now

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


class Tracker:
    """A watch-based wait that also records when each object first reached its goal."""

    def __init__(self, kube: Kube, kind_name: str, namespace: str, expected: int, goal: Callable[[kinds.Obj], bool],
                 what: str, role: str | None = None):
        self.kube, self.kind_name, self.namespace = kube, kind_name, namespace
        self.expected, self.goal, self.what = expected, goal, what
        self.selectors: dict[str, Any] = {"label_selector": f"{ROLE_LABEL}={role}"} if role else {}
        self.reached: dict[str, float] = {}
        self.good: set[str] = set()
        self.error: str | None = None

    def _seen(self, key: str, obj: kinds.Obj | None) -> None:
        """Counts kept per change: rescanning 2,000 objects at each of 20,000 events cost
        the harness a third of a core in a 1,000-node storm."""
        if obj is not None and self.goal(obj):
            self.good.add(key)
            self.reached.setdefault(key, time.monotonic())
        else:
            self.good.discard(key)

    def _until(self, state: State) -> bool | None:
        return True if len(state) >= self.expected and len(self.good & state.keys()) >= len(state) else None

    def run(self, timeout: float) -> bool:
        """True when all `expected` objects reached the goal in time; False (and `error`) if not."""
        try:
            wait_for_state(self.kube, self.kind_name, self._until, f"all {self.expected} {self.what}",
                           self.namespace, timeout, seen=self._seen, **self.selectors)
            return True
        except ConditionNotReached as exc:
            self.error = str(exc).splitlines()[0]
            return False

    def last(self) -> float:
        return max(self.reached.values(), default=0.0)


def _nodes(ws: Workspace) -> list[NodeRef]:
    return [NodeRef(o.name(n), o.hostname(n), o.zone(n) or "") for n in ws.nodes()]


def _writes(before: str, after: str) -> dict[str, float]:
    d = judge.delta(judge.requests_by_resource(after, MUTATING), judge.requests_by_resource(before, MUTATING))
    return {k: v for k, v in d.items() if v > 0}


def _latency(before: str, after: str) -> tuple[dict[str, dict[str, float | None]], dict[str, float]]:
    out: dict[str, dict[str, float | None]] = {}
    counts: dict[str, float] = {}
    for cls, verbs in (("mutating", MUTATING), ("read", READING)):
        d = judge.delta(judge.histogram(after, verbs=verbs), judge.histogram(before, verbs=verbs))
        out[cls] = {f"p{int(q * 100)}": judge.quantile(q, d) for q in QUANTILES}
        counts[cls] = max(d.values(), default=0.0)
    return out, counts


def _setup(ws: Workspace, kube: Kube, shape: StormShape) -> StormObjects:
    """Classes and static local PVs, awaited Available (not timed)."""
    zones = ws.zones()
    wffc = ws.driver.storage_class(ws.name("storm-wffc"), "WaitForFirstConsumer")
    immediate = {z: ws.driver.storage_class(ws.name(f"storm-imm-{z}"), "Immediate", allowed_zones=[z]) for z in zones}
    local = ws.name("storm-local")
    objs = build(shape, _nodes(ws), wffc, immediate, local, dict(ws.labels))
    for sc in objs.classes:
        ws.create(sc)
    ws.cleanup.push("delete the storm's static PVs", lambda: _delete_volumes(kube, local))
    create_many(kube, objs.local_volumes, None)
    want = len(objs.local_volumes)

    def available(state: State) -> bool | None:
        ok = sum(1 for pv in state.values() if o.phase(pv) == "Available")
        return True if ok >= want else None

    try:
        wait_for_state(kube, "PersistentVolume", available, f"{want} static local PVs Available",
                       timeout=max(60.0, want / 20), label_selector=f"{ROLE_LABEL}=volumes")
    except ConditionNotReached as exc:
        raise ConditionNotReached(f"the storm's {want} static local PVs never all turned Available (the PV "
                                  f"controller of kube-controller-manager does that): {exc}") from None
    return objs


def _delete_volumes(kube: Kube, local_class: str) -> None:
    pvs, _ = kinds.list_objects(kube, "PersistentVolume")
    mine = [o.name(pv) for pv in pvs if (pv.get("spec") or {}).get("storageClassName") == local_class]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        list(pool.map(lambda n: kinds.delete(kube, "PersistentVolume", n), mine))


def run_storm(ws: Workspace, shape: StormShape, chaos: bool = False, timeout: float = 300.0,
              baseline: bool = True, observe: Callable[[], AbstractContextManager[object]] = nullcontext) -> StormResult:
    """One storm in `ws`'s namespace; see the module's docstring. Never raises for what the
    cluster got wrong: that is in `violations` (the caller asserts). `observe` wraps the
    storm itself, from the first create to the last wait (e.g. CPU profiles)."""
    kube = connect(ws.cluster.kubeconfig, ws.cluster.context, pool_size=THREADS + 4)
    try:
        return _run(ws, kube, shape, chaos, timeout, baseline, observe)
    finally:
        kube.api.close()


def _run(ws: Workspace, kube: Kube, shape: StormShape, chaos: bool, timeout: float, baseline: bool,
         observe: Callable[[], AbstractContextManager[object]]) -> StormResult:
    ns = ws.namespace
    with MemorySampler(ws.cluster.directory) as memory:
        objs = _setup(ws, kube, shape)
        result = StormResult(shape=shape.describe(), nodes=len(ws.nodes()), zones=len(ws.zones()),
                             pods=objs.expected_pods, claims=objs.expected_claims, settings=_settings(ws))
        if baseline and not chaos:
            bare = Tracker(kube, "Pod", ns, len(objs.baseline_pods), lambda p: o.phase(p) == "Running",
                           "pods without volumes Running", role="bare")
            with ThreadPoolExecutor(max_workers=1) as waiter:
                fut = waiter.submit(bare.run, timeout)
                t0 = time.monotonic()
                create_many(kube, objs.baseline_pods, ns)
                fut.result()
            result.bare_seconds = (bare.last() or time.monotonic()) - t0
        before = apiserver_metrics(kube)
        down: list[str] = []
        kind_of: dict[str, str] = dict(objs.kind_of_pod)
        down_zone = ws.zones()[-1] if chaos else ""
        down_nodes = {o.name(n) for n in ws.nodes(down_zone)} if chaos else set()

        def pod_done(pod: kinds.Obj) -> bool:
            if o.phase(pod) == "Running":
                return True
            node = o.node_name(pod)
            if node:
                return node in down_nodes
            return bool(down_zone) and kind_of.get(o.name(pod)) == f"immediate:{down_zone}"

        claims = Tracker(kube, "PersistentVolumeClaim", ns, objs.expected_claims, lambda c: o.phase(c) == "Bound",
                         "claims Bound")
        pods = Tracker(kube, "Pod", ns, objs.expected_pods, pod_done, "pods Running", role="volumes")
        with observe(), ThreadPoolExecutor(max_workers=2) as waiters:
            t0 = time.monotonic()
            futures: list[Future[bool]] = [waiters.submit(claims.run, timeout), waiters.submit(pods.run, timeout)]
            if not chaos:
                _create_batch(kube, ns, objs.claims, objs.pods, objs.statefulsets)
                result.create_seconds = time.monotonic() - t0
                undecided: tuple[set[str], set[str]] = (set(), set())
            else:
                (c1, p1, s1), (c2, p2, s2) = objs.batches(2)
                _create_batch(kube, ns, c1, p1, s1)
                down, undecided = _outage(ws, kube, down_zone, result)
                with_scheduler_down(ws, result, lambda: _create_batch(kube, ns, c2, p2, s2))
                later_pods, later_claims = _names(c2, p2, s2)  # created after the outage: undecided too
                undecided = _wait_for_first_consumer(objs, ns, undecided[0] | {f"{ns}/{n}" for n in later_pods},
                                                     undecided[1] | {f"{ns}/{n}" for n in later_claims})
                result.create_seconds = time.monotonic() - t0
            done = [f.result() for f in futures]
        end = max(claims.last(), pods.last()) if all(done) else time.monotonic()
        result.storm_seconds = end - t0
        result.completed = all(done)
        result.bind_rate = len(claims.reached) / (claims.last() - t0) if claims.reached and claims.last() > t0 else 0.0
        result.bound_by_kind = _bound_by_kind(objs, ns, claims.reached, t0)
        after = apiserver_metrics(kube)
        result.latency, result.requests = _latency(before, after)
        result.writes = _writes(before, after)
    result.peak_mib, result.peak_by_component = memory.peak, memory.at_peak
    result.load = os.getloadavg()
    snap = snapshot.take(kube)
    result.violations = judge.storm_violations(snap, ns, down)
    if chaos:
        landed = judge.landed_outside(snap, down_zone, *undecided)
        result.violations += [f"[landed-in-lost-zone] {line}" for line in landed]
        result.undecided_pods = len(undecided[0])
        result.chaos["undecided at the outage"] = f"{len(undecided[0])} pods, {len(undecided[1])} claims"
    for t in (claims, pods):
        if t.error:
            result.violations.append(f"[timeout] {t.error}")
    return result


def _create_batch(kube: Kube, ns: str, claims: list[kinds.Obj], pods: list[kinds.Obj],
                  sets: list[kinds.Obj]) -> None:
    """Claims first, then pods and StatefulSets: one pool, so they overlap as in a real storm."""
    create_many(kube, [*claims, *pods, *sets], ns)


def _bound_by_kind(objs: StormObjects, ns: str, reached: dict[str, float], t0: float) -> dict[str, float]:
    """Seconds from the storm's start until the last claim of each kind was Bound: which
    path (provisioning, static matching, StatefulSet) paces the storm."""
    kind_of_claim = {f"{ns}/{v['persistentVolumeClaim']['claimName']}": objs.kind_of_pod[o.name(p)].split(":")[0]
                     for p in objs.pods for v in p["spec"].get("volumes") or [] if "persistentVolumeClaim" in v}
    last: dict[str, float] = {}
    for key, at in reached.items():
        kind = kind_of_claim.get(key, "sts")
        last[kind] = max(last.get(kind, 0.0), at - t0)
    return dict(sorted(last.items()))


def _wait_for_first_consumer(objs: StormObjects, ns: str, pods: set[str], claims: set[str]) -> tuple[set[str], set[str]]:
    """Only WaitForFirstConsumer pods and claims follow the scheduler's choice: an Immediate
    claim of a class allowed only in the lost zone is rightly provisioned there."""
    immediate = [p for p in objs.pods if objs.kind_of_pod.get(o.name(p), "").startswith("immediate")]
    skip_pods = {f"{ns}/{o.name(p)}" for p in immediate}
    skip_claims = {f"{ns}/{v['persistentVolumeClaim']['claimName']}" for p in immediate
                   for v in p["spec"].get("volumes") or [] if "persistentVolumeClaim" in v}
    return pods - skip_pods, claims - skip_claims


def _names(claims: list[kinds.Obj], pods: list[kinds.Obj], sets: list[kinds.Obj]) -> tuple[set[str], set[str]]:
    """Names of the pods and claims these objects make, StatefulSets' included."""
    pod_names = {o.name(p) for p in pods}
    claim_names = {o.name(c) for c in claims}
    for sts in sets:
        for i in range(int(sts["spec"]["replicas"])):
            pod_names.add(f"{o.name(sts)}-{i}")
            claim_names |= {f"{t['metadata']['name']}-{o.name(sts)}-{i}" for t in sts["spec"]["volumeClaimTemplates"]}
    return pod_names, claim_names


def _outage(ws: Workspace, kube: Kube, zone: str, result: StormResult) -> tuple[list[str], tuple[set[str], set[str]]]:
    """Stop every node of `zone`, wait until they are tainted so the scheduler avoids
    them, and return them with what was still undecided at that moment."""
    t = time.monotonic()
    down = list(chaos_nodes.zone_outage(ws, zone).touched)

    def tainted(state: State) -> bool | None:
        return True if all(o.has_taint(state.get(n), o.UNREACHABLE) or o.has_taint(state.get(n), o.NOT_READY)
                           for n in down) else None

    grace = timings.lifecycle_settings(ws.cluster.description).grace_seconds
    wait_for_state(kube, "Node", tainted, f"every node of {zone} tainted unreachable or not-ready", timeout=grace + 40)
    result.chaos["zone down"] = f"{zone} ({len(down)} nodes), tainted {time.monotonic() - t:.1f}s after the stop"
    pods, _ = kinds.list_objects(kube, "Pod", ws.namespace, label_selector=f"{ROLE_LABEL}=volumes")
    claims, _ = kinds.list_objects(kube, "PersistentVolumeClaim", ws.namespace)
    return down, judge.unscheduled(pods, claims)


def with_scheduler_down(ws: Workspace, result: StormResult, during: Callable[[], None]) -> None:
    """Stop the scheduler, run `during` (the storm's second half), start it again."""
    t = time.monotonic()
    stopped = chaos_components.stop_component(ws, SCHEDULER)
    try:
        during()
    finally:
        stopped.restore()
    result.chaos["scheduler restart"] = f"down {time.monotonic() - t:.1f}s while the second half was created"


def _settings(ws: Workspace) -> dict[str, str]:
    """The client settings of the storm's components, as the cluster records them."""
    d = ws.cluster.description
    keep = ("qps", "burst", "lease", "grace", "period", "NodesToScore")
    return {k: v for k, v in d.items() if any(w in k for w in keep)} or {"client qps/burst": "component defaults"}

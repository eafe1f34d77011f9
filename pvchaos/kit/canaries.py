"""Canaries: seconds-long checks, once per cluster, that what the suites rely on works at all.

A cluster whose PV binder is off makes every storage test wait out its timeout; the 31st
timeout teaches nothing the first did not. So before the first test on a cluster (each
shared cluster, each fresh disruptive one, an existing cluster in a namespace of its own)
a few tiny objects are created at once and awaited together for at most
`CANARY_TIMEOUT` seconds:

- `binder`: a static claim binds to a matching Available PV (the PV controller);
- `scheduler`: a pod with no constraints is scheduled (kube-scheduler);
- `volume-binding`: a WaitForFirstConsumer claim of a no-provisioner class binds once its
  pod is scheduled (the scheduler's VolumeBinding plugin, then the PV controller);
- `provisioner`: a WaitForFirstConsumer claim of the driver's class is provisioned for its
  pod (only when the driver can provision);
- `node-lifecycle`: every worker node is Ready with a Lease renewed within its duration.

A test that relies on a failed canary fails at once with the canary's diagnosis
(`CanaryFailed`, a category of its own in the report); the others run. `relied_on` says
which canaries a test relies on; it is pure so the mapping is tested without a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from pvchaos.clusters import running
from pvchaos.clusters.backend import Capability, ClusterHandle
from pvchaos.conformance import component_words as words
from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.drivers.driver import Driver
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube
from pvchaos.kube.errors import ConditionNotReached
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import wait_for

CANARY_TIMEOUT = 10.0
BINDER_SEES_PV = 3.0  # s the binder canary's claim waits for its PV to be Available (_binder_knows)
BINDER, SCHEDULER, VOLUME_BINDING, PROVISIONER, NODE_LIFECYCLE = (
    "binder", "scheduler", "volume-binding", "provisioner", "node-lifecycle")
CANARIES = (BINDER, SCHEDULER, VOLUME_BINDING, PROVISIONER, NODE_LIFECYCLE)
_STORAGE = (BINDER, SCHEDULER, VOLUME_BINDING)


@dataclass(frozen=True)
class CanaryResult:
    """One canary's verdict on one cluster; `diagnosis` names the component when it failed."""

    name: str
    ok: bool
    seconds: float
    diagnosis: str = ""


def relied_on(needs: Iterable[str], declared: Iterable[str] | None = None) -> tuple[str, ...]:
    """The canaries a test relies on: what it declares with `relies_on(...)`, else every
    storage test relies on binding and scheduling, a dynamic one on the provisioner too,
    and a node-failure one on node leases."""
    if declared is not None:
        return tuple(dict.fromkeys(declared))
    words = set(needs)
    out = list(_STORAGE)
    if words & {Capability.DYNAMIC_ZONAL, Capability.DYNAMIC_LOCAL}:
        out.append(PROVISIONER)
    if Capability.NODE_FAILURE in words:
        out.append(NODE_LIFECYCLE)
    return tuple(out)


def first_failure(results: dict[str, CanaryResult], wanted: Iterable[str]) -> CanaryResult | None:
    """The first failed canary among those a test relies on (in `CANARIES` order)."""
    wanted = set(wanted)
    return next((r for name in CANARIES if name in wanted and (r := results.get(name)) and not r.ok), None)


def lease_problems(nodes: Iterable[Obj], leases: Iterable[Obj], now: datetime) -> list[str]:
    """Worker nodes that are not Ready or whose Lease is missing or older than its duration."""
    by_name = {o.name(lease): lease for lease in leases}
    problems = []
    for node in nodes:
        if o.is_control_plane(node):
            continue
        name = o.name(node)
        if o.ready(node) != "True":
            problems.append(f"node {name} is Ready={o.ready(node)} ({o.ready_message(node) or 'no message'})")
            continue
        spec = o.spec(by_name.get(name))
        renewed = spec.get("renewTime")
        if not renewed:
            problems.append(f"node {name} has no Lease in kube-node-lease")
            continue
        age = (now - datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))).total_seconds()
        if age > float(spec.get("leaseDurationSeconds") or 40):
            problems.append(f"node {name}'s Lease was last renewed {age:.0f}s ago "
                            f"(duration {spec.get('leaseDurationSeconds') or 40}s)")
    return problems


class _Canaries:
    """The canary objects of one cluster and the waits that judge them."""

    def __init__(self, ws: Workspace, driver: Driver, cluster: ClusterHandle):
        self.ws, self.driver, self.cluster = ws, driver, cluster
        self.start = time.monotonic()
        self.results: dict[str, CanaryResult] = {}

    def remaining(self) -> float:
        return max(0.5, CANARY_TIMEOUT - (time.monotonic() - self.start))

    def record(self, name: str, check: Callable[[], str | None]) -> None:
        """Run one judgement; a returned string is the diagnosis."""
        problem = check()
        self.results[name] = CanaryResult(name, problem is None, round(time.monotonic() - self.start, 2), problem or "")

    def _reached(self, kind: str, name: str, until: Callable[[Obj], bool], expect: str,
                 timeout: float | None = None) -> bool:
        """Whether the canary object reaches its state within what is left of the budget
        (or `timeout`, when shorter)."""
        namespace = self.ws.namespace if kinds.kind(kind).namespaced else None
        bound = self.remaining() if timeout is None else min(timeout, self.remaining())
        try:
            wait_for(self.ws.kube, kind, name, until, expect, namespace, bound)
            return True
        except ConditionNotReached:
            return False

    def claim_bound(self, claim: str) -> bool:
        return self._reached("PersistentVolumeClaim", claim, lambda c: o.phase(c) == "Bound", "phase Bound")

    def pod_scheduled(self, pod: str) -> bool:
        return self._reached("Pod", pod, o.scheduled, "scheduled")

    # -- the objects, all created before any wait -----------------------------------------

    def create(self, names: set[str]) -> None:
        ws = self.ws
        static = Capability.STATIC_PV in self.cluster.capabilities
        binder_pv = ws.name("canary-static")
        if BINDER in names and static:
            ws.create(b.persistent_volume(binder_pv, "1Gi", labels=ws.case_labels))
        if SCHEDULER in names:
            ws.create(b.pod("canary-schedule"))
        if VOLUME_BINDING in names and static:
            self.wffc_class = ws.create(b.storage_class(ws.name("canary-wffc"), "kubernetes.io/no-provisioner",
                                                        "WaitForFirstConsumer"))["metadata"]["name"]
            ws.create(b.persistent_volume(ws.name("canary-wffc"), "1Gi", self.wffc_class))
            ws.create(b.persistent_volume_claim("canary-wffc", "1Gi", self.wffc_class))
            ws.create(b.pod("canary-wffc", ("canary-wffc",)))
        if PROVISIONER in names and self.can_provision():
            ws.create(b.persistent_volume_claim("canary-dynamic", "1Gi", ws.storage_class("canary-dyn")))
            ws.create(b.pod("canary-dynamic", ("canary-dynamic",)))
        if BINDER in names and static:
            self._binder_knows(binder_pv)
            ws.create(b.persistent_volume_claim("canary-static", "1Gi", "",
                                                selector={"matchLabels": ws.case_labels}))

    def _binder_knows(self, pv: str) -> None:
        """The PV controller binds claim-first: a claim it syncs before its informer has the
        PV waits for the next periodic claim resync (--pvclaimbinder-sync-period, 15 s by
        default, as kind runs it: longer than the canary's budget; seen once on kind). Only
        the PV controller sets a PV Available, so once it is, the claim can find it. Bounded:
        with the binder off the PV never gets that phase, the claim is created anyway and the
        binder canary fails as before."""
        self._reached("PersistentVolume", pv, lambda v: o.phase(v) == "Available",
                      "phase Available (the PV controller has seen it)", BINDER_SEES_PV)

    def can_provision(self) -> bool:
        return bool(self.driver.capabilities & {Capability.DYNAMIC_ZONAL, Capability.DYNAMIC_LOCAL})

    # -- the judgements ---------------------------------------------------------------------

    def judge(self, names: set[str]) -> dict[str, CanaryResult]:
        static = Capability.STATIC_PV in self.cluster.capabilities
        if SCHEDULER in names:
            self.record(SCHEDULER, self.scheduler)
        if BINDER in names and static:
            self.record(BINDER, self.binder)
        if VOLUME_BINDING in names and static:
            self.record(VOLUME_BINDING, self.volume_binding)
        if PROVISIONER in names and self.can_provision():
            self.record(PROVISIONER, self.provisioner)
        if NODE_LIFECYCLE in names:
            self.record(NODE_LIFECYCLE, self.node_lifecycle)
        return self.results

    def scheduler(self) -> str | None:
        if self.pod_scheduled("canary-schedule"):
            return None
        ready = sum(1 for n in self.ws.nodes() if o.ready(n) == "True")
        return (f"pods do not schedule: a pod with no constraints stayed unscheduled for {CANARY_TIMEOUT:.0f} s "
                f"with {ready} Ready worker nodes; is kube-scheduler running?")

    def binder(self) -> str | None:
        if self.claim_bound("canary-static"):
            return None
        pv = next(iter(self.ws.list("PersistentVolume", label_selector=_selector(self.ws.case_labels))), None)
        seen = f"its PV is {o.phase(pv) or 'without a phase'}" if pv else "its PV is gone"
        return (f"claims do not bind: a 1Gi claim with a matching PV stayed Pending for {CANARY_TIMEOUT:.0f} s "
                f"({seen}); is the persistentvolume-binder controller of kube-controller-manager running?")

    def volume_binding(self) -> str | None:
        if self.claim_bound("canary-wffc"):
            return None
        pod = self.ws.get("Pod", "canary-wffc")
        if not o.node_name(pod):
            return (f"WaitForFirstConsumer claims do not bind: their pod was not scheduled within "
                    f"{CANARY_TIMEOUT:.0f} s; is kube-scheduler running with its VolumeBinding plugin?")
        return (f"WaitForFirstConsumer claims do not bind: the pod was placed on {o.node_name(pod)} but its claim "
                f"with a matching no-provisioner PV stayed Pending for {CANARY_TIMEOUT:.0f} s; is kube-scheduler's "
                "VolumeBinding plugin enabled (it binds such claims before the pod is placed)?")

    def provisioner(self) -> str | None:
        if self.claim_bound("canary-dynamic"):
            return self.misplaced("canary-dynamic")
        claim = self.ws.get("PersistentVolumeClaim", "canary-dynamic")
        node = o.annotation(claim, o.SELECTED_NODE)
        if node is None:
            starved = self.capacity_unpublished(claim)
            if starved:
                return starved
            return (f"WaitForFirstConsumer claims are not provisioned: no node was selected for the claim within "
                    f"{CANARY_TIMEOUT:.0f} s ({o.SELECTED_NODE} is missing); is kube-scheduler's VolumeBinding "
                    "plugin enabled?")
        stuck = (f"WaitForFirstConsumer claims are not provisioned: the claim stayed Pending for "
                 f"{CANARY_TIMEOUT:.0f} s after node {node} was selected")
        about = claim or {"metadata": {"name": "canary-dynamic", "namespace": self.ws.namespace}}
        said = words.provisioning_failure(kinds.events_for(self.ws.kube, {**about, "kind": "PersistentVolumeClaim"}))
        if said:
            return f"{stuck}; {said}"
        down = self.not_running()
        if down:
            return f"{stuck}; {down}"
        return f"{stuck} and no ProvisioningFailed event; is the provisioner {self.driver_provisioner()} running?"

    def not_running(self) -> str:
        """Which of the harness's own CSI processes are not running ("" when all run,
        or where the harness runs none and cannot know)."""
        return words.not_running_text(running.csi_not_running(self.cluster.directory))

    def capacity_unpublished(self, claim: Obj | None) -> str | None:
        """With capacity tracking on (CSIDriver storageCapacity: true), the scheduler places
        a WaitForFirstConsumer pod only where a CSIStorageCapacity object of the class has
        room, and those objects are published by the external-provisioner: a stopped
        provisioner shows as "no node selected", not as a Pending claim after selection."""
        provisioner = self.driver_provisioner()
        driver = self.ws.get("CSIDriver", provisioner)
        if not (driver or {}).get("spec", {}).get("storageCapacity"):
            return None
        klass = str((claim or {}).get("spec", {}).get("storageClassName") or "")
        published = [c for c in kinds.list_objects(self.ws.kube, "CSIStorageCapacity")[0]
                     if c.get("storageClassName") == klass]
        if published:
            return None
        ask = self.not_running() or f"is the provisioner {provisioner} running (it publishes them)?"
        return (f"WaitForFirstConsumer claims are not provisioned: CSIDriver {provisioner} declares "
                f"storageCapacity: true but no CSIStorageCapacity object exists for class {klass} after "
                f"{CANARY_TIMEOUT:.0f} s, so kube-scheduler finds no node with room and selects none; {ask}")

    def misplaced(self, claim_name: str) -> str | None:
        """Provisioned, but where? The PV's node affinity must admit the node the scheduler
        selected (the oracle's node-affinity match), else every WaitForFirstConsumer test
        after this one would only check that pods follow misplaced volumes."""
        claim = self.ws.get("PersistentVolumeClaim", claim_name)
        selected = o.annotation(claim, o.SELECTED_NODE)
        pv = self.ws.get("PersistentVolume", str((claim or {}).get("spec", {}).get("volumeName") or ""))
        node = self.ws.get("Node", selected) if selected else None
        if pv is None or node is None or node_matches_pv_affinity(node, pv):
            return None
        return (f"WaitForFirstConsumer claims are provisioned in the wrong place: PV {o.name(pv)} "
                f"({', '.join(sorted(o.pv_zones(pv))) or 'no zone'}) does not admit the selected node {selected} (zone "
                f"{o.zone(node)}); does the provisioner {self.driver_provisioner()} honour the selected node's topology?")

    def driver_provisioner(self) -> str:
        body = self.driver.storage_class("probe", "WaitForFirstConsumer")
        return str(body.get("provisioner") or "of the driver")

    def node_lifecycle(self) -> str | None:
        deadline = time.monotonic() + self.remaining()
        while True:
            nodes = self.ws.nodes()
            leases = kinds.list_objects(self.ws.kube, "Lease", "kube-node-lease")[0]
            problems = lease_problems(nodes, leases, datetime.now(UTC))
            if not problems:
                return None
            if time.monotonic() > deadline:
                return "nodes do not hold their leases: " + "; ".join(problems) + \
                    "; is each node's kubelet (KWOK controller on local clusters) heartbeating?"
            time.sleep(0.5)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def run_canaries(kube: Kube, cluster: ClusterHandle, driver: Driver,
                 names: Iterable[str] = CANARIES) -> dict[str, CanaryResult]:
    """Create every canary at once, judge each within CANARY_TIMEOUT, delete them all.
    Canaries that cannot run here (no static PVs allowed, a driver that cannot
    provision) are left out of the result: nothing relies on them."""
    wanted = set(names)
    cleanup = Cleanup(f"canaries on {cluster.name}")
    try:
        ws = Workspace(kube, cluster, "canary", cleanup, driver)
        canaries = _Canaries(ws, driver, cluster)
        canaries.create(wanted)
        return canaries.judge(wanted)
    finally:
        cleanup.run()

"""The reschedule race, counted: upstream's TestRescheduleProvisioning scenario many
times on one local cluster, once per reschedule mode of the test provisioner.

Scenario (issue 14): a pod is already waiting on a WaitForFirstConsumer claim whose
class fails on the claim's first selected node (`pvchaos.dev/fail-first-node`); the
provisioner removes `volume.kubernetes.io/selected-node`, the scheduler picks again
(the first node may be picked again and fail again), and the volume is provisioned on
another node. The provisioner acts on a selected node within milliseconds (it fails
at once on the first node, provisions at once elsewhere), so a claim that is still
Pending at the end of its batch (`--timeout`, default 45 s) while carrying the same
selected node for at least STALE_SECONDS (20 s: more than the provisioner's 15 s
resync, so a resync did not rescue it) counts as **stuck**: the provisioner ignores
the scheduler's pick. It is then touched (a label added) to see whether a fresh
informer event unsticks it, which is what a stale copy in the provisioner's claim
store predicts. A claim Pending for another reason (the scheduler still trying, see
"reschedules") counts as **unresolved**, not stuck.

Modes (`-reschedule` of pvchaos/tools/provisioner): `library` is sig-storage-lib-external-
provisioner v13.1.0's own rescheduleProvisioning, which writes its older copy of the
claim into the informer store after removing the annotation; `guarded` is ours
(pvchaos/tools/provisioner/reschedule.go). Each mode gets its own fresh cluster.

    .venv/bin/python -m bench.reschedule_loop [--iterations 50] [--parallel 5] [--modes library,guarded]

Prints, per mode, stuck claims and the median time from pod creation to Bound; exits 1
when the guarded mode leaves any claim stuck.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import RESCHEDULE_MODES, LocalClusterConfig, parse_feature_gates
from pvchaos.kube import builders as b
from pvchaos.kube import kinds, naming
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.errors import ConditionNotReached
from pvchaos.kube.wait import wait_for, wait_for_state
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

ZONAL_PROVISIONER = "zonal.csi.pvchaos.dev"  # the test double's: the reschedule modes are its own
REASON = "bench: no space on the first node"
TOUCH_SECONDS = 10.0
STALE_SECONDS = 20.0


@dataclass
class Iteration:
    """One claim and its pod: the nodes the scheduler selected, in order, and when it bound."""

    claim: str
    created: float
    nodes: list[str] = field(default_factory=list)
    node_since: float | None = None  # when the current selected node was set (None: no annotation)
    bound_after: float | None = None
    held_seconds: float = 0.0  # at the end: how long the unbound claim had held its selected node
    unstuck_by_touch: bool | None = None  # only for claims not Bound in time
    failures: int = 0  # ProvisioningFailed events of the claim
    evidence: str = ""

    @property
    def bound(self) -> bool:
        return self.bound_after is not None

    @property
    def stuck(self) -> bool:
        return not self.bound and self.held_seconds >= STALE_SECONDS

    @property
    def unresolved(self) -> bool:
        return not self.bound and not self.stuck


@dataclass
class ModeResult:
    mode: str
    iterations: list[Iteration]
    seconds: float

    @property
    def stuck(self) -> list[Iteration]:
        return [i for i in self.iterations if i.stuck]

    def bound_times(self) -> list[float]:
        return [i.bound_after for i in self.iterations if i.bound_after is not None]

    def summary(self) -> str:
        times = self.bound_times()
        median = f"{statistics.median(times):.2f} s" if times else "n/a"
        reschedules = [i.failures for i in self.iterations]
        touched = sum(1 for i in self.stuck if i.unstuck_by_touch)
        unresolved = sum(1 for i in self.iterations if i.unresolved)
        return (f"{self.mode}: {len(self.stuck)}/{len(self.iterations)} claims stuck"
                + (f" ({touched} bound within {TOUCH_SECONDS:.0f} s of a label touch)" if self.stuck else "")
                + f", {unresolved} unresolved"
                + f"; median pod-created-to-Bound {median} (max {max(times or [0]):.1f} s)"
                + f"; provisioning failures per claim: median {statistics.median(reschedules or [0]):.0f}"
                + f", max {max(reschedules or [0])}; {self.seconds:.0f} s")


def failing_class(name: str) -> dict:
    return b.storage_class(name, ZONAL_PROVISIONER, "WaitForFirstConsumer", labels=naming.owned_labels(),
                           parameters=b.provisioning_failures(first_node=True, reason=REASON))


def _observe(batch: dict[str, Iteration], state: dict) -> bool | None:
    """wait_for_state condition: records selected-node changes and Bound times; done when all bound."""
    now = time.monotonic()
    for obj in state.values():
        it = batch.get(o.name(obj))
        if it is None:
            continue
        node = (obj.get("metadata", {}).get("annotations") or {}).get(o.SELECTED_NODE)
        if not node:
            it.node_since = None
        elif it.node_since is None or it.nodes[-1] != node:
            it.nodes.append(node)
            it.node_since = now
        if o.phase(obj) == "Bound" and it.bound_after is None:
            it.bound_after = now - it.created
    return True if all(it.bound for it in batch.values()) else None


def run_batch(kube: Kube, namespace: str, sc: str, first: int, count: int, timeout: float) -> list[Iteration]:
    """`count` claims and pods created back to back; waits until all are Bound or `timeout`."""
    batch: dict[str, Iteration] = {}
    for i in range(first, first + count):
        claim, pod = f"data-{i}", f"app-{i}"
        kinds.create(kube, b.persistent_volume_claim(claim, "1Gi", storage_class=sc, labels=naming.owned_labels()),
                     namespace)
        batch[claim] = Iteration(claim, time.monotonic())
        kinds.create(kube, b.pod(pod, (claim,), labels=naming.owned_labels()), namespace)
    try:
        wait_for_state(kube, "PersistentVolumeClaim", lambda st: _observe(batch, st),
                       f"claims {', '.join(batch)} Bound", namespace=namespace, timeout=timeout)
    except ConditionNotReached:
        pass
    end = time.monotonic()
    for it in batch.values():
        claim = kinds.get(kube, "PersistentVolumeClaim", it.claim, namespace) or {}
        it.failures = sum(1 for e in kinds.events_for(kube, claim) if e.get("reason") == "ProvisioningFailed") if claim else 0
        if not it.bound and it.node_since is not None:
            it.held_seconds = end - it.node_since
        if not it.bound:
            _diagnose(kube, namespace, it)
    for i in range(first, first + count):  # keep the cluster small; the namespace goes at the end
        kinds.delete(kube, "Pod", f"app-{i}", namespace)
        kinds.delete(kube, "PersistentVolumeClaim", f"data-{i}", namespace)
    return list(batch.values())


def _diagnose(kube: Kube, namespace: str, it: Iteration) -> None:
    """What a stuck claim looks like, then whether any new event about it unsticks it."""
    claim = kinds.get(kube, "PersistentVolumeClaim", it.claim, namespace) or {}
    lines = kinds.event_lines(kinds.events_for(kube, claim)) if claim else []
    node = (claim.get("metadata", {}).get("annotations") or {}).get(o.SELECTED_NODE)
    it.evidence = (f"{it.claim}: phase {o.phase(claim)}, selected-node {node!r} held {it.held_seconds:.0f} s, "
                   f"nodes selected {it.nodes}, "
                   f"resourceVersion {claim.get('metadata', {}).get('resourceVersion')}\n    "
                   + "\n    ".join(lines[-8:]))
    kinds.patch(kube, "PersistentVolumeClaim", it.claim, {"metadata": {"labels": {"bench.pvchaos.dev/touched": "1"}}},
                namespace)
    try:
        wait_for(kube, "PersistentVolumeClaim", it.claim, lambda c: o.phase(c) == "Bound", "phase Bound after a touch",
                 namespace, timeout=TOUCH_SECONDS)
        it.unstuck_by_touch = True
    except ConditionNotReached:
        it.unstuck_by_touch = False


def run_mode(mode: str, iterations: int, parallel: int, timeout: float, k8s_version: str = DEFAULT_K8S_VERSION,
             feature_gates: dict[str, bool] | None = None,
             log: Callable[[str], None] = lambda text: print(text, flush=True)) -> ModeResult:
    """A fresh local cluster whose provisioner reschedules in `mode`, and the loop on it."""
    bins = ensure_binaries(k8s_version)
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as state_dir:
        old_state = os.environ.get("PVCHAOS_STATE_DIR")
        os.environ["PVCHAOS_STATE_DIR"] = state_dir  # our cluster only, never anyone else's
        local = LocalCluster(LocalClusterConfig(name=f"bench-resched-{secrets.token_hex(3)}", k8s_version=k8s_version,
                                                feature_gates=dict(feature_gates or {}),
                                                provisioner_kind="test-double", provisioner_reschedule=mode),
                             binaries=bins)
        try:
            handle = local.up()
            kube = connect(handle.kubeconfig)
            namespace = naming.unique("resched")
            kinds.create(kube, {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": namespace, "labels": naming.owned_labels()}})
            sc = kinds.create(kube, failing_class(naming.unique("fail-first")))["metadata"]["name"]
            started, done = time.monotonic(), []
            for first in range(0, iterations, parallel):
                batch = run_batch(kube, namespace, sc, first, min(parallel, iterations - first), timeout)
                done.extend(batch)
                for it in batch:
                    if not it.bound:
                        log(f"  [{mode}] {'STUCK' if it.stuck else 'unresolved'} {it.evidence}\n"
                            f"    bound within {TOUCH_SECONDS:.0f} s of a touch: {it.unstuck_by_touch}")
                log(f"  [{mode}] {len(done)}/{iterations} done, {sum(i.stuck for i in done)} stuck")
            result = ModeResult(mode, done, time.monotonic() - started)
            kube.api.close()
            return result
        finally:
            local.down()
            if old_state is None:
                os.environ.pop("PVCHAOS_STATE_DIR", None)
            else:
                os.environ["PVCHAOS_STATE_DIR"] = old_state


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.reschedule_loop", description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--parallel", type=int, default=5, help="claims and pods created together per batch")
    p.add_argument("--timeout", type=float, default=45.0, help="seconds a batch may take before a claim counts as stuck")
    p.add_argument("--modes", default="library,guarded", help=f"comma list of {', '.join(RESCHEDULE_MODES)}")
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    p.add_argument("--feature-gates", default="", help="extra gates, A=true,B=false")
    args = p.parse_args(argv)
    try:
        gates = parse_feature_gates(args.feature_gates)
    except ValueError as exc:
        p.error(str(exc))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if bad := [m for m in modes if m not in RESCHEDULE_MODES]:
        p.error(f"--modes: unknown {', '.join(bad)}; use {', '.join(RESCHEDULE_MODES)}")
    if args.iterations < 1 or args.parallel < 1 or args.timeout <= 0:
        p.error("--iterations and --parallel must be at least 1, --timeout positive")
    results = [run_mode(m, args.iterations, args.parallel, args.timeout, args.k8s_version, gates) for m in modes]
    for r in results:
        print(r.summary())
    guarded = [r for r in results if r.mode == "guarded"]
    return 1 if any(r.stuck for r in guarded) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The requeue question (issue 26, item 4): when a pod is created before its claim, how
long until kube-scheduler retries it once the claim exists, with each of its volume
plugins disabled in turn?

One test (`test_unbound_immediate_claim_blocks_pod`) once waited its full 60 s on a
cluster whose scheduler had a volume plugin disabled: the only event was
`persistentvolumeclaim "data" not found`, so the pod had been judged before the claim
reached the scheduler's cache, and was not tried again when the claim arrived. This
makes that order deterministic instead of a cache race: the pod first, then (after its
first "not found" verdict) the claim, and times from the claim's creation to the
scheduler's next verdict on the pod (its PodScheduled condition changes, or it is
placed). A pod whose rejecting plugin registered no queueing hint for claim events
waits for the unschedulable queue's periodic flush (5 minutes upstream,
podMaxInUnschedulablePodsDuration) or its own backoff, not for the claim.

    .venv/bin/python -m bench.requeue_pod_before_claim [--runs 5] [--timeout 90]

Prints, per scheduler configuration, the median and the slowest retry, and how many
runs saw no retry within the timeout. docs/findings.md has the measured table.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time

from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.kube import builders as b
from pvchaos.kube import kinds, naming
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.errors import WaitTimeout
from pvchaos.kube.wait import wait_for
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

CONFIGS = ("none", "VolumeBinding", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits")


def _verdict(pod: dict) -> str:
    cond = o.condition(pod, "PodScheduled") or {}
    return f"{cond.get('status')}|{cond.get('message')}" if cond else ""


def once(kube: Kube, timeout: float) -> tuple[float | None, str, str]:
    """(seconds from the claim's creation to the scheduler's next verdict or None, the
    first verdict, the next one)."""
    namespace = naming.unique("requeue")
    kinds.create(kube, {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace, "labels": naming.owned_labels()}})
    try:
        kinds.create(kube, b.pod("app", ("data",)), namespace)
        first = wait_for(kube, "Pod", "app", lambda p: bool(_verdict(p)) or bool(o.node_name(p)),
                         "a first scheduling verdict", namespace, 30)
        before = _verdict(first)
        kinds.create(kube, b.persistent_volume_claim("data", "1Gi", "",
                                                     selector={"matchLabels": {"pvchaos.dev/none": "x"}}), namespace)
        started = time.monotonic()
        try:
            after = wait_for(kube, "Pod", "app", lambda p: _verdict(p) != before or bool(o.node_name(p)),
                             "the scheduler's next verdict", namespace, timeout)
        except WaitTimeout:
            return None, before, before
        return time.monotonic() - started, before, o.node_name(after) and f"placed on {o.node_name(after)}" \
            or _verdict(after)
    finally:
        kinds.delete(kube, "Namespace", namespace)


def run_config(disabled: str, runs: int, timeout: float, version: str) -> list[tuple[float | None, str, str]]:
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as state_dir:
        old = os.environ.get("PVCHAOS_STATE_DIR")
        os.environ["PVCHAOS_STATE_DIR"] = state_dir
        plugins = () if disabled == "none" else (disabled,)
        local = LocalCluster(LocalClusterConfig(name=f"bench-rq-{secrets.token_hex(3)}", k8s_version=version,
                                                disabled_scheduler_plugins=plugins))
        try:
            kube = connect(local.up().kubeconfig)
            try:
                return [once(kube, timeout) for _ in range(runs)]
            finally:
                kube.api.close()
        finally:
            local.down()
            if old is None:
                os.environ.pop("PVCHAOS_STATE_DIR", None)
            else:
                os.environ["PVCHAOS_STATE_DIR"] = old


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.requeue_pod_before_claim", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the retry")
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    p.add_argument("--only", choices=CONFIGS, action="append", help="one configuration (repeatable)")
    args = p.parse_args(argv)
    if args.runs < 1 or args.timeout <= 0:
        print("bench.requeue_pod_before_claim: --runs must be at least 1 and --timeout positive", file=sys.stderr)
        return 2
    ensure_binaries(args.k8s_version)
    print(f"pod first, then its claim; seconds from the claim to the scheduler's next verdict "
          f"({args.runs} runs each, k8s {args.k8s_version}, timeout {args.timeout:g} s)")
    for disabled in args.only or CONFIGS:
        results = run_config(disabled, args.runs, args.timeout, args.k8s_version)
        seen = [s for s, _, _ in results if s is not None]
        missed = len(results) - len(seen)
        median = f"{statistics.median(seen):.2f}" if seen else "-"
        slowest = f"{max(seen):.2f}" if seen else "-"
        print(f"  disabled {disabled:18s} median {median:>6} s  slowest {slowest:>6} s  no retry: {missed}/{len(results)}")
        print(f"    first verdict: {results[0][1][:150]}")
        print(f"    next verdict:  {results[0][2][:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

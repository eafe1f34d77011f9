"""How long a local cluster takes to start, and how much memory it holds.

Disruptive tests get a fresh cluster each (clusters.pool), so start time is paid per
test: this keeps it honest. Binaries are ensured first, untimed (a warm cache is the
normal case). Each run times `up()` of a 3 zones x 2 nodes cluster, which returns once
every node is Ready, then sums the peak resident memory (VmHWM) of every process in its
state.json just before `down()`.

    .venv/bin/python -m bench.cluster_start [--runs 5]

Exits 1 when the median start or the peak memory misses its target, so CI can gate on it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.local.memory import status_kib
from pvchaos.clusters.local.registry import ClusterState
from pvchaos.clusters.topology import Topology
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET_SECONDS = 6.0
TARGET_BYTES = 1.5 * 2**30
MIB = 2**20


def peak_rss(state: ClusterState) -> dict[str, int]:
    """VmHWM (peak resident set) in bytes per component; a process already gone counts 0."""
    return {component: status_kib(rec.pid, "VmHWM") * 1024 for component, rec in state.processes.items()}


def one_run(index: int, version: str) -> tuple[float, int]:
    cfg = LocalClusterConfig(name=f"bench-{index}", k8s_version=version,
                             topology=Topology(zones=("zone-a", "zone-b", "zone-c"), nodes_per_zone=2))
    local = LocalCluster(cfg, binaries=ensure_binaries(version))
    try:
        started = time.monotonic()
        local.up()
        seconds = time.monotonic() - started
        peaks = peak_rss(ClusterState.load(local.directory))
    finally:
        local.down()
    top = ", ".join(f"{c} {b / MIB:.0f}" for c, b in sorted(peaks.items(), key=lambda kv: -kv[1])[:4])
    print(f"run {index}: Ready in {seconds:.2f} s; peak memory {sum(peaks.values()) / MIB:.0f} MiB "
          f"(largest, MiB: {top})", flush=True)
    return seconds, sum(peaks.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cluster_start", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    ensure_binaries(args.k8s_version)  # untimed: building is not what this measures
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as state_dir:
        os.environ["PVCHAOS_STATE_DIR"] = state_dir  # our clusters only, never anyone else's
        results = [one_run(i, args.k8s_version) for i in range(1, args.runs + 1)]
    times = [s for s, _ in results]
    median, peak = statistics.median(times), max(b for _, b in results)
    print(f"cluster start: median {median:.2f} s over {len(times)} runs (min {min(times):.2f}, max {max(times):.2f}); "
          f"peak memory {peak / MIB:.0f} MiB (target <= {TARGET_SECONDS:.0f} s, < {TARGET_BYTES / 2**30:.1f} GiB)")
    return 0 if median <= TARGET_SECONDS and peak < TARGET_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())

"""Many local cluster starts in a row, counting the ones that fail and why (issue 15).

A healthy start once failed with "kube-apiserver exited at start (signal 0)": the
identity check read /proc/<pid>/cmdline while the kernel was still inside execve. This
loop is how "a start never fails on a process that is in fact running" is checked:

    .venv/bin/python -m bench.start_loop [--runs 200]

It prints every failure's one-line reason, the count and the median start time, and
exits 1 when any start failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.start_loop", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    binaries = ensure_binaries(args.k8s_version)
    times: list[float] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pvchaos-start-loop-") as state_dir:
        os.environ["PVCHAOS_STATE_DIR"] = state_dir  # our clusters only, never anyone else's
        for i in range(1, args.runs + 1):
            local = LocalCluster(LocalClusterConfig(name=f"loop-{i}", k8s_version=args.k8s_version), binaries=binaries)
            started = time.monotonic()
            try:
                local.up()
                times.append(time.monotonic() - started)
            except ClusterError as exc:
                failures.append(f"start {i}: {str(exc).splitlines()[0]}")
                print(failures[-1], flush=True)
            finally:
                local.down()
    median = statistics.median(times) if times else float("nan")
    print(f"starts: {args.runs}, failed: {len(failures)}, median start {median:.2f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

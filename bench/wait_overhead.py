"""The harness's own delay per wait: from the API server recording a change to
`kube.wait.wait_for` returning it.

Every suite step is a wait, so this overhead is paid hundreds of times per run, and it
bounds how finely recovery times and race windows can be measured. Method: one local
cluster (in a temporary PVCHAOS_STATE_DIR), one PersistentVolume. For each sample the
main thread waits with `wait_for` for a label value the PV does not have yet; another
thread, with its own client, merge-patches the label after a pause long enough for the
wait's list and watch to be in place. The change is committed when the PATCH response
returns, so that moment (taken in the patching thread) stands for the API server's
record time; it also includes the response's trip back over loopback, so the delay can
be slightly negative when the watch event beats the PATCH response. It is reported as
measured. The resourceVersion of the patch response must equal that of the object the
wait returned.

    .venv/bin/python -m bench.wait_overhead [--samples 50]

Exits 1 when the median misses its target.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.kube import builders, kinds, naming
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.wait import wait_for
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET_MS = 100.0
LABEL = "bench.pvchaos.dev/value"
SETTLE_SECONDS = 0.3  # lets the wait list and open its watch before the change is made


@dataclass(frozen=True)
class Sample:
    delay_ms: float  # wait return - PATCH response
    patch_ms: float  # PATCH request sent -> response returned
    patch_rv: str
    seen_rv: str


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p90 of 50 samples is the 45th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def one_sample(waiter: Kube, patcher: Kube, pv: str, value: str) -> Sample:
    times: dict[str, float] = {}
    patched: dict[str, str] = {}

    def change() -> None:
        time.sleep(SETTLE_SECONDS)
        times["sent"] = time.monotonic()
        obj = kinds.patch(patcher, "PersistentVolume", pv, {"metadata": {"labels": {LABEL: value}}})
        times["committed"] = time.monotonic()
        patched["rv"] = obj["metadata"]["resourceVersion"]

    thread = threading.Thread(target=change, name="patcher")
    thread.start()
    try:
        seen = wait_for(waiter, "PersistentVolume", pv,
                        lambda o: ((o or {}).get("metadata", {}).get("labels") or {}).get(LABEL) == value,
                        f"label {LABEL}={value}", timeout=20)
        returned = time.monotonic()
    finally:
        thread.join()
    return Sample(delay_ms=(returned - times["committed"]) * 1000, patch_ms=(times["committed"] - times["sent"]) * 1000,
                  patch_rv=patched["rv"], seen_rv=seen["metadata"]["resourceVersion"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.wait_overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = p.parse_args(argv)
    if args.samples < 1:
        p.error("--samples must be at least 1")
    bins = ensure_binaries(args.k8s_version)  # untimed: building is not what this measures
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as state_dir:
        os.environ["PVCHAOS_STATE_DIR"] = state_dir  # our cluster only, never anyone else's
        local = LocalCluster(LocalClusterConfig(name=f"bench-wait-{secrets.token_hex(3)}",
                                                k8s_version=args.k8s_version), binaries=bins)
        try:
            handle = local.up()
            waiter, patcher = connect(handle.kubeconfig), connect(handle.kubeconfig)
            pv = kinds.create(waiter, builders.persistent_volume(
                naming.unique("wait-bench"), "1Gi", labels={naming.OWNED_LABEL: "true", LABEL: "start"}))
            name = pv["metadata"]["name"]
            for i in range(1, args.samples + 1):
                s = one_sample(waiter, patcher, name, f"v{i}")
                samples.append(s)
                note = "" if s.seen_rv == s.patch_rv else f" (wait returned resourceVersion {s.seen_rv})"
                print(f"sample {i}: resourceVersion {s.patch_rv}, PATCH round trip {s.patch_ms:.1f} ms, "
                      f"wait returned {s.delay_ms:+.1f} ms after the PATCH response{note}", flush=True)
            waiter.api.close()
            patcher.api.close()
        finally:
            local.down()
    delays = [s.delay_ms for s in samples]
    median, p90 = statistics.median(delays), percentile(delays, 90)
    mismatched = sum(s.seen_rv != s.patch_rv for s in samples)
    print(f"delay, ms: min {min(delays):+.1f}, median {median:+.1f}, p90 {p90:+.1f}, max {max(delays):+.1f}; "
          f"PATCH round trip median {statistics.median(s.patch_ms for s in samples):.1f} ms; "
          f"resourceVersion mismatches: {mismatched}")
    print(f"wait overhead: median {median:.1f} ms, p90 {p90:.1f} ms over {len(samples)} samples "
          f"(target median < {TARGET_MS:.0f} ms)")
    return 0 if median < TARGET_MS and not mismatched else 1


if __name__ == "__main__":
    sys.exit(main())

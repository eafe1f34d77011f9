"""How long `pvchaos explain` takes on a 1,000-node cluster.

A local cluster (3 zones x 2 KWOK nodes) gets 1,000 more plain Node objects through the
API (labelled with a zone and a hostname; nothing runs them, which a read-only explain
does not mind) and the seed's incident: a claim bound in zone-a, its pod pinned to
zone-b. Each run is the command as a user runs it, minus interpreter start-up:
connect, the list calls, the reasoning and the text report. Prints every run, the
median, the parts (reading vs reasoning) of the last run, and whether the scheduler's
message agrees with the explanation.

    .venv/bin/python -m bench.explain [--nodes 1000] [--runs 7]

Exits 1 when the median misses 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from pvchaos import cli
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.topology import Topology
from pvchaos.conformance.explain import explain
from pvchaos.explain import to_text
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube.client import connect
from pvchaos.kube.explain_read import read_view
from pvchaos.kube.objects import HOSTNAME_KEY, ZONE_KEY
from pvchaos.kube.wait import wait_for
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET_SECONDS = 1.0
ZONES = ("zone-a", "zone-b", "zone-c")


def plain_node(index: int) -> dict[str, object]:
    zone = ZONES[index % len(ZONES)]
    name = f"bench-{zone}-{index:04d}"
    room = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    # Cordoned: nothing heartbeats for these nodes, so the node lifecycle controller taints
    # them over the following minutes; NodeUnschedulable is the scheduler's first filter,
    # so the scheduler's counts (and explain's) do not move while it does.
    return {"kind": "Node", "metadata": {"name": name, "labels": {ZONE_KEY: zone, HOSTNAME_KEY: name}},
            "spec": {"unschedulable": True},
            "status": {"capacity": room, "allocatable": room,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    version = DEFAULT_K8S_VERSION
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-explain-") as state:
        os.environ["PVCHAOS_STATE_DIR"] = state
        cfg = LocalClusterConfig(name="bench-explain", k8s_version=version, topology=Topology(zones=ZONES, nodes_per_zone=2))
        local = LocalCluster(cfg, binaries=ensure_binaries(version))
        try:
            handle = local.up()
            kube = connect(handle.kubeconfig)
            started = time.monotonic()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: kinds.create(kube, plain_node(i)), range(args.nodes)))
            print(f"[bench] created {args.nodes} Node objects in {time.monotonic() - started:.1f} s")
            ns = "default"
            pv = kinds.create(kube, b.persistent_volume("bench-pv", "1Gi", affinity=b.zone_affinity("zone-a")))
            kinds.create(kube, b.persistent_volume_claim("data", "1Gi", "", volume_name=pv["metadata"]["name"]), ns)
            wait_for(kube, "PersistentVolumeClaim", "data", lambda c: (c.get("status") or {}).get("phase") == "Bound",
                     "phase Bound", ns, 60)
            kinds.create(kube, b.pod("app", ("data",), node_selector={ZONE_KEY: "zone-b"}), ns)
            wait_for(kube, "Pod", "app", lambda p: any(c.get("reason") == "Unschedulable" for c in
                                                        (p.get("status") or {}).get("conditions") or []),
                     "PodScheduled=False, Unschedulable", ns, 60)
            argv = ["explain", "app", "-n", ns, "--kubeconfig", str(handle.kubeconfig)]
            times = []
            for run in range(args.runs):
                started = time.monotonic()
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    code = cli.main(argv)
                times.append(time.monotonic() - started)
                print(f"[bench] run {run + 1}: {times[-1] * 1000:.0f} ms, exit {code}")
            report = out.getvalue()
            started = time.monotonic()
            view = read_view(kube, ns, "app")
            read = time.monotonic() - started
            started = time.monotonic()
            explanation = explain(view.scene(view.pods[0]))
            text = to_text(explanation)
            reason = time.monotonic() - started
        finally:
            local.down()
    median = statistics.median(times)
    agreement = explanation.scheduler
    print(f"[bench] scheduler: {agreement.message}")
    print(f"[bench] agrees: {agreement.agrees} {list(agreement.differences)}")
    print(report.splitlines()[1] if report else "(no report)")
    print(f"[bench] {len(view.nodes)} nodes: median {median * 1000:.0f} ms over {args.runs} runs "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); last parts: read {read * 1000:.0f} ms, "
          f"reason+render {reason * 1000:.0f} ms ({len(text.splitlines())} lines)")
    return 0 if median < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())

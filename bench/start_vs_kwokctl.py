"""How long a local cluster takes to start, next to kwokctl starting the same thing.

Both sides use the same binaries (our cached kube-apiserver, controller-manager,
scheduler, etcd and KWOK; kwokctl's `binary` runtime pointed at them, so nothing is
downloaded) and the same readiness rule: every node Ready and its
node.kubernetes.io/not-ready taint lifted by the node-lifecycle controller. kwokctl's
clock runs from `kwokctl create cluster` until its nodes (the same Node objects, created
by us once it returns) are ready; ours is `LocalCluster.up()`. Runs alternate, so load
on the machine falls on both alike. Ours also starts the zonal provisioner; kwokctl has
none.

    .venv/bin/python -m bench.start_vs_kwokctl [--runs 5] [--zones 3 --nodes-per-zone 2]
    .venv/bin/python -m bench.start_vs_kwokctl --only pvchaos --runs 1 --nodes-per-zone 334

The second form is the scale check: a 1,002-node cluster, its start time, the number of
KWOK processes and the total resident memory of every process. Past 100 nodes a cluster
takes upstream's lease (40 s) and grace (50 s) by itself (`timings_for`): with our 4 s
lease, 1,000 Leases to renew every second is more than the apiserver manages on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.cluster_start import MIB
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig, sized
from pvchaos.clusters.local.memory import status_kib
from pvchaos.clusters.local.registry import ClusterState
from pvchaos.clusters.topology import Topology
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.poll import poll_until
from pvchaos.tools.build import Binaries, BuildError, build_kwokctl, ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET_SECONDS = 3.0


def nodes_ready(kube: Kube, want: set[str], timeout: float = 600.0) -> None:
    """The readiness rule of LocalCluster.up(): Ready=True and no not-ready taint."""
    def check() -> bool | None:
        ready = {o.name(n) for n in kinds.list_objects(kube, "Node")[0]
                 if o.ready(n) == "True" and not o.has_taint(n, o.NOT_READY)}
        return True if want <= ready else None
    poll_until(check, timeout, f"{len(want)} nodes Ready", interval=0.1)


def memory(state: ClusterState) -> tuple[int, int]:
    """Current resident memory (VmRSS) of every process of the cluster, and how many are KWOK."""
    total = sum(status_kib(rec.pid) * 1024 for rec in state.processes.values())
    return total, sum(1 for c in state.processes if c.startswith("kwok-"))


def pvchaos_config(name: str, topo: Topology, version: str, lease: int, grace: int) -> LocalClusterConfig:
    """Sized as the pool sizes clusters (upstream's timings past 100 nodes), then the flags given."""
    cfg = sized(LocalClusterConfig(name=name, k8s_version=version, topology=topo))
    return replace(cfg, node_lease_seconds=lease or cfg.node_lease_seconds,
                   node_monitor_grace_seconds=grace or cfg.node_monitor_grace_seconds)


def run_pvchaos(index: int, topo: Topology, bins: Binaries, version: str, lease: int, grace: int) -> float:
    cfg = pvchaos_config(f"bench-p{index}", topo, version, lease, grace)
    local = LocalCluster(cfg, binaries=bins)
    try:
        started = time.monotonic()
        local.up()
        seconds = time.monotonic() - started
        state = ClusterState.load(local.directory)
        rss, kwoks = memory(state)
    finally:
        local.down()
    print(f"pvchaos run {index}: {topo.node_count} nodes Ready in {seconds:.2f} s; resident memory "
          f"{rss / MIB:.0f} MiB over {len(state.processes)} processes ({kwoks} KWOK); load {os.getloadavg()[0]:.1f}",
          flush=True)
    return seconds


def run_kwokctl(index: int, topo: Topology, bins: Binaries, kwokctl: Path, workdir: Path) -> float:
    name = f"bench-k{index}"
    env = dict(os.environ, KWOK_WORKDIR=str(workdir))
    argv = [str(kwokctl), "create", "cluster", f"--name={name}", "--runtime=binary", "--quiet-pull",
            f"--kube-apiserver-binary={bins.kube_apiserver}", f"--kube-controller-manager-binary={bins.kube_controller_manager}",
            f"--kube-scheduler-binary={bins.kube_scheduler}", f"--kwok-controller-binary={bins.kwok}",
            f"--etcd-binary={bins.etcd}"]
    try:
        started = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-800:]
            raise RuntimeError(f"kwokctl create cluster failed ({done.returncode}): {tail}")
        kube = connect(workdir / "clusters" / name / "kubeconfig.yaml")
        for node in topo.nodes():
            kube.core.create_node(body=node.to_node_object())
        nodes_ready(kube, {n.name for n in topo.nodes()})
        seconds = time.monotonic() - started
        kube.api.close()
    finally:
        subprocess.run([str(kwokctl), "delete", "cluster", f"--name={name}"], env=env, capture_output=True, timeout=120,
                       check=False)  # best effort: the next run creates its own cluster
    print(f"kwokctl run {index}: {topo.node_count} nodes Ready in {seconds:.2f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.start_vs_kwokctl", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--zones", default="3")
    p.add_argument("--nodes-per-zone", type=int, default=2)
    p.add_argument("--only", choices=("pvchaos", "kwokctl"))
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    p.add_argument("--node-lease-seconds", type=int, default=0, help="0: by size (timings_for)")
    p.add_argument("--grace-seconds", type=int, default=0, help="0: by size (timings_for)")
    args = p.parse_args(argv)
    try:
        if args.runs < 1:
            raise ValueError("--runs must be at least 1")
        topo = Topology.parse(args.zones, args.nodes_per_zone)
        pvchaos_config("check", topo, args.k8s_version, args.node_lease_seconds,
                       args.grace_seconds)  # bad input: one line, before anything runs
        bins = ensure_binaries(args.k8s_version)  # untimed
        kwokctl = None if args.only == "pvchaos" else build_kwokctl()
    except (ValueError, BuildError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    times: dict[str, list[float]] = {"pvchaos": [], "kwokctl": []}
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as tmp:
        os.environ["PVCHAOS_STATE_DIR"] = str(Path(tmp) / "state")  # our clusters only, never anyone else's
        for i in range(1, args.runs + 1):
            if args.only != "kwokctl":
                times["pvchaos"].append(run_pvchaos(i, topo, bins, args.k8s_version,
                                                   args.node_lease_seconds, args.grace_seconds))
            if kwokctl is not None:
                workdir = Path(tmp) / f"kwok-{i}"
                try:
                    times["kwokctl"].append(run_kwokctl(i, topo, bins, kwokctl, workdir))
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"kwokctl run {i}: could not run: {exc}", flush=True)
                shutil.rmtree(workdir, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in times.items() if v}
    for k, m in medians.items():
        print(f"{k}: median {m:.2f} s over {len(times[k])} runs (min {min(times[k]):.2f}, max {max(times[k]):.2f})")
    if len(medians) == 2:
        print(f"pvchaos / kwokctl = {medians['pvchaos'] / medians['kwokctl']:.2f} "
              f"({topo.node_count} nodes, load average now {os.getloadavg()[0]:.1f})")
    ok = medians.get("pvchaos", 0.0) <= TARGET_SECONDS or topo.node_count > 6
    if len(medians) == 2:
        ok = ok and medians["pvchaos"] < medians["kwokctl"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

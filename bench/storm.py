"""PVC storm: N nodes over Z zones, P pods with claims (mixed kinds), timed and judged.

Starts a local cluster of its own (kube-controller-manager and kube-scheduler client
QPS/burst raised, as ClusterLoader2 set-ups do), runs pvchaos.kit.storm on it, prints
what was measured and downs the cluster, also on failure or Ctrl-C.

    .venv/bin/python -m bench.storm                          # 1000 nodes, 3 zones, 2000 pods
    .venv/bin/python -m bench.storm --nodes 60 --pods 120 --chaos
    .venv/bin/python -m bench.storm --curve 100x500,300x1000,1000x2000 --png docs/img/storm-growth.png

Exits 0 when the invariants held and (without --chaos, at 1000 nodes / 2000 pods) the
storm met its 120 s target; 1 otherwise; 2 for bad input (one line, nothing started).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig, sized
from pvchaos.clusters.local.profiles import CpuProfiles
from pvchaos.clusters.topology import Topology
from pvchaos.drivers.driver import HarnessDriver
from pvchaos.kit.growth import growth_line, plot
from pvchaos.kit.storm import StormResult, run_storm
from pvchaos.kit.storm_plan import (
    STORM_BURST,
    STORM_NODES_TO_SCORE,
    STORM_QPS,
    StormShape,
    memory_refusal,
    parse_size,
    zone_names,
)
from pvchaos.kit.workspace import Workspace
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import connect
from pvchaos.run_config import available_memory_mib
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET = (1000, 2000, 120.0)  # nodes, pods, seconds: the done-when


def storms(args: argparse.Namespace) -> list[tuple[StormShape, LocalClusterConfig]]:
    """The storms asked for and the cluster of each, checked before anything starts
    (ValueError: one line)."""
    zones = zone_names(args.zones)
    sizes = [parse_size(s) for s in args.curve.split(",")] if args.curve else [(args.nodes, args.pods)]
    try:
        mix = tuple(float(x) for x in args.mix.split(","))
    except ValueError:
        raise ValueError(f"--mix {args.mix!r}: four numbers, wffc,immediate,local,sts") from None
    out = [StormShape(nodes=n, zones=zones, pods=p, extra_claim_every=args.extra_claim_every, mix=mix)  # type: ignore[arg-type]
           for n, p in sizes]
    for shape in out:
        if (why := memory_refusal(shape, available_memory_mib())) is not None:
            raise ValueError(why)
    return [(shape, _cluster_config(shape, args, i)) for i, shape in enumerate(out)]


def _cluster_config(shape: StormShape, args: argparse.Namespace, index: int) -> LocalClusterConfig:
    cfg = LocalClusterConfig(name=f"storm-{index}", k8s_version=args.k8s_version,
                             topology=Topology(zones=shape.zones, nodes_per_zone=shape.nodes_per_zone),
                             client_qps=args.qps, client_burst=args.burst, profiling=args.profile is not None,
                             nodes_to_score_percent=args.nodes_to_score)
    return sized(cfg)  # past 100 nodes: upstream's lease, grace, monitor period and PV resync


def one_storm(shape: StormShape, cfg: LocalClusterConfig, args: argparse.Namespace, index: int) -> StormResult:
    local = LocalCluster(cfg, binaries=ensure_binaries(args.k8s_version))
    profiles: CpuProfiles | None = None
    try:
        handle = local.up()
        kube = connect(handle.kubeconfig)
        cleanup = Cleanup("storm bench")
        try:
            ws = Workspace(kube, handle, "storm", cleanup, HarnessDriver(handle))
            profiles = CpuProfiles(handle.directory, args.profile / f"storm-{index}") if args.profile else None
            result = run_storm(ws, shape, chaos=args.chaos, timeout=args.timeout, baseline=not args.chaos,
                               observe=(lambda: profiles) if profiles else nullcontext)
        finally:
            kube.api.close()  # the cluster is removed whole: no object-by-object cleanup
    finally:
        local.down()
    for line in result.lines() + (profiles.summaries() if profiles else []):
        print(line, flush=True)
    return result


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.storm", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=TARGET[0])
    p.add_argument("--zones", type=int, default=3)
    p.add_argument("--pods", type=int, default=TARGET[1])
    p.add_argument("--mix", default="0.4,0.2,0.2,0.2",
                   help="shares of wffc,immediate,local,sts pods (e.g. 1,0,0,0: WaitForFirstConsumer zonal only)")
    p.add_argument("--extra-claim-every", type=int, default=0, help="every k-th WFFC pod gets a second claim")
    p.add_argument("--chaos", action="store_true", help="a zone outage and a scheduler restart mid-storm")
    p.add_argument("--curve", default="", help="NODESxPODS,... : the storm at each size, then the growth line")
    p.add_argument("--png", type=Path, help="with --curve: write the growth plot here")
    p.add_argument("--qps", type=int, default=STORM_QPS)
    p.add_argument("--burst", type=int, default=STORM_BURST)
    p.add_argument("--nodes-to-score", type=int, default=STORM_NODES_TO_SCORE, metavar="PERCENT",
                   help="the scheduler's percentageOfNodesToScore (0: its adaptive default)")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--profile", type=Path, metavar="DIR",
                   help="CPU profiles of apiserver, controller-manager and scheduler during the storm, into DIR")
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = p.parse_args(argv)
    try:
        todo = storms(args)
    except ValueError as exc:
        print(f"bench.storm: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout`, `kill`: the same orderly teardown as Ctrl-C
    ensure_binaries(args.k8s_version)  # untimed
    results: list[StormResult] = []
    with tempfile.TemporaryDirectory(prefix="pvchaos-storm-") as state_dir:
        os.environ["PVCHAOS_STATE_DIR"] = state_dir  # our clusters only, never anyone else's
        try:
            for i, (shape, cfg) in enumerate(todo):
                results.append(one_storm(shape, cfg, args, i))
        except ClusterError as exc:
            print(f"bench.storm: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("bench.storm: interrupted; the cluster is down", file=sys.stderr)
            return 130
    ok = all(r.completed and not r.violations for r in results)
    if len(results) > 1:
        print(growth_line(results))
        if args.png:
            print(f"plot: {plot(results, args.png)}")
    for r in results:
        if (r.nodes >= TARGET[0] and r.pods >= TARGET[1]) and not args.chaos:
            met = r.storm_seconds <= TARGET[2]
            print(f"target {TARGET[0]} nodes / {TARGET[1]} pods in <= {TARGET[2]:.0f}s: "
                  f"{'met' if met else 'MISSED'} ({r.storm_seconds:.1f}s)")
            ok = ok and met
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The kind backend against the local one, side by side in one run: seconds to a Ready
3-zone cluster (3 x 2 workers), the offline node image's build time (cold and cached),
and the peak memory of the node containers.

    .venv/bin/python -m bench.kind_start [--runs 3] [--cold]

"Cold" removes this version's node image, the base image and the rootfs tarball first,
so debootstrap, the base import and the assembly all run (Go binaries stay cached: the
local backend's build is measured elsewhere). Without --cold the image build is timed
as a rebuild of the node layer on a cached base. The last line holds every figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.cluster_start import one_run as local_run
from pvchaos.clusters.kind import KindBackend, kind_containers
from pvchaos.clusters.topology import Topology
from pvchaos.tools.build import cache_root, ensure_binaries
from pvchaos.tools.docker_engine import Engine, docker, ensure_engine, stop_engine
from pvchaos.tools.nodeimage.build import build_node_image, ensure_kind
from pvchaos.tools.nodeimage.recipe import Recipe
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

MIB = 2**20


def container_peak_bytes(engine: Engine, container: str) -> int:
    """Peak memory of one container from its cgroup (v1 max_usage, v2 memory.peak)."""
    cid = docker(engine, ["inspect", "--format", "{{.Id}}", container]).stdout.strip()
    for path in (Path(f"/sys/fs/cgroup/memory/docker/{cid}/memory.max_usage_in_bytes"),
                 Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.peak"),
                 Path(f"/sys/fs/cgroup/docker/{cid}/memory.peak")):
        if path.exists():
            return int(path.read_text().split()[0])
    return 0


def time_image(engine: Engine, version: str, cold: bool) -> tuple[float, float]:
    """(build seconds, cached lookup seconds) of the node image."""
    recipe = Recipe(version)
    docker(engine, ["rmi", recipe.tag])
    if cold:
        docker(engine, ["rmi", recipe.base_tag])
        (cache_root() / "nodeimage" / f"rootfs-{recipe.suite}-{recipe.base_digest()}.tar").unlink(missing_ok=True)
    start = time.monotonic()
    build_node_image(engine, version)
    built = time.monotonic() - start
    start = time.monotonic()
    build_node_image(engine, version)
    return built, time.monotonic() - start


def kind_run(index: int, engine: Engine, version: str) -> tuple[float, int]:
    backend = KindBackend(cluster=f"bench-{index}-{os.getpid()}", k8s_version=version, engine=engine,
                          topology=Topology(zones=("zone-a", "zone-b", "zone-c"), nodes_per_zone=2))
    try:
        start = time.monotonic()
        backend.up()
        seconds = time.monotonic() - start
        peaks = {c: container_peak_bytes(engine, c) for c in kind_containers(backend.cluster, backend.topology).values()}
    finally:
        backend.down(keep_engine=True)
    total = sum(peaks.values())
    print(f"kind run {index}: Ready in {seconds:.1f} s; node containers peak {total / MIB:.0f} MiB "
          f"(largest {max(peaks.values()) / MIB:.0f} MiB)", flush=True)
    return seconds, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kind_start", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cold", action="store_true", help="also rebuild the rootfs and base image")
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    ensure_binaries(args.k8s_version)
    ensure_kind()
    engine = ensure_engine()
    try:
        built, cached = time_image(engine, args.k8s_version, args.cold)
        with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as state_dir:
            os.environ["PVCHAOS_STATE_DIR"] = state_dir
            kind = [kind_run(i, engine, args.k8s_version) for i in range(1, args.runs + 1)]
            local = [local_run(i, args.k8s_version) for i in range(1, args.runs + 1)]
    finally:
        stop_engine(engine)
    kind_median = statistics.median(s for s, _ in kind)
    local_median = statistics.median(s for s, _ in local)
    peak = max(b for _, b in kind)
    print(f"kind: Ready 3-zone cluster median {kind_median:.1f} s over {len(kind)} runs "
          f"(local backend {local_median:.1f} s; kind/local {kind_median / local_median:.1f}x); "
          f"node image build {'cold' if args.cold else 'node layer'} {built:.0f} s, cached {cached:.2f} s; "
          f"node containers peak {peak / MIB:.0f} MiB (local cluster {max(b for _, b in local) / MIB:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

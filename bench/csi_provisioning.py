"""What real CSI costs: time to provision WaitForFirstConsumer claims through upstream's
external-provisioner and our driver, next to the old test double, on fresh local clusters.

Each run starts one fresh cluster per provisioner (`csi`, `test-double`), creates N
claims of a WaitForFirstConsumer class, each with a pod, all at once, and times from the
first create to every claim Bound (a watch, `pvchaos.kube.wait`). Cluster start is not
timed. The two provisioners have the same client budget (100 qps, burst 200), so the
ratio is what the CSI path itself adds: a gRPC call per volume, the sidecar's own queue
and its CSINode/Node reads for the accessibility requirements.

    .venv/bin/python -m bench.csi_provisioning [--runs 3] [--claims 100]

Prints the median time-to-all-Bound of each provisioner and the ratio CSI / test double;
exits 1 when CSI is slower than TARGET_RATIO times the double.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import PROVISIONER_KINDS, LocalClusterConfig
from pvchaos.kube import builders as b
from pvchaos.kube import kinds, naming
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.wait import wait_for_state
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET_RATIO = 1.5


def provision_once(kube: Kube, provisioner: str, claims: int, timeout: float) -> float:
    """Seconds from the first create to all `claims` Bound."""
    namespace = naming.unique("csibench")
    kinds.create(kube, {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace, "labels": naming.owned_labels()}})
    sc = kinds.create(kube, b.storage_class(naming.unique("wffc"), provisioner, "WaitForFirstConsumer",
                                            labels=naming.owned_labels()))["metadata"]["name"]

    def one(i: int) -> None:
        kinds.create(kube, b.persistent_volume_claim(f"data-{i}", "1Gi", sc), namespace)
        kinds.create(kube, b.pod(f"app-{i}", (f"data-{i}",)), namespace)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(claims)))
    bound: set[str] = set()

    def note(key: str, claim: object) -> None:
        if isinstance(claim, dict) and o.phase(claim) == "Bound":
            bound.add(key)

    wait_for_state(kube, "PersistentVolumeClaim", lambda _: True if len(bound) >= claims else None,
                   f"all {claims} claims Bound", namespace, timeout=timeout, seen=note)
    return time.monotonic() - started


def run_one(kind: str, claims: int, timeout: float, k8s_version: str) -> float:
    """A fresh cluster provisioning with `kind`, timed once, then removed."""
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as state_dir:
        old_state = os.environ.get("PVCHAOS_STATE_DIR")
        os.environ["PVCHAOS_STATE_DIR"] = state_dir  # our clusters only, never anyone else's
        local = LocalCluster(LocalClusterConfig(name=f"bench-csi-{secrets.token_hex(3)}", k8s_version=k8s_version,
                                                provisioner_kind=kind))
        try:
            handle = local.up()
            kube = connect(handle.kubeconfig)
            try:
                assert handle.zonal_class_provisioner is not None
                return provision_once(kube, handle.zonal_class_provisioner, claims, timeout)
            finally:
                kube.api.close()
        finally:
            local.down()
            if old_state is None:
                os.environ.pop("PVCHAOS_STATE_DIR", None)
            else:
                os.environ["PVCHAOS_STATE_DIR"] = old_state


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.csi_provisioning", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--claims", type=int, default=100, help="WaitForFirstConsumer claims, each with a pod")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take to bind every claim")
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = p.parse_args(argv)
    if args.runs < 1 or args.claims < 1:
        print("bench.csi_provisioning: --runs and --claims must be at least 1", file=sys.stderr)
        return 2
    ensure_binaries(args.k8s_version)  # untimed: a warm cache is the normal case
    times: dict[str, list[float]] = {k: [] for k in PROVISIONER_KINDS}
    for run in range(1, args.runs + 1):
        for kind in PROVISIONER_KINDS:  # interleaved, so machine load hits both alike
            seconds = run_one(kind, args.claims, args.timeout, args.k8s_version)
            times[kind].append(seconds)
            print(f"run {run}/{args.runs} {kind}: {args.claims} claims Bound in {seconds:.2f} s", flush=True)
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = medians["csi"] / medians["test-double"]
    print(f"\n{args.claims} WaitForFirstConsumer claims with pods, median of {args.runs} runs "
          f"(time to all Bound):")
    for kind, values in times.items():
        print(f"  {kind:12s} median {medians[kind]:.2f} s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"  ratio csi / test-double: {ratio:.2f} (target <= {TARGET_RATIO})")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())

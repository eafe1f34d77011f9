"""What a node plugin DaemonSet and its kubelet do for a node that joins a local cluster:
the node's CSI annotations and its CSINode entry for our driver (node id, topology keys,
allocatable count), written once per node as soon as the Node appears.

Why a process of its own: the nodes present at start get both from the cluster's start
(cluster.py `_create_nodes`), but a node added later (through the API as a KWOK node, by a
test or a user) had none, so the driver's topology and limit never reached the scheduler
and no dynamic volume could land there (issue 36). It runs beside the CSI stack, recorded
and stopped like every component.

Once per node (by uid): a test that later takes the driver out of a CSINode (a node plugin
deregistered, chaos/csi_registration.py) is not undone behind its back.

    python -m pvchaos.clusters.local.csi_registrar --kubeconfig K --max-volumes-per-node N
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from pvchaos.clusters import csi
from pvchaos.clusters.csi import CsiOptions
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube, connect

READY_LINE = "csi-registrar: watching nodes"
COMPONENT = "csi-registrar"


def argv(kubeconfig: Path, options: CsiOptions) -> list[str]:
    """The registrar's command line: this interpreter, this module."""
    return [sys.executable, "-m", __name__, f"--kubeconfig={kubeconfig}",
            f"--max-volumes-per-node={options.max_volumes_per_node}"]


def registration(csinode: dict[str, Any] | None, node: str, options: CsiOptions) -> dict[str, Any] | None:
    """The CSINode to write for `node` (None: it already lists our driver) (pure)."""
    want = csi.csi_node_object(node, options)
    if csinode is None:
        return want
    drivers = list((csinode.get("spec") or {}).get("drivers") or [])
    if any(d.get("name") == csi.DRIVER_NAME for d in drivers):
        return None
    return {**csinode, "spec": {**(csinode.get("spec") or {}), "drivers": [*drivers, *want["spec"]["drivers"]]}}


def register(kube: Kube, node: str, options: CsiOptions) -> None:
    """Annotate the Node and write its CSINode, as the kubelet does after a registration."""
    kinds.patch(kube, "Node", node, {"metadata": {"annotations": csi.node_annotations(node)}})
    existing = kinds.get(kube, "CSINode", node)
    body = registration(existing, node, options)
    if body is None:
        return
    if existing is None:
        kinds.create(kube, {**body, "kind": "CSINode"})
    else:
        kinds.replace(kube, {**body, "kind": "CSINode"})


def run(kube: Kube, options: CsiOptions) -> None:
    done: set[str] = set()
    nodes, version = kinds.list_objects(kube, "Node")
    print(READY_LINE, flush=True)
    pending = list(nodes)
    while True:
        for node in pending:
            uid, name = node["metadata"].get("uid"), node["metadata"]["name"]
            if uid in done or node["metadata"].get("deletionTimestamp"):
                continue
            try:
                register(kube, name, options)
                done.add(uid)
                print(f"csi-registrar: {csi.DRIVER_NAME} registered on node {name}", flush=True)
            except ApiException as exc:  # a node deleted meanwhile, a conflict: the next event retries
                print(f"csi-registrar: node {name}: {exc.status} {exc.reason}", flush=True)
        pending = []
        try:
            for kind, node in kinds.watch_objects(kube, "Node", None, version, 300):
                version = node["metadata"].get("resourceVersion", version)
                if kind in ("ADDED", "MODIFIED") and node["metadata"].get("uid") not in done:
                    pending.append(node)
                    break
            else:
                nodes, version = kinds.list_objects(kube, "Node")  # the watch ended: list again
                pending = [n for n in nodes if n["metadata"].get("uid") not in done]
        except ApiException as exc:
            if exc.status != 410:
                raise
            nodes, version = kinds.list_objects(kube, "Node")
            pending = [n for n in nodes if n["metadata"].get("uid") not in done]
        except Exception as exc:  # noqa: BLE001 - the apiserver blinked (an upgrade restarts it): list again
            print(f"csi-registrar: watch: {type(exc).__name__}: {exc}", flush=True)
            time.sleep(1)
            nodes, version = kinds.list_objects(kube, "Node")
            pending = [n for n in nodes if n["metadata"].get("uid") not in done]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--max-volumes-per-node", type=int, required=True)
    args = parser.parse_args(argv)
    run(connect(args.kubeconfig), CsiOptions(max_volumes_per_node=args.max_volumes_per_node))
    return 0


if __name__ == "__main__":
    sys.exit(main())

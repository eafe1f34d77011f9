"""The harness CSI driver's control files (`pvchaos-csi --control-dir`): small JSON maps
the driver re-reads on every call (capacity.json, moves.json), so a fault changes the
storage system's state without restarting anything. Written whole (temp file + rename),
so the driver never reads half a file. And what its node plugin was asked: the calls log
inside a node (kind), read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle, NodeStorageFaults
from pvchaos.clusters.kind_csi import NODE_CALLS_LOG


def control_file(cluster: ClusterHandle, name: str) -> Path:
    """`<control dir>/<name>` of the cluster's driver; a cluster without our driver is an error."""
    if cluster.directory is None or not csi.paths_for(cluster.directory).root.is_dir():
        raise ClusterError(f"cluster {cluster.name}: no pvchaos-csi control directory (not the harness's CSI driver)")
    return csi.paths_for(cluster.directory).control_dir / name


def read_map(path: Path) -> dict[str, str]:
    """The file's map; a missing or unreadable file is an empty one (the driver's default)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_map(path: Path, values: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(values), encoding="utf-8")
    tmp.replace(path)  # the driver never reads half a file


def node_calls(cluster: ClusterHandle, node: str) -> list[dict[str, Any]]:
    """pvchaos-csi's node plugin calls on `node` (its calls log, one JSON object a line:
    method, request, code...), where the harness reaches the node's files (kind); a line
    that is not JSON (one being written) is left out."""
    if not isinstance(cluster.faults, NodeStorageFaults):
        raise ClusterError(f"cluster {cluster.name}: backend {cluster.backend} cannot read a node's files")
    calls = []
    for line in cluster.faults.node_exec(node, f"cat {NODE_CALLS_LOG} 2>/dev/null || true").splitlines():
        try:
            call = json.loads(line)
        except ValueError:
            continue
        if isinstance(call, dict):
            calls.append(call)
    return calls

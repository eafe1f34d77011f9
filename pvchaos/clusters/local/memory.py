"""Resident memory of a local cluster's processes, read from /proc (the storm and the
start benchmarks).

The KWOK controllers are summed as one entry, "kwok", however many there are (one per
node, or a few per zone), so results stay comparable across layouts.
"""

from __future__ import annotations

from pathlib import Path

from pvchaos.clusters.local.registry import ClusterState


def status_kib(pid: int, field: str = "VmRSS") -> int:
    """A memory line of /proc/<pid>/status in KiB (VmRSS now, VmHWM the peak); 0 when
    the process has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def component_group(component: str) -> str:
    return "kwok" if component.startswith("kwok") else component


def cluster_rss_mib(directory: Path) -> dict[str, float]:
    """MiB resident per component group of the cluster recorded in `directory`."""
    state = ClusterState.load(directory)
    out: dict[str, float] = {}
    for component, rec in state.processes.items():
        group = component_group(component)
        out[group] = out.get(group, 0.0) + status_kib(rec.pid) / 1024
    return out

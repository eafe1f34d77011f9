"""The control plane's command lines as they run: read from the processes themselves
on the local backend (/proc/PID/cmdline), from the static pods on kind and on existing
kubeadm-style clusters. What the report shows is then what ran, not what was meant
(pvchaos/conformance/command_lines.py judges the difference).
"""

from __future__ import annotations

from pathlib import Path

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.local.registry import ClusterState
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube
from pvchaos.kube.errors import ApiError

COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def _proc_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a] or None


def local_command_lines(directory: Path) -> dict[str, list[str]]:
    """Each control-plane process of a local cluster, as the kernel has its arguments."""
    state = ClusterState.load(directory)
    out = {}
    for name, rec in state.processes.items():
        if name in COMPONENTS:
            out[name] = _proc_cmdline(rec.pid) or list(rec.argv)
    return out


def static_pod_command_lines(kube: Kube) -> dict[str, list[str]]:
    """The control-plane static pods' command and args (kind, kubeadm clusters); empty
    where they are not visible (managed control planes)."""
    pods, _ = kinds.list_objects(kube, "Pod", "kube-system", label_selector="tier=control-plane")
    out = {}
    for pod in pods:
        component = (pod.get("metadata", {}).get("labels") or {}).get("component", "")
        containers = pod.get("spec", {}).get("containers") or []
        if component in COMPONENTS and containers:
            out[component] = [*(containers[0].get("command") or []), *(containers[0].get("args") or [])]
    return out


def command_lines(handle: ClusterHandle, kube: Kube) -> dict[str, list[str]]:
    """The running control plane's command lines, however this backend can read them."""
    # A cluster of host processes keeps their record in its directory (local: state.json).
    if handle.directory is not None and (handle.directory / "state.json").exists():
        return local_command_lines(handle.directory)
    try:
        return static_pod_command_lines(kube)
    except ApiError:
        return {}

"""The control plane's command lines as they run: read from the processes themselves
on the local backend (/proc/PID/cmdline), from the static pods on kind and on existing
kubeadm-style clusters. What the report shows is then what ran, not what was meant
(pvchaos/conformance/command_lines.py judges the difference).

The harness's CSI stack (pvchaos-csi's controller, external-provisioner and
external-attacher) runs as host processes on local and kind: their argv comes from /proc
too, and whether each still runs is known here, so a failed wait can name the sidecar
that is not running instead of guessing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.common.processes import ProcessRecord, is_ours
from pvchaos.clusters.local.registry import ClusterState
from pvchaos.conformance import command_lines as cl
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


def csi_processes(directory: Path | None) -> dict[str, ProcessRecord]:
    """The records of a cluster's host-side CSI stack: the local registry (state.json)
    or kind's ProcessBook (csi/processes.json); empty where the harness runs none."""
    if directory is None:
        return {}
    out: dict[str, ProcessRecord] = {}
    if (directory / "state.json").exists():
        try:
            out = {k: v for k, v in ClusterState.load(directory).processes.items() if k in csi.COMPONENTS}
        except (OSError, ValueError, KeyError):
            out = {}
    book = csi.CsiPaths(directory).root / "processes.json"
    if not out and book.exists():
        try:
            data = json.loads(book.read_text())
            out = {k: ProcessRecord.from_json(v) for k, v in data.items() if k in csi.COMPONENTS}
        except (OSError, ValueError, KeyError):
            out = {}
    return out


def csi_command_lines(directory: Path | None) -> dict[str, list[str]]:
    """Each CSI component's argv as the kernel has it (the recorded one once it is gone)."""
    return {name: _proc_cmdline(rec.pid) or list(rec.argv) for name, rec in csi_processes(directory).items()}


def csi_not_running(directory: Path | None) -> list[str]:
    """The CSI components the harness started for this cluster that no longer run
    (their pid is gone, a zombie, or another program): empty when all run, or when
    the harness runs no stack here and cannot know."""
    marker = str(directory)
    return [name for name, rec in csi_processes(directory).items() if not is_ours(rec, marker)]


# Extra flags a local cluster's configuration appends to a component (`--kcm-flag`, a
# plugin's hook): given by someone, but not the harness's own choice.
_EXTRA_FLAGS = {"kube-controller-manager": "extra_kcm_flags", "kube-apiserver": "extra_apiserver_flags"}


def harness_command_lines(directory: Path | None) -> dict[str, list[str]]:
    """What the harness itself gave each process it started (local control plane and the
    CSI stack on local and kind): the recorded argv without the configuration's extra
    flags. Empty where the harness starts no process (kind's and existing control planes)."""
    if directory is None:
        return {}
    out = {name: list(rec.argv) for name, rec in csi_processes(directory).items()}
    if not (directory / "state.json").exists():
        return out
    try:
        state = ClusterState.load(directory)
    except (OSError, ValueError, KeyError):
        return out
    config = state.settings.get("config") or {}
    for name, rec in state.processes.items():
        if name in COMPONENTS:
            extras = list(config.get(_EXTRA_FLAGS.get(name, ""), None) or [])
            argv = list(rec.argv)
            if extras and argv[-len(extras):] == extras:
                argv = argv[:-len(extras)]
            out[name] = argv
    return out


def scheduler_config(argv: list[str]) -> tuple[dict[str, Any] | None, str]:
    """The KubeSchedulerConfiguration kube-scheduler was started with, as it reads its
    `--config` file here (local: a host file), and where it came from. (None, why) when
    there is no --config (upstream's defaults) or the file is not readable from here
    (kind: inside the node)."""
    path = cl.effective_flags(argv).get("config")
    if not path:
        return None, "no --config: upstream's default profile"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return None, f"--config {path} not readable here ({type(exc).__name__})"
    return (data if isinstance(data, dict) else None), f"--config {path}"

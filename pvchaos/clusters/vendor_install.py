"""A vendor's CSI driver installed into a cluster: images into every node, manifests
applied in order, bounded waits for the driver to be usable, and the clean uninstall.

The kind backend installs a vendor's package this way into every cluster it starts for a
run with one (`KindBackend.storage`, clusters/storage.py `VendorStorage`): the vendor's
driver is the only storage there. `pvchaos certify` uses the rest: GetPluginInfo on a node,
the uninstall and the leftovers check. Everything else goes through `kubectl`
(the version's own, built with the cluster), because a vendor's manifests may hold any
kind, and `kubectl apply` is what the vendor's own instructions say.

Each wait has one bound; on timeout it raises one line naming what is missing, and the
logs of the package's pods are written beside the report (`certify-logs/`).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.plugin_info import FIND_SOCKETS, PluginChoice, PluginInfo, candidate_sockets, choose_plugin, parse_info_line
from pvchaos.tools.build import BuildError, ensure_binaries
from pvchaos.tools.csi_driver import ensure_csi_driver
from pvchaos.tools.docker_engine import Engine, docker, last_line
from pvchaos.tools.nodeimage.build import ensure_kind

WAIT_TIMEOUT = 180.0
# in the node container (not /tmp: a tmpfs, which `docker cp` cannot see), removed after use
INFO_BINARY = "/usr/local/bin/pvchaos-csi-info"
OWNED_NAMESPACE_PREFIX = "pvchaos-"


def load_images(engine: Engine, cluster: str, archives: Sequence[Path]) -> None:
    """Every archive into every node's containerd (`kind load image-archive`)."""
    for archive in archives:
        proc = subprocess.run([str(ensure_kind()), "load", "image-archive", str(archive), "--name", cluster],
                              capture_output=True, text=True, timeout=600, env=engine.env(), check=False)
        if proc.returncode != 0:
            raise ClusterError(f"{archive}: not loadable into the nodes' containerd: {last_line(proc)}")


# a unix socket's path has room for 107 bytes; an emptyDir's socket under
# /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/ (a controller's, shared
# with its sidecars) is longer, and connect() refuses it (EINVAL): it is dialled through a
# short symlink, which connect() follows
SOCKET_PATH_MAX = 107
SHORT_LINK = "/run/pvchaos-info-{n}.sock"


def info_command(sock: str, n: int) -> str:
    """The shell line that asks one socket (pure): through a short symlink when its path is
    too long to dial, the link removed again whatever the answer."""
    ask = f"{INFO_BINARY} info --endpoint unix://{{path}} --timeout 10s"
    if len(sock.encode()) <= SOCKET_PATH_MAX:
        return ask.format(path=shlex.quote(sock))
    link = SHORT_LINK.format(n=n)
    return (f"ln -sf {shlex.quote(sock)} {link} && {ask.format(path=link)}; rc=$?; rm -f {link}; exit $rc")


def plugin_info(engine: Engine, container: str, node: str, driver: str) -> PluginChoice:
    """GetPluginInfo of `driver` as its node plugin on `node` (kind container `container`)
    answers it: `pvchaos-csi info` (static) copied into the node and run against every
    candidate socket under the kubelet's plugins directory, then removed. Never raises for
    what the driver does; a node that cannot be reached is a ClusterError."""

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return docker(engine, args, timeout=timeout)

    try:
        binary = ensure_csi_driver()
    except BuildError as exc:  # no Go here: certify falls back to the label, saying so
        raise ClusterError(f"pvchaos-csi not built: {exc}") from None
    try:  # the removal is registered before the copy
        copied = run("cp", str(binary), f"{container}:{INFO_BINARY}")
        if copied.returncode != 0:
            raise ClusterError(f"node {node}: cannot copy pvchaos-csi into {container}: {last_line(copied)}")
        found = run("exec", container, "sh", "-c", FIND_SOCKETS)
        answers: list[PluginInfo] = []
        failures: list[str] = []
        for n, sock in enumerate(candidate_sockets(found.stdout, driver)):
            proc = run("exec", container, "sh", "-c", info_command(sock, n))
            try:
                if proc.returncode != 0:
                    raise ValueError(last_line(proc))
                answers.append(replace(parse_info_line(proc.stdout), endpoint=f"unix://{sock}"))
            except ValueError as exc:
                failures.append(f"{sock}: {exc}")
        return choose_plugin(driver, node, answers, failures)
    finally:
        run("exec", container, "rm", "-f", INFO_BINARY)


@dataclass
class Kubectl:
    """kubectl of one version against one kubeconfig."""

    kubeconfig: Path
    k8s_version: str
    context: str | None = None
    _binary: Path | None = field(default=None, init=False, repr=False)

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if self._binary is None:
            self._binary = ensure_binaries(self.k8s_version, only=("kubernetes",)).kubectl
        ctx = ["--context", self.context] if self.context else []
        return subprocess.run([str(self._binary), "--kubeconfig", str(self.kubeconfig), *ctx, *args],
                              capture_output=True, text=True, timeout=timeout, check=False)

    def json(self, *args: str) -> dict[str, Any]:
        proc = self("get", *args, "-o", "json")
        if proc.returncode != 0:
            if "NotFound" in proc.stderr:
                return {}
            raise ClusterError(f"kubectl get {' '.join(args)}: {last_line(proc)}")
        data: dict[str, Any] = json.loads(proc.stdout)
        return data

    def items(self, *args: str) -> list[dict[str, Any]]:
        return list(self.json(*args).get("items") or [])


def apply_manifests(kubectl: Kubectl, manifests: Sequence[Path]) -> None:
    for path in manifests:
        proc = kubectl("apply", "-f", str(path), timeout=180)
        if proc.returncode != 0:
            raise ClusterError(f"manifest {path.name}: kubectl apply failed: {last_line(proc)}")
        _log(f"applied {path.name}")


def delete_manifests(kubectl: Kubectl, manifests: Sequence[Path]) -> list[str]:
    """In reverse order; returns what could not be deleted."""
    problems = []
    for path in reversed(manifests):
        proc = kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait=true", "--timeout=120s", timeout=180)
        if proc.returncode != 0:
            problems.append(f"manifest {path.name}: kubectl delete: {last_line(proc)}")
    return problems


def _workload_ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    if obj.get("kind") == "DaemonSet":
        want = int(status.get("desiredNumberScheduled") or 0)
        return want > 0 and int(status.get("numberReady") or 0) == want
    want = int((obj.get("spec") or {}).get("replicas", 1) or 0)
    return int(status.get("readyReplicas") or 0) >= want


def wait_installed(kubectl: Kubectl, driver: str, workloads: Sequence[tuple[str, str, str]],
                   logs_dir: Path, timeout: float = WAIT_TIMEOUT) -> float:
    """Until the CSIDriver exists, every worker's CSINode lists the driver, and every
    workload (kind, namespace, name) is Ready. Returns the seconds waited; on timeout one
    line naming what is missing (the pods' logs written to `logs_dir`)."""
    start = time.monotonic()
    missing: list[str] = []
    while True:
        missing = []
        if not kubectl.json("csidriver", driver):
            missing.append(f"CSIDriver {driver}")
        workers = [n["metadata"]["name"] for n in kubectl.items("nodes")
                   if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})]
        csinodes = {c["metadata"]["name"]: c for c in kubectl.items("csinodes")}
        unregistered = [w for w in workers
                        if not any(d.get("name") == driver
                                   for d in ((csinodes.get(w) or {}).get("spec") or {}).get("drivers") or [])]
        if unregistered:
            missing.append(f"registration of {driver} in the CSINode of {', '.join(sorted(unregistered))}")
        for kind, namespace, name in workloads:
            obj = kubectl.json(kind.lower(), name, "-n", namespace)
            if not obj or not _workload_ready(obj):
                missing.append(f"{kind} {namespace}/{name} Ready")
        if not missing:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            break
        time.sleep(2)
    where = write_pod_logs(kubectl, sorted({ns for _, ns, _ in workloads}), logs_dir)
    raise ClusterError(f"driver {driver} not installed within {timeout:.0f}s: missing {'; '.join(missing)} "
                       f"(pod logs: {where})")


def write_pod_logs(kubectl: Kubectl, namespaces: Sequence[str], logs_dir: Path) -> Path:
    """Every container's log of the package's pods, one file per container, and `kubectl
    describe pods` of each namespace."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    for ns in namespaces:
        (logs_dir / f"{ns}-describe.txt").write_text(kubectl("describe", "pods", "-n", ns).stdout)
        for pod in kubectl.items("pods", "-n", ns):
            name = pod["metadata"]["name"]
            for c in (pod.get("spec") or {}).get("containers") or []:
                proc = kubectl("logs", "-n", ns, name, "-c", c["name"], "--tail=200")
                (logs_dir / f"{ns}-{name}-{c['name']}.log").write_text(proc.stdout + proc.stderr)
    return logs_dir


def cluster_objects(kubectl: Kubectl, driver: str, storage_class: str) -> dict[str, Any]:
    """What discovery reads: the CSIDriver, CSINodes, Nodes, the StorageClass, the version."""
    version = json.loads(kubectl("version", "-o", "json").stdout or "{}").get("serverVersion", {}).get("gitVersion", "")
    return {"csidriver": kubectl.json("csidriver", driver) or None, "csinodes": kubectl.items("csinodes"),
            "nodes": kubectl.items("nodes"), "storage_class": kubectl.json("storageclass", storage_class) or None,
            "k8s_version": version}


def leftovers(kubectl: Kubectl, driver: str, timeout: float = 120.0) -> list[str]:
    """After the run: every PVC in the run's namespaces, every PV of the driver and every
    VolumeAttachment of it, waited for (bounded) to be gone; what remains, one line each."""
    deadline = time.monotonic() + timeout
    while True:
        left = [f"PersistentVolumeClaim {c['metadata']['namespace']}/{c['metadata']['name']}"
                for c in kubectl.items("pvc", "-A") if c["metadata"]["namespace"].startswith(OWNED_NAMESPACE_PREFIX)]
        left += [f"PersistentVolume {p['metadata']['name']} ({(p.get('status') or {}).get('phase')})"
                 for p in kubectl.items("pv") if ((p.get("spec") or {}).get("csi") or {}).get("driver") == driver]
        left += [f"VolumeAttachment {v['metadata']['name']} (node {v['spec'].get('nodeName')})"
                 for v in kubectl.items("volumeattachments") if (v.get("spec") or {}).get("attacher") == driver]
        if not left or time.monotonic() > deadline:
            return [f"left behind by the run: {x}" for x in left]
        time.sleep(3)


def _log(msg: str) -> None:
    print(f"[pvchaos certify] {msg}", file=sys.stderr, flush=True)

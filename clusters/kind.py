"""Multi-zone kind clusters: a kind config generated from `Topology`, and a backend that
shells out to `kind` and `docker`.

Why shell out: the kind CLI is kind's supported interface (its Go cluster API keeps the
config types internal), and Docker is only reachable through its CLI here. Every command
goes through `run()`, one small function, so tests can record the exact command lines on
machines without a Docker engine (which is every machine this was written on: the
backend has not been run against a real Docker host, see docs/backends.md).

Node failure is `docker pause` (the kubelet freezes, its Lease stops being renewed, the
node-lifecycle controller sees it), return is `docker unpause`. A control-plane component
is stopped by moving its static-pod manifest out of the kubelet's manifest directory
(`crictl stop` alone would be undone by the kubelet at once), and started by moving it back.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from clusters.backend import Capability, ClusterError, ClusterHandle
from clusters.local.config import GATE_FIRST_MINOR, MUTABLE_PV_GATE, parse_feature_gates
from clusters.local.registry import state_root
from clusters.topology import HOSTNAME_KEY, Topology

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "kind-config"
DEFAULT_CONFIG_FILE = CONFIG_DIR / "multizone.yaml"
IMAGES_FILE = CONFIG_DIR / "images.yaml"

KIND_VERSION = "v0.33.0"
DEFAULT_KIND_K8S = "v1.35"  # first minor with MutablePVNodeAffinity, as the local backend
API_VERSION = "kind.x-k8s.io/v1alpha4"
# Short node-loss detection, as on the local backend (upstream default grace is 50 s).
DEFAULT_KCM_FLAGS: dict[str, str] = {"node-monitor-grace-period": "8s", "node-monitor-period": "1s"}
# The kubelet must renew its Lease well inside that grace period: it renews every quarter
# of nodeLeaseDurationSeconds (upstream default 40 s, i.e. every 10 s, longer than 8 s).
DEFAULT_KUBELET: dict[str, Any] = {"nodeLeaseDurationSeconds": 4, "nodeStatusUpdateFrequency": "2s"}
STANDARD_PROVISIONER = "rancher.io/local-path"  # kind's `standard` class (node image manifest)
PROVISIONERS = ("standard", "harness")
COMPONENTS = ("kube-scheduler", "kube-controller-manager")
WAIT = "120s"

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
_VERSION = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")
_KUBELET_ALLOWED = {"topology.kubernetes.io/zone", "topology.kubernetes.io/region", HOSTNAME_KEY,
                    "node.kubernetes.io/instance-type", "kubernetes.io/os", "kubernetes.io/arch"}


# ---- node images ---------------------------------------------------------------------

@dataclass(frozen=True)
class NodeImage:
    """One pinned kindest/node image and where its digest was checked."""

    minor: int
    tag: str
    image: str
    verified: str


@cache
def node_images() -> dict[int, NodeImage]:
    """The table in kind-config/images.yaml, keyed by Kubernetes minor."""
    data = yaml.safe_load(IMAGES_FILE.read_text())
    return {int(k.split(".")[1]): NodeImage(int(k.split(".")[1]), v["tag"], v["image"], v["verified"])
            for k, v in data["images"].items()}


def node_image(k8s_version: str) -> NodeImage:
    """`1.35`, `v1.35` or `v1.35.8` -> the image kind v0.33.0 publishes for that minor.
    A patch release other than the published one is refused: kind only builds one."""
    m = _VERSION.match(k8s_version)
    if not m:
        raise ValueError(f"kind: {k8s_version!r} is not a Kubernetes version (want v1.MINOR or v1.MINOR.PATCH)")
    images = node_images()
    minor = int(m.group(1))
    if minor not in images:
        known = ", ".join(f"v1.{k}" for k in sorted(images))
        raise ValueError(f"kind {KIND_VERSION}: no node image for v1.{minor}; published: {known}")
    img = images[minor]
    if m.group(2) is not None and f"v1.{minor}.{m.group(2)}" != img.tag:
        raise ValueError(f"kind {KIND_VERSION}: publishes {img.tag} for v1.{minor}, not v1.{minor}.{m.group(2)}")
    return img


# ---- config --------------------------------------------------------------------------

def default_gates(k8s_version: str) -> dict[str, bool]:
    """The gate the suites are about, on wherever it exists."""
    minor = node_image(k8s_version).minor
    return {MUTABLE_PV_GATE: True} if minor >= GATE_FIRST_MINOR[MUTABLE_PV_GATE] else {}


def _node_labels(labels: dict[str, str]) -> dict[str, str]:
    """Topology labels minus the hostname (the kubelet sets it to the kind node name);
    refuses labels the kubelet may not set on itself, since it would not start."""
    out = {}
    for key, value in labels.items():
        if key == HOSTNAME_KEY:
            continue
        prefix = key.split("/", 1)[0] if "/" in key else ""
        restricted = any(prefix == d or prefix.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
        allowed = key in _KUBELET_ALLOWED or prefix.endswith(("kubelet.kubernetes.io", "node.kubernetes.io"))
        if restricted and not allowed:
            raise ValueError(f"kind: node label {key!r} is in a namespace the kubelet may not set on itself")
        out[key] = value
    return out


def _patch(kind: str, body: dict[str, Any]) -> str:
    """A kubeadm config patch without apiVersion, so it applies to kubeadm v1beta3 (1.35)
    and v1beta4 (1.36+) alike; kind v0.33.0 converts map-style extraArgs for v1beta4."""
    return yaml.safe_dump({"kind": kind, **body}, sort_keys=False, default_flow_style=False)


def kind_config(topology: Topology | None = None, k8s_version: str = DEFAULT_KIND_K8S,
                feature_gates: dict[str, bool] | None = None, kcm_flags: dict[str, str] | None = None,
                kubelet: dict[str, Any] | None = None) -> dict[str, Any]:
    """A kind v1alpha4 Cluster: one control plane, then the topology's nodes as workers in
    order (kind names them `<cluster>-worker`, `<cluster>-worker2`, ...)."""
    topology = topology or Topology()
    image = node_image(k8s_version)
    gates = default_gates(k8s_version) if feature_gates is None else dict(feature_gates)
    for gate, first in GATE_FIRST_MINOR.items():
        if gates.get(gate) and image.minor < first:
            raise ValueError(f"kind: feature gate {gate} does not exist before v1.{first} (image {image.tag})")
    kcm = DEFAULT_KCM_FLAGS if kcm_flags is None else kcm_flags
    kubelet_cfg = DEFAULT_KUBELET if kubelet is None else kubelet
    patches = []
    if kcm:
        patches.append(_patch("ClusterConfiguration",
                              {"controllerManager": {"extraArgs": {k: str(v) for k, v in kcm.items()}}}))
    if kubelet_cfg:
        patches.append(_patch("KubeletConfiguration", dict(kubelet_cfg)))
    cfg: dict[str, Any] = {"kind": "Cluster", "apiVersion": API_VERSION}
    if gates:
        cfg["featureGates"] = gates
    if patches:
        cfg["kubeadmConfigPatches"] = patches
    nodes: list[dict[str, Any]] = [{"role": "control-plane", "image": image.image}]
    for spec in topology.nodes():
        nodes.append({"role": "worker", "image": image.image, "labels": _node_labels(spec.labels)})
    cfg["nodes"] = nodes
    return cfg


def kind_node_names(cluster: str, topology: Topology) -> dict[str, str]:
    """Topology node name -> kind node (and container) name, following kind's namer."""
    return {spec.name: f"{cluster}-worker{'' if i == 0 else i + 1}" for i, spec in enumerate(topology.nodes())}


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (kubeadm patches) as `|` blocks, so the file reads like kind's docs."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def render_yaml(config: dict[str, Any], k8s_version: str = DEFAULT_KIND_K8S) -> str:
    """The file kind reads, with a header saying where it came from."""
    header = (f"# Generated by clusters/kind.py: kind_config(Topology(), {k8s_version!r}).\n"
              "# Regenerate: .venv/bin/python -m clusters.kind > kind-config/multizone.yaml\n"
              "# Workers in order: kind names them <cluster>-worker, <cluster>-worker2, ...\n")
    return header + yaml.dump(config, Dumper=_LiteralDumper, sort_keys=False, default_flow_style=False)


# ---- commands ------------------------------------------------------------------------

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The one place `kind` and `docker` are executed; the caller judges the exit status."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=900)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


@dataclass
class KindFaults:
    """NodeFaults for a kind cluster: docker pause/unpause, static-pod manifests moved."""

    cluster: str
    runner: Runner = run

    @property
    def control_plane(self) -> str:
        return f"{self.cluster}-control-plane"

    def _node(self, node: str) -> str:
        if not node.startswith(f"{self.cluster}-"):
            raise KeyError(f"kind cluster {self.cluster}: {node!r} is not one of its nodes")
        return node

    def _docker(self, *args: str) -> str:
        proc = self.runner(["docker", *args])
        if proc.returncode != 0:
            raise ClusterError(f"docker {args[0]} {args[-1]}: {_last_line(proc)}")
        return proc.stdout.strip()

    def stop_node(self, node: str) -> None:
        """Freeze the node container: kubelet and runtime stop, nothing is deleted."""
        self._docker("pause", self._node(node))

    def stop_nodes(self, nodes: list[str]) -> None:
        """One `docker pause` for all: the containers freeze together."""
        if nodes:
            self._docker("pause", *(self._node(n) for n in nodes))

    def start_node(self, node: str) -> None:
        if self.node_stopped(node):
            self._docker("unpause", self._node(node))

    def node_stopped(self, node: str) -> bool:
        return self._docker("inspect", "--format", "{{.State.Paused}}", self._node(node)) == "true"

    def _manifests(self, component: str) -> tuple[str, str]:
        if component not in COMPONENTS:
            raise KeyError(f"kind cluster {self.cluster}: cannot stop {component!r}; known: {list(COMPONENTS)}")
        return (f"/etc/kubernetes/manifests/{component}.yaml",
                f"/etc/kubernetes/{component}.yaml.pvchaos-stopped")

    def stop_component(self, component: str) -> None:
        """The kubelet removes a static pod whose manifest is gone; idempotent."""
        live, parked = self._manifests(component)
        self._docker("exec", self.control_plane, "sh", "-c", f"if [ -f {live} ]; then mv {live} {parked}; fi")

    def start_component(self, component: str) -> None:
        live, parked = self._manifests(component)
        self._docker("exec", self.control_plane, "sh", "-c", f"if [ -f {parked} ]; then mv {parked} {live}; fi")


@dataclass
class KindBackend:
    """A harness-owned multi-zone kind cluster."""

    cluster: str = "pvchaos"
    topology: Topology = field(default_factory=Topology)
    k8s_version: str = DEFAULT_KIND_K8S
    feature_gates: dict[str, bool] | None = None
    kcm_flags: dict[str, str] | None = None
    provisioner: str = "standard"
    runner: Runner = run
    directory: Path | None = None
    name: str = "kind"

    def __post_init__(self) -> None:
        if not _NAME.match(self.cluster):
            raise ValueError(f"kind cluster name {self.cluster!r}: use 1-40 lowercase letters, digits and '-'")
        if self.provisioner not in PROVISIONERS:
            raise ValueError(f"kind: provisioner {self.provisioner!r}: choose one of {list(PROVISIONERS)}")
        self.config()  # image, gates and labels are refused here, before anything runs
        if self.directory is None:
            self.directory = state_root() / f"kind-{self.cluster}"

    @classmethod
    def from_options(cls, options: Any) -> KindBackend:
        """From the run options (pvchaos.provider.Options). kind publishes one patch
        release per minor, so a requested version picks its minor's image."""
        try:
            version = DEFAULT_KIND_K8S
            m = _VERSION.match(options.k8s_version or "")
            if options.k8s_version and not m:
                raise ValueError(f"kind: {options.k8s_version!r} is not a Kubernetes version")
            if m:
                version = f"v1.{m.group(1)}"
            gates = {**default_gates(version), **parse_feature_gates(options.feature_gates or "")}
            return cls(topology=Topology.parse(options.zones, options.nodes_per_zone), k8s_version=version,
                       feature_gates=gates)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None

    @property
    def kubeconfig(self) -> Path:
        assert self.directory is not None
        return self.directory / "kubeconfig"

    def config(self) -> dict[str, Any]:
        return kind_config(self.topology, self.k8s_version, self.feature_gates, self.kcm_flags)

    def preflight(self) -> None:
        """Everything that can be refused before anything exists: provisioner, binaries,
        a reachable Docker engine, a free cluster name."""
        if self.provisioner == "harness":
            raise ClusterError("kind backend: provisioner 'harness' (the zonal test provisioner) is not "
                               "supported on kind yet; use --provisioner standard")
        for tool, hint in (("kind", f"go install sigs.k8s.io/kind@{KIND_VERSION}"),
                           ("docker", "install Docker Engine or Docker Desktop")):
            if shutil.which(tool) is None:
                raise ClusterError(f"kind backend: no `{tool}` on PATH ({hint})")
        info = self.runner(["docker", "info", "--format", "{{.ServerVersion}}"])
        if info.returncode != 0:
            raise ClusterError(f"kind backend: no Docker engine reachable: {_last_line(info)}")
        listed = self.runner(["kind", "get", "clusters"])
        if listed.returncode != 0:
            raise ClusterError(f"kind get clusters: {_last_line(listed)}")
        if self.cluster in listed.stdout.split():
            raise ClusterError(f"kind cluster {self.cluster!r} already exists; "
                               f"run: kind delete cluster --name {self.cluster}")

    def up(self) -> ClusterHandle:
        self.preflight()
        cfg = self.config()
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        config_file = self.directory / "kind-config.yaml"
        config_file.write_text(render_yaml(cfg, self.k8s_version))
        image = node_image(self.k8s_version)
        _log(f"creating kind cluster {self.cluster} ({image.tag}, {self.topology.node_count} workers)")
        proc = self.runner(["kind", "create", "cluster", "--name", self.cluster, "--config", str(config_file),
                            "--image", image.image, "--kubeconfig", str(self.kubeconfig), "--wait", WAIT])
        if proc.returncode != 0:
            self._delete()
            raise ClusterError(f"kind create cluster {self.cluster}: {_last_line(proc)}")
        return self.handle(cfg)

    def _delete(self) -> subprocess.CompletedProcess[str]:
        proc = self.runner(["kind", "delete", "cluster", "--name", self.cluster, "--kubeconfig", str(self.kubeconfig)])
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
        return proc

    def down(self, handle: ClusterHandle | None = None) -> None:
        if handle is not None and handle.name != self.cluster:
            raise ClusterError(f"kind backend for {self.cluster!r} asked to delete {handle.name!r}")
        if shutil.which("kind") is None:
            raise ClusterError(f"kind backend: no `kind` on PATH (go install sigs.k8s.io/kind@{KIND_VERSION})")
        proc = self._delete()
        if proc.returncode != 0:
            raise ClusterError(f"kind delete cluster {self.cluster}: {_last_line(proc)}")

    def handle(self, cfg: dict[str, Any] | None = None) -> ClusterHandle:
        cfg = cfg or self.config()
        gates = dict(cfg.get("featureGates", {}))
        caps = {Capability.STATIC_PV, Capability.NODE_FAILURE, Capability.NODE_LABELS,
                Capability.COMPONENT_RESTART, Capability.OWNED, Capability.EPHEMERAL_STORAGE,
                Capability.DYNAMIC_LOCAL}
        if len(self.topology.zones) >= 2:
            caps.add(Capability.ZONES)
        if gates.get(MUTABLE_PV_GATE):
            caps.add(Capability.MUTABLE_PV_AFFINITY)
        image = node_image(self.k8s_version)
        names = kind_node_names(self.cluster, self.topology)
        kcm = DEFAULT_KCM_FLAGS if self.kcm_flags is None else self.kcm_flags
        return ClusterHandle(
            name=self.cluster, backend="kind", kubeconfig=self.kubeconfig, context=f"kind-{self.cluster}",
            k8s_version=image.tag, capabilities=frozenset(caps), feature_gates=gates,
            local_class_provisioner=STANDARD_PROVISIONER, faults=KindFaults(self.cluster, self.runner),
            directory=self.directory,
            description={
                "kind": KIND_VERSION, "node image": image.image,
                "storage class": f"standard ({STANDARD_PROVISIONER}, WaitForFirstConsumer)",
                "node-monitor-grace-period": kcm.get("node-monitor-grace-period", "50s (upstream default)"),
                "nodes": ", ".join(f"{k}={v}" for k, v in names.items()),
            },
        )


def _log(msg: str) -> None:
    print(f"[pvchaos kind] {msg}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.stdout.write(render_yaml(kind_config()))

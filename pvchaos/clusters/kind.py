"""Multi-zone kind clusters with real kubelets, on a node image built here.

The backend drives the `kind` CLI (kind's supported interface; its Go cluster API keeps
the config types internal) and `docker`, both aimed at the engine tools.docker_engine
found or started. Everything it needs is built locally: kind from Go modules, the node
image offline (tools/nodeimage). Nodes are registered under the topology's names
(`zone-a-1`, ...) through a per-node kubeadm patch, so suites address the same nodes on
every backend; the containers keep kind's names (`<cluster>-worker`, ...).

Networking: each cluster gets a Docker network of its own with a /24 chosen not to
clash with the host's routes or other networks (kind uses an existing network of the
given name), so a partitioned node can rejoin with its address. Pods get addresses from
the node image's `pvchaos-cni` (no kindnetd). Services work as a vendor's pods expect:
kube-proxy runs on every node as a systemd service of the node image (iptables mode,
the kubelet's credentials), and kubeadm's own addon/coredns phase deploys CoreDNS (its
image built offline into the node image), so in-cluster clients reach the API server
through the `kubernetes` Service and resolve `*.svc.cluster.local`.

Volumes: real CSI (kind_csi.py). Our driver `pvchaos-csi` runs as a node plugin in every
worker, registered by the real kubelet; its controller service and upstream's
external-provisioner and external-attacher run on the host against the cluster
(clusters/csi.py). Zonal volumes are directories of a per-zone host directory that only
that zone's workers mount; node-local ones live inside the node. The old test double
(`provisioner_kind="test-double"`: hostPath PVs under `-hostpath-root`) stays selectable
to compare the two. Static stand-in CSI PVs are turned into hostPath PVs by the suites'
workspace.

Faults: node failure is `docker pause` (the kubelet freezes, its Lease goes stale);
a crash is `docker stop` (the kubelet is gone; return boots the node again); a network
partition is `docker network disconnect`; a component restart moves its static-pod
manifest out of the kubelet's manifest directory and back.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from pvchaos.clusters import csi, kind_csi, vendor_install, vendor_proxy
from pvchaos.clusters.backend import HOSTPATH_VOLUME_ROOT, Capability, ClusterError, ClusterHandle
from pvchaos.clusters.common.gates import GATE_FIRST_MINOR, MUTABLE_PV_GATE, parse_feature_gates
from pvchaos.clusters.common.processes import ProcessRecord, spawn, stop
from pvchaos.clusters.common.provisioners import LOCAL_PROVISIONER, ZONAL_PROVISIONER
from pvchaos.clusters.common.state import state_root
from pvchaos.clusters.plugin_info import PluginChoice
from pvchaos.clusters.provider import Feature, ProvideHooks, Teardown
from pvchaos.clusters.request import SHAPE_FIELDS, CannotProvide, ClusterDefaults, ClusterRequest
from pvchaos.clusters.storage import HarnessStorage, StorageStack, VendorStorage, vendor_refusal
from pvchaos.clusters.topology import HOSTNAME_KEY, Topology
from pvchaos.clusters.vendor_package import load_package
from pvchaos.kube import builders, kinds
from pvchaos.kube.client import connect
from pvchaos.kube.errors import ConditionNotReached
from pvchaos.kube.wait import wait_for
from pvchaos.tools.binary_image import binary_image
from pvchaos.tools.build import BuildError, cache_root, ensure_binaries
from pvchaos.tools.csi_sidecars import ATTACHER, PROVISIONER, RESIZER, ensure_csi_sidecars
from pvchaos.tools.csi_snapshotter import SNAPSHOTTER_VERSION, ensure_snapshot_components
from pvchaos.tools.docker_engine import Engine, EngineError, docker, ensure_engine, last_line, stop_engine, thaw_containers
from pvchaos.tools.nodeimage.build import build_node_image, ensure_kind
from pvchaos.tools.nodeimage.recipe import KIND_VERSION
from pvchaos.tools.shipped import kind_config_dir
from pvchaos.tools.versions import DEFAULT_K8S_VERSION, SUPPORTED_MINORS, minor_of

CONFIG_DIR = kind_config_dir()
DEFAULT_CONFIG_FILE = CONFIG_DIR / "multizone.yaml"
API_VERSION = "kind.x-k8s.io/v1alpha4"
IMAGE_PLACEHOLDER = "pvchaos/kind-node:<k8s version>-<recipe digest>"
# Short node-loss detection, as on the local backend (upstream default grace is 50 s).
DEFAULT_KCM_FLAGS: dict[str, str] = {"node-monitor-grace-period": "8s", "node-monitor-period": "1s"}
# The kubelet renews its Lease every quarter of nodeLeaseDurationSeconds (upstream 40 s,
# i.e. every 10 s, longer than the 8 s grace). failCgroupV1: false lets 1.35+ kubelets
# run on cgroup v1 hosts (they refuse by default); it changes nothing on cgroup v2.
# resolvConf: what pods with dnsPolicy Default (CoreDNS) get, written by the node image's
# pvchaos-cni: the node's resolv.conf naming the node's address, forwarded to Docker's
# DNS (127.0.0.11 itself would be the pod's own loopback, a loop for CoreDNS).
DEFAULT_KUBELET: dict[str, Any] = {"nodeLeaseDurationSeconds": 4, "nodeStatusUpdateFrequency": "2s",
                                   "failCgroupV1": False, "resolvConf": "/run/pvchaos/pod-resolv.conf"}
# kubeadm 1.35+ fails its SystemVerification preflight on cgroup v1 hosts even with
# failCgroupV1: false ("You must also explicitly skip this validation"); its ImagePull
# preflight asks a registry for the kube-proxy image, which these clusters do not run
# (kube-proxy is a node service; every image they run is in the node image already).
PREFLIGHT: dict[str, Any] = {"ignorePreflightErrors": ["SystemVerification", "ImagePull"]}
COMPONENTS = ("kube-scheduler", "kube-controller-manager")
CLUSTER_LABEL = "io.x-k8s.kind.cluster"
WAIT = "180s"
# kind waits 30 s (fixed) for each node's systemd to log multi-user.target; missing it is
# load, not a broken node, so the create is tried again (KindBackend._create_cluster).
BOOT_TIMEOUT_TEXT = "could not find a log line that matches"
BOOT_ATTEMPTS = 3
FREEZE_FAILED = "unable to freeze"  # runc's pause under load: the freezer did not settle in time
FREEZE_ATTEMPTS = 3
PROXY_IMAGE_REPOSITORY = "pvchaos.dev/certify/pvchaos-csi-proxy"  # the fault proxy added to a vendor's pods
BINDER_WAIT = 120.0  # seconds a new cluster's PV controller has to bind its first claim
SUBNET_POOL = ipaddress.IPv4Network("172.30.0.0/16")

# kind's known-issues remedy for "too many open files": every node's systemd, containerd
# and kubelet take inotify instances from root's one budget (upstream default 128), and
# a 7-node cluster next to another exhausts it: systemd then fails units at boot and the
# node misses kind's 30 s (seen here with two clusters on one engine).
INOTIFY_LIMITS = {"max_user_instances": 512, "max_user_watches": 524288}

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_KUBELET_ALLOWED = {"topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                    "node.kubernetes.io/instance-type", "kubernetes.io/os", "kubernetes.io/arch"}


# ---- config (pure) ------------------------------------------------------------------------

def parse_version(k8s_version: str) -> int:
    """`v1.35.4` -> 35; anything else, or a minor the harness does not support, is refused."""
    minor = minor_of(k8s_version, release_only=True)
    if minor is None:
        raise ValueError(f"kind: {k8s_version!r} is not a Kubernetes release (want v1.MINOR.PATCH, e.g. "
                         f"{DEFAULT_K8S_VERSION})")
    if minor not in SUPPORTED_MINORS:
        raise ValueError(f"kind: v1.{minor} is not supported; supported minors: "
                         + ", ".join(f"v1.{m}" for m in SUPPORTED_MINORS))
    return minor


def default_gates(k8s_version: str) -> dict[str, bool]:
    """The gate the suites are about, on wherever it exists."""
    return {MUTABLE_PV_GATE: True} if parse_version(k8s_version) >= GATE_FIRST_MINOR[MUTABLE_PV_GATE] else {}


def _node_labels(labels: dict[str, str]) -> dict[str, str]:
    """Topology labels minus the hostname (the kubelet sets it from the node name);
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


def kind_config(topology: Topology | None = None, k8s_version: str = DEFAULT_K8S_VERSION,
                image: str = IMAGE_PLACEHOLDER, feature_gates: dict[str, bool] | None = None,
                kcm_flags: dict[str, str] | None = None, kubelet: dict[str, Any] | None = None,
                zones_dir: str | Path | None = kind_csi.ZONES_PLACEHOLDER,
                zone_path: str = kind_csi.NODE_ZONE_DIR,
                every_node_mounts: Sequence[dict[str, str]] = (),
                plane_mounts: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """A kind v1alpha4 Cluster: one control plane (with `plane_mounts`), then the topology's
    nodes as workers in order, each registered under its topology name and, with
    `zones_dir` (CSI), mounting its zone's shared volume directory `<zones_dir>/<zone>`
    (kind_csi.py)."""
    topology = topology or Topology()
    minor = parse_version(k8s_version)
    gates = default_gates(k8s_version) if feature_gates is None else dict(feature_gates)
    for gate, first in GATE_FIRST_MINOR.items():
        if gates.get(gate) and minor < first:
            raise ValueError(f"kind: feature gate {gate} does not exist before v1.{first} ({k8s_version})")
    kcm = DEFAULT_KCM_FLAGS if kcm_flags is None else kcm_flags
    kubelet_cfg = DEFAULT_KUBELET if kubelet is None else kubelet
    # kind skips addon/kube-proxy itself for kubeProxyMode none, but a patched list replaces its own.
    # kube-proxy is the node image's service; addon/coredns runs (CoreDNS is in the image).
    patches = [_patch("InitConfiguration", {"skipPhases": ["addon/kube-proxy"],
                                            "nodeRegistration": PREFLIGHT})]
    if kcm:
        patches.append(_patch("ClusterConfiguration",
                              {"controllerManager": {"extraArgs": {k: str(v) for k, v in kcm.items()}}}))
    if kubelet_cfg:
        patches.append(_patch("KubeletConfiguration", dict(kubelet_cfg)))
    cfg: dict[str, Any] = {"kind": "Cluster", "apiVersion": API_VERSION}
    if gates:
        cfg["featureGates"] = gates
    cfg["networking"] = {"ipFamily": "ipv4", "disableDefaultCNI": True, "kubeProxyMode": "none"}
    cfg["kubeadmConfigPatches"] = patches
    plane: dict[str, Any] = {"role": "control-plane", "image": image}
    if every_node_mounts or plane_mounts:
        plane["extraMounts"] = [*(dict(m) for m in plane_mounts), *(dict(m) for m in every_node_mounts)]
    nodes: list[dict[str, Any]] = [plane]
    for spec in topology.nodes():
        worker: dict[str, Any] = {"role": "worker", "image": image, "labels": _node_labels(spec.labels)}
        mounts = [*(kind_csi.zone_mounts(zones_dir, spec.zone, zone_path) if zones_dir is not None else []),
                  *(dict(m) for m in every_node_mounts)]
        if mounts:
            worker["extraMounts"] = mounts
        worker["kubeadmConfigPatches"] = [_patch("JoinConfiguration",
                                                 {"nodeRegistration": {"name": spec.name, **PREFLIGHT}})]
        nodes.append(worker)
    cfg["nodes"] = nodes
    return cfg


def kind_node_names(cluster: str, topology: Topology) -> dict[str, str]:
    """Topology node name -> kind container name, following kind's namer."""
    return {spec.name: f"{cluster}-worker{'' if i == 0 else i + 1}" for i, spec in enumerate(topology.nodes())}


def kind_containers(cluster: str, topology: Topology) -> dict[str, str]:
    """Every node name -> container: the workers and the control plane (a Node too)."""
    return {**kind_node_names(cluster, topology), f"{cluster}-control-plane": f"{cluster}-control-plane"}


def pick_subnet(taken: Sequence[str], pool: ipaddress.IPv4Network = SUBNET_POOL) -> str:
    """The first /24 of `pool` that overlaps none of the `taken` networks."""
    used = [ipaddress.ip_network(t, strict=False) for t in taken if ":" not in t]
    for candidate in pool.subnets(new_prefix=24):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise ValueError(f"kind: every /24 of {pool} clashes with a host route or Docker network")


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (kubeadm patches) as `|` blocks, so the file reads like kind's docs."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def render_yaml(config: dict[str, Any], k8s_version: str = DEFAULT_K8S_VERSION) -> str:
    """The file kind reads, with a header saying where it came from."""
    header = (f"# Generated by clusters/kind.py: kind_config(Topology(), {k8s_version!r}).\n"
              "# Regenerate: .venv/bin/python -m pvchaos.clusters.kind > kind-config/multizone.yaml\n"
              "# The image is built by `pvchaos kind build-image`; the backend fills in its tag,\n"
              "# and the zones' CSI volume directories under its state directory (extraMounts).\n"
              "# Workers are containers <cluster>-worker, -worker2, ... registered as zone-a-1, ...\n")
    return header + yaml.dump(config, Dumper=_LiteralDumper, sort_keys=False, default_flow_style=False)


def kind_directory(cluster: str) -> Path:
    """Where a pvchaos kind cluster keeps its config, kubeconfig and provisioner state."""
    return state_root() / f"kind-{cluster}"


def kind_clusters() -> list[str]:
    """The kind clusters pvchaos created and has not removed (by their directories)."""
    return sorted(p.name[len("kind-"):] for p in state_root().glob("kind-*") if p.is_dir())


def raise_inotify_limits(proc_dir: Path = Path("/proc/sys/fs/inotify")) -> list[str]:
    """Raise the host's inotify limits to INOTIFY_LIMITS where lower (root only; never
    lowered); returns what changed, or why it could not."""
    changed = []
    for name, want in INOTIFY_LIMITS.items():
        path = proc_dir / name
        try:
            have = int(path.read_text())
            if have < want:
                path.write_text(str(want))
                changed.append(f"fs.inotify.{name} {have} -> {want}")
        except (OSError, ValueError) as exc:
            changed.append(f"fs.inotify.{name} left as it is ({exc.__class__.__name__}: {exc}); kind nodes may fail "
                           f"to boot with 'Too many open files'")
    return changed


def sweep_orphaned_kind_clusters(engine: Engine) -> list[str]:
    """Remove kind clusters left on pvchaos's own engine by runs that died: a dockerd
    restarts their containers when it starts again, and they would keep the engine from
    stopping. A cluster with a directory (`kind_clusters()`, e.g. one `cluster up`
    detached) is kept; a user's engine is never touched."""
    if not engine.owned:
        return []
    listed = docker(engine, ["ps", "-a", "--filter", "label=io.x-k8s.kind.cluster",
                             "--format", '{{.ID}} {{.Label "io.x-k8s.kind.cluster"}}'], timeout=60)
    if listed.returncode != 0:
        return []
    keep = set(kind_clusters())
    orphans: dict[str, list[str]] = {}
    for line in listed.stdout.split("\n"):
        if line.strip():
            container, cluster = line.split(maxsplit=1)
            if cluster not in keep:
                orphans.setdefault(cluster, []).append(container)
    for cluster, containers in sorted(orphans.items()):
        docker(engine, ["rm", "-f", "-v", *containers], timeout=120)
        docker(engine, ["network", "rm", f"pvchaos-{cluster}"], timeout=60)  # absent already: no harm
        _log(f"removed orphaned kind cluster {cluster} ({len(containers)} containers) left by a run that died")
    return sorted(orphans)


# ---- faults -------------------------------------------------------------------------------

@dataclass
class KindFaults:
    """NodeFaults for a kind cluster, by node name (containers are looked up in `containers`)."""

    cluster: str
    engine: Engine
    containers: dict[str, str]
    network: str
    _addresses: dict[str, str] = field(default_factory=dict)

    @property
    def control_plane(self) -> str:
        return f"{self.cluster}-control-plane"

    def container(self, node: str) -> str:
        if node not in self.containers:
            raise KeyError(f"kind cluster {self.cluster}: {node!r} is not one of its nodes {sorted(self.containers)}")
        return self.containers[node]

    def _docker(self, *args: str) -> str:
        proc = docker(self.engine, args, timeout=120)
        if proc.returncode != 0:
            raise ClusterError(f"docker {' '.join(args[:2])} ({self.cluster}): {last_line(proc)}")
        return proc.stdout.strip()

    def _state(self, node: str) -> dict[str, Any]:
        out = self._docker("inspect", "--format", "{{json .State}}|{{json .NetworkSettings.Networks}}",
                           self.container(node))
        state, networks = out.split("|", 1)
        return {"state": json.loads(state), "networks": json.loads(networks) or {}}

    # -- pause: the default node failure -------------------------------------------------
    def _pause(self, containers: list[str]) -> None:
        """`docker pause`, again where the cgroup freezer gave up: it freezes tasks one by
        one and reports "unable to freeze" when a busy node (a loaded 2-core host) keeps
        making new ones; the container is then left running, so a second try is safe."""
        for attempt in range(1, FREEZE_ATTEMPTS + 1):
            proc = docker(self.engine, ["pause", *containers], timeout=120)
            if proc.returncode == 0:
                return
            if FREEZE_FAILED not in (proc.stderr or "") or attempt == FREEZE_ATTEMPTS:
                raise ClusterError(f"docker pause ({self.cluster}): {last_line(proc)}")
            containers = [c for c in containers if not self._paused(c)]
            time.sleep(1)

    def _paused(self, container: str) -> bool:
        return self._docker("inspect", "--format", "{{.State.Paused}}", container) == "true"

    def stop_node(self, node: str) -> None:
        """Freeze the node container: kubelet and runtime stop, nothing is deleted."""
        self._pause([self.container(node)])

    def stop_nodes(self, nodes: list[str]) -> None:
        """One `docker pause` for all: the containers freeze together."""
        if nodes:
            self._pause([self.container(n) for n in nodes])

    # -- crash: docker stop -------------------------------------------------------------
    def crash_node(self, node: str) -> None:
        """Stop the container (SIGRTMIN+3, then SIGKILL after 2 s): kubelet, runtime and
        pods are gone as on a crashed VM; the node's disk (/var) stays."""
        self._docker("stop", "-t", "2", self.container(node))

    # -- partition: docker network disconnect ---------------------------------------------
    def partition_node(self, node: str) -> None:
        """Cut the node off the cluster network; it keeps running and keeps its pods."""
        nets = self._state(node)["networks"]
        if self.network in nets:
            self._addresses[node] = nets[self.network].get("IPAddress", "")
            self._docker("network", "disconnect", self.network, self.container(node))

    def start_node(self, node: str) -> None:
        """Undo whichever fault the node is in: unpause, start, or reconnect (same address)."""
        info = self._state(node)
        state = info["state"]
        if state.get("Paused"):
            self._docker("unpause", self.container(node))
        elif not state.get("Running"):
            self._docker("start", self.container(node))
        if self.network not in info["networks"]:
            ip = self._addresses.pop(node, "")
            self._docker("network", "connect", *(["--ip", ip] if ip else []), self.network, self.container(node))

    def node_stopped(self, node: str) -> bool:
        info = self._state(node)
        state = info["state"]
        return bool(state.get("Paused")) or not state.get("Running") or self.network not in info["networks"]

    # -- components ---------------------------------------------------------------------------
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

    def component_log(self, component: str) -> str:
        """The static pod's container log on the control plane (what kubelet keeps)."""
        return self._docker("exec", self.control_plane, "sh", "-c",
                            f"cat /var/log/pods/kube-system_{component}-*/{component}/*.log 2>/dev/null || true")

    def volume_dir(self, pv: dict[str, Any]) -> str | None:
        """Where a PV's data is on a node that mounts it (kind_csi.node_volume_dir)."""
        return kind_csi.node_volume_dir(pv)

    def node_exec(self, node: str, command: str) -> str:
        """Run a shell command on a node (e.g. read a file a pod wrote to a volume)."""
        return self._docker("exec", self.container(node), "sh", "-c", command)

    def stop_node_plugin(self, node: str) -> None:
        """Stop the CSI node plugin on one node and take its registration socket away, so
        the kubelet's plugin watcher deregisters the driver (CSINode loses it)."""
        registration = f"{kind_csi.REGISTRATION_DIR}/{csi.DRIVER_NAME}-reg.sock"
        self._docker("exec", self.container(node), "sh", "-c",
                     f"systemctl stop {kind_csi.UNIT} && rm -f {registration}")

    def start_node_plugin(self, node: str) -> None:
        """Start the node plugin again; it registers with the kubelet as at boot."""
        self._docker("exec", self.container(node), "systemctl", "start", kind_csi.UNIT)

    def copy_between_nodes(self, source: str, target: str, path: str) -> None:
        """Copy a directory from one node to the same path on another, through the host
        (`docker cp` out and in), as a storage system's migration would copy a volume."""
        with tempfile.TemporaryDirectory(prefix="pvchaos-copy-") as tmp:
            self._docker("cp", f"{self.container(source)}:{path}", f"{tmp}/data")
            self._docker("exec", self.container(target), "mkdir", "-p", str(PurePosixPath(path).parent))
            self._docker("cp", f"{tmp}/data", f"{self.container(target)}:{path}")


# ---- backend --------------------------------------------------------------------------------

@dataclass
class KindBackend:
    """A harness-owned multi-zone kind cluster: engine, image, network, cluster, provisioner."""

    cluster: str = "pvchaos"
    topology: Topology = field(default_factory=Topology)
    k8s_version: str = DEFAULT_K8S_VERSION
    feature_gates: dict[str, bool] | None = None
    kcm_flags: dict[str, str] | None = None
    directory: Path | None = None
    name: str = "kind"
    engine: Engine | None = None
    image: str | None = None
    detached: bool = False  # outlives this process (`cluster up`); else its provisioners die with us
    # pvchaos-csi with upstream's sidecars (kind_csi.py), as its CsiOptions say; or the old
    # host test double writing hostPath PVs (kept, as the local backend keeps it, to
    # compare); or a vendor's package, installed into the cluster as its only storage.
    storage: StorageStack = field(default_factory=HarnessStorage)
    # where a vendor package's pod logs go when it does not come up (default: the cluster's directory)
    logs_dir: Path | None = None
    # The cluster's network is ours to remove: true for a cluster pvchaos made earlier
    # (`cluster down`); `up` clears it until it has created the network itself.
    _owns_network: bool = field(default=True, init=False, repr=False)
    _csi_bins: csi.CsiBinaries | None = field(default=None, init=False, repr=False)
    _proxy_image: tuple[str, Path] | None = field(default=None, init=False, repr=False)  # (ref, archive)

    def __post_init__(self) -> None:
        if not _NAME.match(self.cluster):
            raise ValueError(f"kind cluster name {self.cluster!r}: use 1-32 lowercase letters, digits and '-'")
        if self.directory is None:
            self.directory = kind_directory(self.cluster)
        self.config()  # version, gates and labels are refused here, before anything runs

    @classmethod
    def for_request(cls, request: ClusterRequest, defaults: ClusterDefaults, cluster: str,
                    detached: bool = False) -> KindBackend:
        """A cluster of the run's defaults and what the request asks beyond them (zones,
        nodes per zone, gates, storage stack); CannotProvide with the reason for anything
        else the request asks, or a storage setting a vendor's package cannot take."""
        rest = replace(request, **{f: getattr(ClusterRequest(), f) for f in SHAPE_FIELDS})
        if not rest.is_default:
            raise CannotProvide(f"backend kind: cannot start a cluster with {rest.describe()} "
                                f"(it starts clusters of other zones, nodes, feature gates and CSI stack options only)")
        storage = request.storage(defaults)
        if isinstance(storage, VendorStorage):
            refusal = vendor_refusal(storage.package, request.csi_options())
            if refusal:
                raise CannotProvide(refusal)
        topology = defaults.topology
        if request.zones is not None or request.nodes_per_zone is not None:
            topology = replace(topology, zones=request.zones or topology.zones,
                               nodes_per_zone=request.nodes_per_zone or topology.nodes_per_zone)
        try:
            gates = {**default_gates(defaults.k8s_version), **defaults.feature_gates, **dict(request.feature_gates)}
            return cls(cluster=cluster, topology=topology, k8s_version=defaults.k8s_version, feature_gates=gates,
                       storage=storage, detached=detached)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None

    # -- a cluster another process started: its spec on disk ---------------------------------
    @property
    def spec_file(self) -> Path:
        assert self.directory is not None
        return self.directory / "backend.json"

    def _write_spec(self) -> None:
        """What `attach` needs to rebuild this backend in another process (certify's run)."""
        if isinstance(self.storage, VendorStorage):
            storage: dict[str, Any] = {"vendor": str(self.storage.package.directory.resolve()),
                                       "wait_timeout": self.storage.wait_timeout}
        else:
            storage = {"csi": asdict(self.storage.csi), "test_double": self.storage.test_double}
        self.spec_file.write_text(json.dumps({
            "zones": list(self.topology.zones), "nodes_per_zone": self.topology.nodes_per_zone,
            "k8s_version": self.k8s_version, "feature_gates": self.feature_gates, "kcm_flags": self.kcm_flags,
            "image": self.image, "storage": storage}, indent=1))

    @classmethod
    def attach(cls, cluster: str) -> KindBackend:
        """The backend of a kind cluster pvchaos started and has not removed, from its spec
        (ClusterError naming the clusters there are when it is not one of them)."""
        directory = kind_directory(cluster)
        try:
            spec = json.loads((directory / "backend.json").read_text())
        except (OSError, ValueError):
            raise ClusterError(f"--kind-cluster {cluster}: not a running pvchaos kind cluster (there are: "
                               f"{', '.join(kind_clusters()) or 'none'}; `pvchaos cluster list`)") from None
        backend = cls.from_spec(cluster, directory, spec)
        try:
            backend.engine = ensure_engine()
        except EngineError as exc:
            raise ClusterError(str(exc)) from None
        return backend

    @classmethod
    def from_spec(cls, cluster: str, directory: Path, spec: dict[str, Any]) -> KindBackend:
        """The backend `_write_spec` described (no engine yet)."""
        stored = spec["storage"]
        storage: StorageStack
        if "vendor" in stored:
            storage = VendorStorage(load_package(stored["vendor"], need_images=False),  # installed already
                                    float(stored.get("wait_timeout", 180.0)))
        else:
            storage = HarnessStorage(csi.CsiOptions(**stored["csi"]), bool(stored.get("test_double")))
        return cls(cluster=cluster, topology=Topology.parse(",".join(spec["zones"]), spec["nodes_per_zone"]),
                   k8s_version=spec["k8s_version"], feature_gates=spec["feature_gates"],
                   kcm_flags=spec["kcm_flags"], directory=directory, image=spec.get("image"), storage=storage,
                   detached=True)

    @property
    def kubeconfig(self) -> Path:
        assert self.directory is not None
        return self.directory / "kubeconfig"

    @property
    def network(self) -> str:
        return f"pvchaos-{self.cluster}"

    @property
    def runs_csi(self) -> bool:
        """pvchaos-csi and upstream's sidecars (not the test double, not a vendor's package)."""
        return isinstance(self.storage, HarnessStorage) and not self.storage.test_double

    @property
    def shares_zones(self) -> bool:
        """Each zone's workers share a host directory: pvchaos-csi's zonal volumes, or a
        vendor package's stand-in for a zone's network storage (kind_csi.VENDOR_ZONE_DIR)."""
        return self.runs_csi or self.vendor is not None

    @property
    def vendor(self) -> VendorStorage | None:
        return self.storage if isinstance(self.storage, VendorStorage) else None

    @property
    def csi_options(self) -> csi.CsiOptions:
        return self.storage.csi if isinstance(self.storage, HarnessStorage) else csi.CsiOptions()

    def config(self) -> dict[str, Any]:
        assert self.directory is not None
        # a vendor's controller-side fault proxy keeps its rules and log in the host's CSI
        # directory, mounted in every node (wherever its pod runs): vendor_proxy.py
        proxy_dir = ([{"hostPath": str(csi.paths_for(self.directory).root), "containerPath": vendor_proxy.CONTROLLER_DIR}]
                     if self.vendor is not None else [])
        # ...and the control plane sees every zone's stand-in storage, as a zonal storage
        # system's control API reaches all its zones: a vendor's controller pinned there
        # makes, copies (snapshots, clones) and deletes volumes in it
        all_zones = ([{"hostPath": str(kind_csi.zones_dir(self.directory)), "containerPath": kind_csi.VENDOR_ZONES_DIR}]
                     if self.vendor is not None else [])
        return kind_config(self.topology, self.k8s_version, self.image or IMAGE_PLACEHOLDER, self.feature_gates,
                           self.kcm_flags, zones_dir=kind_csi.zones_dir(self.directory) if self.shares_zones else None,
                           zone_path=kind_csi.NODE_ZONE_DIR if self.runs_csi else kind_csi.VENDOR_ZONE_DIR,
                           every_node_mounts=proxy_dir, plane_mounts=all_zones)

    def proxy_wiring(self, image: str = "pvchaos.dev/certify/pvchaos-csi-proxy:unbuilt") -> vendor_proxy.ProxyWiring | None:
        """The vendor's manifests with the CSI fault proxy in front of its sockets (None
        without a vendor); pure over the package, so capabilities know before start."""
        if self.vendor is None:
            return None
        return vendor_proxy.wire((doc for _, doc in self.vendor.package.objects), image)

    def _kind(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        assert self.engine is not None
        env = {**self.engine.env(), "KIND_EXPERIMENTAL_DOCKER_NETWORK": self.network}
        return subprocess.run([str(ensure_kind()), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)

    def prepare(self) -> None:
        """Everything that can be refused or built before a container exists: an engine,
        kind, the node image, the CSI driver and sidecars, a free cluster name."""
        try:
            self.engine = self.engine or ensure_engine()
            sweep_orphaned_kind_clusters(self.engine)
            for change in raise_inotify_limits():
                _log(change)
            ensure_kind()
            self.image = build_node_image(self.engine, self.k8s_version)
            wiring = self.proxy_wiring()
            if wiring is not None and wiring.wired:
                from pvchaos.tools.csi_driver import ensure_csi_driver  # the driver's own module builds it
                self._proxy_image = binary_image(self.engine, ensure_csi_driver(), PROXY_IMAGE_REPOSITORY, "pvchaos-csi")
            if self.runs_csi:
                assert self.directory is not None
                kind_csi.csi_paths(self.directory)  # a socket path too long is refused here
                self._csi_binaries()
            elif self.vendor is not None and self.vendor.package.runs_snapshotter:
                ensure_snapshot_components()
        except (EngineError, BuildError) as exc:
            raise ClusterError(str(exc)) from None
        listed = self._kind("get", "clusters", timeout=60)
        if listed.returncode != 0:
            raise ClusterError(f"kind get clusters: {last_line(listed)}")
        if self.cluster in listed.stdout.split():
            raise ClusterError(f"kind cluster {self.cluster!r} already exists; remove it with "
                               f"`pvchaos cluster down --backend kind --name {self.cluster}` or choose another --name")

    def _csi_binaries(self) -> csi.CsiBinaries:
        """Our driver (static: it runs in the node containers too) and upstream's sidecars,
        built on first use and cached."""
        if self._csi_bins is None:
            from pvchaos.tools.csi_driver import ensure_csi_driver  # the driver's own module builds it
            sidecars = ensure_csi_sidecars()
            snapshots = ensure_snapshot_components()
            self._csi_bins = csi.CsiBinaries(ensure_csi_driver(), sidecars.provisioner, sidecars.attacher,
                                             sidecars.resizer, snapshots.snapshotter, snapshots.controller, snapshots.crds)
        return self._csi_bins

    def _create_network(self) -> None:
        assert self.engine is not None
        existing = docker(self.engine, ["network", "inspect", self.network], timeout=60)
        if existing.returncode == 0:
            raise ClusterError(f"kind backend: Docker network {self.network} exists already (a cluster of that "
                               f"name left behind?); remove it with `docker network rm {self.network}`")
        subnet = pick_subnet(self._taken_subnets())
        self._owns_network = True  # from here on, ours to remove (a failed create may leave it half made)
        proc = docker(self.engine, ["network", "create", "--driver", "bridge", "--subnet", subnet,
                                    "--label", f"pvchaos.dev/cluster={self.cluster}",
                                    "-o", "com.docker.network.bridge.enable_ip_masquerade=true", self.network])
        if proc.returncode != 0:
            raise ClusterError(f"kind backend: docker network create {self.network} ({subnet}): {last_line(proc)}")

    def _taken_subnets(self) -> list[str]:
        assert self.engine is not None
        taken = []
        nets = docker(self.engine, ["network", "ls", "-q"], timeout=60).stdout.split()
        if nets:
            out = docker(self.engine, ["network", "inspect", "--format",
                                       "{{range .IPAM.Config}}{{.Subnet}} {{end}}", *nets], timeout=60).stdout
            taken += out.split()
        routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
        taken += [line.split()[0] for line in routes.splitlines() if line and line.split()[0][0].isdigit()]
        return taken

    def up(self) -> ClusterHandle:
        self.prepare()
        assert self.directory is not None and self.image is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.shares_zones:  # before the containers mount them (docker would create them as root-only)
            for zone in self.topology.zones:
                (kind_csi.zones_dir(self.directory) / zone).mkdir(parents=True, exist_ok=True)
        if self.vendor is not None:
            csi.paths_for(self.directory).root.mkdir(parents=True, exist_ok=True)
        config_file = self.directory / "kind-config.yaml"
        config_file.write_text(render_yaml(self.config(), self.k8s_version))
        _log(f"creating kind cluster {self.cluster} ({self.k8s_version}, {self.topology.node_count} workers, "
             f"image {self.image})")
        start = time.monotonic()
        self._owns_network = False
        try:
            self._create_network()
            self._create_cluster(config_file)
            self._write_spec()
            created = time.monotonic()
            if self.runs_csi:
                self._start_csi()
            elif self.vendor is not None:
                self._await_nodes_ready()
                if self.vendor.package.runs_snapshotter:
                    self._start_snapshot_api()
                self._install_vendor(self.vendor)
            else:
                self._await_nodes_ready()
                self._start_provisioner()
            self._await_binder()
        except BaseException:
            self._teardown(quiet=True)
            raise
        done = time.monotonic()
        stack = "CSI and " if self.runs_csi else (f"{self.vendor.driver} installed and " if self.vendor else "")
        _log(f"kind cluster {self.cluster} ready in {done - start:.0f}s (kind create {created - start:.0f}s, "
             f"then {stack}nodes Ready {done - created:.0f}s)")
        return self.handle()

    def _create_cluster(self, config_file: Path) -> None:
        """`kind create cluster`, again (after deleting the first try) when a node's systemd
        missed kind's fixed 30 s to reach multi-user.target: on a loaded 2-core host five
        or seven containers booting at once sometimes do, and nothing is wrong with them."""
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            proc = self._kind("create", "cluster", "--name", self.cluster, "--config", str(config_file),
                              "--kubeconfig", str(self.kubeconfig), "--wait", WAIT, "--retain")
            if proc.returncode == 0:
                return
            if BOOT_TIMEOUT_TEXT not in (proc.stderr or "") or attempt == BOOT_ATTEMPTS:
                raise ClusterError(f"kind create cluster {self.cluster}: {last_line(proc)}"
                                   f"{self._node_diagnosis()}")
            _log(f"kind create cluster {self.cluster}: a node did not boot within kind's 30 s (attempt {attempt} "
                 f"of {BOOT_ATTEMPTS}); deleting it and creating again")
            self._kind("delete", "cluster", "--name", self.cluster, "--kubeconfig", str(self.kubeconfig), timeout=300)

    def _start_csi(self) -> None:
        """The VolumeSnapshot API first (the provisioner asks for it once, at start), then
        the host-side stack spawned (the sidecars wait for the controller's socket
        themselves), node plugins copied in and started, the CSIDriver created, then every
        node Ready, the stack serving, and every worker's CSINode written by its kubelet."""
        assert self.directory is not None and self.engine is not None
        binaries = self._csi_binaries()  # cached by prepare()
        paths = kind_csi.csi_paths(self.directory)
        book = kind_csi.host_stack_book(self.directory, tie_to_parent=not self.detached)
        kube = connect(self.kubeconfig)
        try:
            if binaries.snapshots:  # before the provisioner, which asks for their API once, at start (SWEEP_LOG)
                csi.install_snapshot_api(kube, binaries.snapshot_crds)
            procs = csi.spawn_stack(paths, self.kubeconfig, binaries, self.csi_options, book.start,
                                    data_root=kind_csi.data_root(self.directory))
            workers = kind_node_names(self.cluster, self.topology)
            node_snapshotter = self._node_snapshotter(binaries)
            kind_csi.install_node_plugins(self.engine, workers, self.topology, binaries.driver, self.csi_options,
                                          node_snapshotter)
            kind_csi.create_csi_driver(self.kubeconfig, self.csi_options)
            if binaries.snapshots:
                procs.update(csi.spawn_snapshots(paths, self.kubeconfig, binaries, book.start, self.csi_options))
            self._await_nodes_ready()
            csi.await_stack(paths, procs)
            waited = kind_csi.await_registration(kube, self.engine, workers, self.csi_options, self.cluster)
            if node_snapshotter is not None:
                kind_csi.await_node_snapshotters(self.engine, workers, self.cluster)
        finally:
            kube.api.close()
        _log(f"{csi.DRIVER_NAME} registered by the kubelet on {len(workers)} workers ({waited:.1f}s after Ready)")

    def _node_snapshotter(self, binaries: csi.CsiBinaries) -> kind_csi.NodeSnapshotter | None:
        """For snapshots cut on the nodes: the csi-snapshotter binary and the cluster's
        in-network kubeconfig (its server is the control plane's container, which the
        workers resolve on the cluster's network); None otherwise."""
        if not (self.csi_options.node_snapshots and binaries.snapshots):
            return None
        assert self.directory is not None and binaries.snapshotter is not None
        got = self._kind("get", "kubeconfig", "--internal", "--name", self.cluster, timeout=60)
        if got.returncode != 0:
            raise ClusterError(f"kind get kubeconfig --internal --name {self.cluster}: {last_line(got)}")
        internal = self.directory / "kubeconfig-internal"
        internal.write_text(got.stdout)
        internal.chmod(0o600)
        return kind_csi.NodeSnapshotter(binaries.snapshotter, internal)

    def _start_snapshot_api(self) -> None:
        """The cluster's half of snapshots for a vendor's package that runs csi-snapshotter,
        as a cluster add-on is deployed: upstream's CRDs, then the snapshot-controller (on the
        host, beside where pvchaos-csi's stack would run), before the package is applied."""
        assert self.directory is not None
        snapshots = ensure_snapshot_components()  # cached by prepare()
        paths = kind_csi.csi_paths(self.directory)
        kube = connect(self.kubeconfig)
        try:
            csi.install_snapshot_api(kube, snapshots.crds)
        finally:
            kube.api.close()
        book = kind_csi.host_stack_book(self.directory, tie_to_parent=not self.detached)
        csi.await_logged(paths, csi.spawn_snapshot_controller(self.kubeconfig, snapshots.controller, book.start,
                                                              distributed=self.vendor is not None
                                                              and self.vendor.package.snapshots_on_nodes))

    def _install_vendor(self, vendor: VendorStorage) -> None:
        """The vendor's images into every node, its manifests applied in name order, then the
        bounded wait for registration in every worker's CSINode and its workloads Ready
        (vendor_install.py); the pods' logs go to `logs_dir` when it does not come up."""
        assert self.engine is not None and self.directory is not None
        package = vendor.package
        manifests: Sequence[Path] = package.manifests
        archives = list(package.images)
        if self._proxy_image is not None:  # the fault proxy in front of its sockets (vendor_proxy.py)
            ref, archive = self._proxy_image
            wiring = self.proxy_wiring(ref)
            assert wiring is not None
            manifests = vendor_proxy.write_manifests(package, wiring, self.directory / "vendor-manifests")
            archives.append(archive)
            _log(f"CSI fault proxy in front of {package.driver_name}: "
                 + "; ".join([*wiring.node_sockets, *wiring.controller_sockets]))
        else:
            wiring = self.proxy_wiring()
            if wiring is not None and not wiring.wired:
                _log(f"no CSI fault proxy in front of {package.driver_name} (csi_faults skips): {wiring.refusal}")
        vendor_install.load_images(self.engine, self.cluster, archives)
        kubectl = self.kubectl()
        vendor_install.apply_manifests(kubectl, manifests)
        workloads = [(w.kind, w.namespace, w.name) for w in package.workloads]
        waited = vendor_install.wait_installed(kubectl, package.driver_name, workloads,
                                               self.logs_dir or self._kept_logs_dir(), vendor.wait_timeout)
        _log(f"{package.driver_name} (package {package.directory}) registered and Ready in {waited:.0f}s")

    def _kept_logs_dir(self) -> Path:
        """Where a package's pod logs go when it does not come up in a cluster certify did not
        start itself (a shaped one): beside the local backend's failed starts, not in the
        cluster's directory, which its teardown removes (seen: a message pointing at logs
        already deleted). Only the newest few are kept."""
        root = cache_root() / "failed-starts"
        root.mkdir(parents=True, exist_ok=True)
        for old in sorted(root.iterdir(), key=lambda p: p.stat().st_mtime)[:-5]:
            shutil.rmtree(old, ignore_errors=True)
        return root / self.cluster / "vendor-logs"

    def _await_binder(self) -> None:
        """A fresh kind cluster's controller-manager needs a while after leader election
        before its PV controller binds claims (informers syncing, on a loaded host); the
        cluster is handed out once a probe claim binds to its PV (bounded), so the per-cluster
        canaries judge a working binder, not a warming one (seen: certify's canaries ran 6 s
        after install and the binder canary failed while binding worked a minute later)."""
        name = f"pvchaos-probe-{secrets.token_hex(3)}"
        kube = connect(self.kubeconfig)
        try:
            kinds.create(kube, builders.persistent_volume(name, "1Mi", labels={"pvchaos.dev/probe": name}))
            claim = builders.persistent_volume_claim(name, "1Mi", "", selector={"matchLabels": {"pvchaos.dev/probe": name}})
            kinds.create(kube, claim, "default")
            try:
                wait_for(kube, "PersistentVolumeClaim", name, lambda c: (c.get("status") or {}).get("phase") == "Bound",
                         "the controller-manager's PV controller binds a probe claim", "default", BINDER_WAIT)
            except ConditionNotReached as exc:
                raise ClusterError(f"kind cluster {self.cluster}: {str(exc).splitlines()[0]}") from None
        finally:
            kinds.delete(kube, "PersistentVolumeClaim", name, "default")
            kinds.delete(kube, "PersistentVolume", name)
            kube.api.close()

    def kubectl(self) -> vendor_install.Kubectl:
        """kubectl of the cluster's version against its kubeconfig."""
        return vendor_install.Kubectl(self.kubeconfig, self.k8s_version)

    def plugin_info(self, node: str, driver: str) -> PluginChoice:
        """GetPluginInfo of `driver` as its node plugin on `node` answers it (vendor_install)."""
        assert self.engine is not None
        container = kind_containers(self.cluster, self.topology).get(node)
        if container is None:
            return PluginChoice(node, None, why=f"node {node} is not a node of kind cluster {self.cluster}")
        return vendor_install.plugin_info(self.engine, container, node, driver)

    def _await_nodes_ready(self) -> None:
        """kind's --wait covers the control plane; the suites need every worker Ready."""
        kubectl = ensure_binaries(self.k8s_version, only=("kubernetes",)).kubectl
        proc = subprocess.run([str(kubectl), "--kubeconfig", str(self.kubeconfig), "wait", "--for=condition=Ready",
                               "nodes", "--all", "--timeout=120s"], capture_output=True, text=True, timeout=150, check=False)
        if proc.returncode != 0:
            raise ClusterError(f"kind cluster {self.cluster}: nodes not Ready within 120s: {last_line(proc)}"
                               f"{self._node_diagnosis()}")

    def _node_diagnosis(self) -> str:
        """What a failed create leaves in the nodes' journals, in one clause."""
        assert self.engine is not None
        for container in (f"{self.cluster}-control-plane", *kind_node_names(self.cluster, self.topology).values()):
            proc = docker(self.engine, ["exec", container, "sh", "-c",
                                        "journalctl -u kubelet --no-pager -n 200 | grep -E ' E[0-9]{4} |failed' | tail -1"],
                          timeout=30)
            if proc.returncode == 0 and proc.stdout.strip():
                return f" (kubelet on {container}: {proc.stdout.strip()[:300]})"
        return ""

    # -- provisioner on the host ---------------------------------------------------------------
    @property
    def _provisioner_state(self) -> Path:
        assert self.directory is not None
        return self.directory / "provisioner.json"

    def _start_provisioner(self) -> None:
        assert self.directory is not None
        binary = ensure_binaries(self.k8s_version, only=("provisioner",)).provisioner
        argv = [str(binary), f"--kubeconfig={self.kubeconfig}", f"-hostpath-root={HOSTPATH_VOLUME_ROOT}", "-v=2"]
        _, record = spawn("provisioner", argv, self.directory / "provisioner.log", tie_to_parent=not self.detached)
        self._provisioner_state.write_text(json.dumps(record.to_json()))

    def _stop_provisioner(self) -> None:
        try:
            record = ProcessRecord.from_json(json.loads(self._provisioner_state.read_text()))
        except (OSError, ValueError, KeyError):
            return
        stop(record, str(self.kubeconfig))
        self._provisioner_state.unlink(missing_ok=True)

    # -- down -----------------------------------------------------------------------------------
    def _teardown(self, quiet: bool = False, keep_engine: bool = False) -> list[str]:
        """Host-side CSI stack or provisioner, cluster, network, files, and the engine if
        pvchaos started it (unless `keep_engine`); returns what could not be removed."""
        problems = []
        self._stop_provisioner()
        if self.directory is not None:
            try:
                kind_csi.host_stack_book(self.directory).stop_all()
            except (RuntimeError, ClusterError) as exc:  # survived SIGKILL; a path no socket can have
                problems.append(f"CSI host stack of {self.cluster}: {exc}")
        if self.engine is None:
            try:
                self.engine = ensure_engine()
            except EngineError as exc:
                return [str(exc)]
        released = kind_csi.release_loop_devices(self.engine, self._container_ids())
        if released:
            _log(f"kind cluster {self.cluster}: detached loop devices still in use on its nodes: {'; '.join(released)}")
        proc = self._kind("delete", "cluster", "--name", self.cluster, "--kubeconfig", str(self.kubeconfig),
                          timeout=300)
        left = self._container_ids()
        if left:  # a node whose pod cgroup runc left frozen cannot be killed: thaw, delete again
            thawed = thaw_containers(left)
            _log(f"kind delete cluster {self.cluster} left {len(left)} containers; thawed {len(thawed)} frozen "
                 f"cgroups in them, deleting again")
            proc = self._kind("delete", "cluster", "--name", self.cluster, "--kubeconfig", str(self.kubeconfig),
                              timeout=300)
            if self._container_ids():
                problems.append(f"kind delete cluster {self.cluster}: containers {', '.join(left)} remain "
                                f"({last_line(proc)})")
        if proc.returncode != 0:
            problems.append(f"kind delete cluster {self.cluster}: {last_line(proc)}")
        if self._owns_network:  # a network someone else left is never removed
            net = docker(self.engine, ["network", "rm", self.network], timeout=60)
            if net.returncode != 0 and "not found" not in (net.stderr or ""):
                problems.append(f"docker network rm {self.network}: {last_line(net)}")
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
        if not keep_engine:
            stop_engine(self.engine)
        if problems and not quiet:
            _log("; ".join(problems))
        return problems

    def _container_ids(self) -> list[str]:
        """The cluster's node containers still on the engine (full ids)."""
        assert self.engine is not None
        listed = docker(self.engine, ["ps", "-aq", "--no-trunc", "--filter",
                                      f"label={CLUSTER_LABEL}={self.cluster}"], timeout=60)
        return listed.stdout.split() if listed.returncode == 0 else []

    def down(self, handle: ClusterHandle | None = None, keep_engine: bool = False) -> None:
        if handle is not None and handle.name != self.cluster:
            raise ClusterError(f"kind backend for {self.cluster!r} asked to delete {handle.name!r}")
        problems = self._teardown(keep_engine=keep_engine)
        if problems:
            raise ClusterError("; ".join(problems))

    def _provisioner_description(self) -> dict[str, str]:
        """Which storage runs, for the cluster's description (the Allure environment)."""
        if self.vendor is not None:
            package = self.vendor.package
            return {"storage": f"vendor package {package.directory} (driver {package.driver_name}, class "
                               f"{package.storage_class}, attachRequired {str(package.attach_required).lower()})"}
        if not self.runs_csi:
            return {"provisioner": f"test double pvchaos-provisioner ({ZONAL_PROVISIONER}, {LOCAL_PROVISIONER}; "
                                   f"hostPath under {HOSTPATH_VOLUME_ROOT})"}
        return {**csi.description(self.csi_options, PROVISIONER.version, ATTACHER.version, RESIZER.version),
                "external-snapshotter": f"{SNAPSHOTTER_VERSION} (csi-snapshotter, snapshot-controller)",
                "csi volumes": f"zonal: per-zone host directory mounted at {kind_csi.NODE_ZONE_DIR} in that zone's "
                               f"workers; node-local: {kind_csi.NODE_DATA_ROOT}/local in the node"}

    def capabilities(self) -> frozenset[str]:
        """What this cluster can do, known before it starts (pure over its configuration):
        the nodes' side is kind's; attach and the pvchaos-csi control files are the storage
        stack's (a vendor's package attaches where its CSIDriver says attachRequired)."""
        caps = {Capability.STATIC_PV, Capability.NODE_FAILURE, Capability.NODE_LABELS,
                Capability.COMPONENT_RESTART, Capability.OWNED, Capability.EPHEMERAL_STORAGE,
                Capability.DYNAMIC_LOCAL, Capability.DYNAMIC_ZONAL, Capability.REAL_KUBELET,
                Capability.CONTAINER_FAULTS}
        if len(self.topology.zones) >= 2:
            caps.add(Capability.ZONES)
        if self.vendor is not None:
            if self.vendor.package.attach_required:
                caps.add(Capability.ATTACH)
            if not self.vendor.package.provisions_immediate:
                caps.add(Capability.WFFC_ONLY)
            if self.vendor.package.runs_snapshotter:
                caps.add(Capability.SNAPSHOTS)
            if "Ephemeral" in self.vendor.package.lifecycle_modes:
                caps.add(Capability.INLINE_EPHEMERAL)
            caps.add(Capability.CLONES)  # the external-provisioner passes a claim source on
            if self.vendor.package.runs_resizer:
                caps |= {Capability.EXPANSION, Capability.MODIFY_VOLUME}
            wiring = self.proxy_wiring()
            if wiring is not None and wiring.wired:
                caps |= {Capability.CSI_PROXY, Capability.CSI_PROXY_VENDOR}
        else:
            caps.add(Capability.PROVISIONING_FAILURES)
            if self.runs_csi:  # block: pvchaos-csi's loop devices (the test double's hostPath has none)
                caps |= {Capability.HARNESS_DRIVER, Capability.CSI_PROXY, Capability.SNAPSHOTS,
                         Capability.CLONES, Capability.BLOCK, Capability.INLINE_EPHEMERAL,
                         Capability.EXPANSION, Capability.MODIFY_VOLUME}
                if self.csi_options.attach_required:
                    caps.add(Capability.ATTACH)
        if dict(self.config().get("featureGates", {})).get(MUTABLE_PV_GATE):
            caps.add(Capability.MUTABLE_PV_AFFINITY)
        return frozenset(caps)

    def handle(self) -> ClusterHandle:
        assert self.engine is not None
        gates = dict(self.config().get("featureGates", {}))
        if self.vendor is not None:
            provisioner: str | None = self.vendor.driver
        else:
            provisioner = csi.DRIVER_NAME if self.runs_csi else ZONAL_PROVISIONER
        names = kind_node_names(self.cluster, self.topology)
        kcm = DEFAULT_KCM_FLAGS if self.kcm_flags is None else self.kcm_flags
        return ClusterHandle(
            name=self.cluster, backend="kind", kubeconfig=self.kubeconfig, context=f"kind-{self.cluster}",
            k8s_version=self.k8s_version, capabilities=self.capabilities(), feature_gates=gates,
            zonal_class_provisioner=provisioner,
            local_class_provisioner=provisioner if self.vendor is not None or self.runs_csi else LOCAL_PROVISIONER,
            faults=KindFaults(self.cluster, self.engine, kind_containers(self.cluster, self.topology), self.network),
            directory=self.directory,
            mountable_volumes=True,
            description={
                "kind": KIND_VERSION, "node image": self.image or "",
                "docker engine": f"{self.engine.host} ({'started by pvchaos' if self.engine.owned else 'the user'})",
                **self._provisioner_description(),
                "node-monitor-grace-period": kcm.get("node-monitor-grace-period", "50s (upstream default)"),
                "nodes": ", ".join(f"{k}={v}" for k, v in names.items()),
            },
        )


class KindProvider:
    """The kind backend as a `Provider` (clusters/provider.py): one harness-owned kind
    cluster per run (or one a user or certify started, `--kind-cluster`), started when the
    run first needs it, and, one at a time beside it, a cluster for any request of another
    shape, gates or storage setting (`shaped-clusters`). Every cluster it starts runs the
    run's storage stack: pvchaos-csi, or the vendor's package (`--driver-package`)."""

    name = "kind"
    features = frozenset({Feature.STARTS_CLUSTERS, Feature.SHAPED_CLUSTERS})

    def problem(self, options: Any) -> str | None:
        if options.kind_cluster and options.kind_cluster not in kind_clusters():
            return (f"--kind-cluster {options.kind_cluster}: no pvchaos kind cluster of that name (there are: "
                    f"{', '.join(kind_clusters()) or 'none'})")
        return None

    def prepare(self, options: Any) -> Teardown | None:
        """Engine, kind, node image and the CSI binaries before any worker starts (so a
        missing piece is one error, not one per test); stops the engine after, if ours."""
        try:
            defaults = ClusterDefaults.parse(options)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        backend = KindBackend.for_request(ClusterRequest(), defaults, cluster="pvchaos")
        backend.prepare()
        engine = backend.engine
        if engine is None:
            return None

        def stop() -> None:
            stop_engine(engine)  # only an engine pvchaos started (and none with kind containers left)
        return stop

    def connect(self, options: Any, defaults: ClusterDefaults,
                hooks: ProvideHooks | None = None) -> tuple[ClusterHandle, Teardown | None]:
        """The run's cluster: the one `--kind-cluster` names (left running, the hooks not
        asked: it is not this run's to configure), or a new one."""
        if options.kind_cluster:
            return KindBackend.attach(options.kind_cluster).handle(), None
        return self.provide(options, ClusterRequest(), defaults, hooks or ProvideHooks())

    def capabilities(self, request: ClusterRequest, defaults: ClusterDefaults,
                     hooks: ProvideHooks) -> frozenset[str]:
        return KindBackend.for_request(request, defaults, cluster="pvchaos").capabilities()

    def missing_details(self, request: ClusterRequest, defaults: ClusterDefaults,
                        hooks: ProvideHooks) -> dict[str, str]:
        backend = KindBackend.for_request(request, defaults, cluster="pvchaos")
        if backend.vendor is None:
            own: dict[str, str] = {}
            if backend.runs_csi and not backend.csi_options.attach_required:
                own[Capability.ATTACH] = csi.NO_ATTACH_ASKED
            return own
        driver = backend.vendor.driver
        details: dict[str, str] = {Capability.HARNESS_DRIVER: f"driver {driver} is a vendor's, not pvchaos-csi",
                   Capability.PROVISIONING_FAILURES: "only the harness's own drivers fail on pvchaos.dev/fail-*"}
        if not backend.vendor.package.attach_required:
            details[Capability.ATTACH] = f"driver {driver}'s CSIDriver sets attachRequired false"
        if not backend.vendor.package.runs_snapshotter:
            details[Capability.SNAPSHOTS] = f"driver {driver}'s package runs no csi-snapshotter sidecar: not supported"
        if not backend.vendor.package.runs_resizer:
            for capability in (Capability.EXPANSION, Capability.MODIFY_VOLUME):
                details[capability] = f"driver {driver}'s package runs no csi-resizer sidecar: not supported"
        if "Ephemeral" not in backend.vendor.package.lifecycle_modes:
            details[Capability.INLINE_EPHEMERAL] = (f"driver {driver}'s CSIDriver lists volumeLifecycleModes "
                                                    f"{list(backend.vendor.package.lifecycle_modes)}: not supported")
        return details

    def provide(self, options: Any, request: ClusterRequest, defaults: ClusterDefaults,
                hooks: ProvideHooks) -> tuple[ClusterHandle, Teardown | None]:
        """A new cluster for this request, its storage stack the request's (clusters/pool.py),
        with the run's last word on it (`hooks.configure` gets and returns the KindBackend
        before it starts; `hooks.started` is told once it is up: the self-checks break it)."""
        backend = hooks.configure(KindBackend.for_request(request, defaults, cluster=f"pvchaos-{secrets.token_hex(3)}"))
        handle = backend.up()
        try:
            hooks.started(backend, handle)
        except BaseException:
            backend.down(handle)
            raise
        return handle, lambda: backend.down(handle)

    def cluster_up(self, args: argparse.Namespace) -> ClusterHandle:
        if (args.disable_controller or args.disable_scheduler_plugin or args.no_provisioner or args.kcm_flag
                or args.provisioner != "csi"):
            raise ClusterError("cluster up --backend kind: --disable-controller, --disable-scheduler-plugin, "
                               "--kcm-flag, --no-provisioner and --provisioner are for the local backend")
        try:
            gates = {**default_gates(args.k8s_version), **parse_feature_gates(args.feature_gates)}
            backend = KindBackend(cluster=args.name, topology=Topology.parse(args.zones, args.nodes_per_zone),
                                  k8s_version=args.k8s_version, feature_gates=gates, detached=True)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        return backend.up()

    def cluster_down(self, name: str | None) -> list[str]:
        chosen = [k for k in kind_clusters() if name is None or k == name]
        if name is not None and not chosen:
            raise ClusterError(f"no kind cluster of pvchaos named {name!r}; see: pvchaos cluster list")
        for cluster in chosen:
            KindBackend(cluster=cluster).down()
        return [f"removed kind cluster {c}" for c in chosen]

    def cluster_list(self) -> list[str]:
        return [f"{name}\tkind\t-\tdetached\t{kind_directory(name) / 'kubeconfig'}" for name in kind_clusters()]


PROVIDER = KindProvider()


def _log(msg: str) -> None:
    print(f"[pvchaos kind] {msg}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.stdout.write(render_yaml(kind_config()))

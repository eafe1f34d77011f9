"""Settings of one local cluster, and the component flags they turn into (pure).

Kept apart from the launcher so the flags a configuration produces can be unit-tested
without starting anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

# minor_of, parse_feature_gates, gates_for_version and the gate names live in clusters/common/gates.py;
# the local backend re-exports them under their old names here.
from pvchaos.clusters.common.gates import GATE_FIRST_MINOR, MUTABLE_PV_GATE, minor_of
from pvchaos.clusters.common.gates import gates_for_version as gates_for_version
from pvchaos.clusters.common.gates import parse_feature_gates as parse_feature_gates
from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.topology import NodeSpec, Topology
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

RESCHEDULE_MODES = ("guarded", "library", "off")
PROVISIONER_KINDS = ("csi", "test-double")


class Timings(TypedDict, total=False):
    """Timing fields of LocalClusterConfig that a cluster's size may override."""

    node_lease_seconds: int
    node_monitor_grace_seconds: int
    node_monitor_period_seconds: int
    pv_sync_seconds: int
    node_eviction_rate: float

# Upstream's defaults for what our small clusters shorten: kubelet's nodeLeaseDurationSeconds,
# the controller-manager's --node-monitor-grace-period (50 s since 1.32), --node-monitor-period
# --pvclaimbinder-sync-period and --node-eviction-rate.
UPSTREAM_TIMINGS: Timings = {"node_lease_seconds": 40, "node_monitor_grace_seconds": 50,
                             "node_monitor_period_seconds": 5, "pv_sync_seconds": 15, "node_eviction_rate": 0.1}
BUSY_RENEWALS = 100  # Lease renewals a second past which a cluster takes upstream's timings
KCM_CLIENT = (500, 1000)  # the controller-manager's client qps and burst unless a config sets them
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")


@dataclass(frozen=True)
class LocalClusterConfig:
    """Everything that makes one local cluster differ from another."""

    name: str
    k8s_version: str = DEFAULT_K8S_VERSION
    topology: Topology = field(default_factory=Topology)
    feature_gates: dict[str, bool] = field(default_factory=dict)
    disabled_controllers: tuple[str, ...] = ()  # kube-controller-manager --controllers=-X
    disabled_scheduler_plugins: tuple[str, ...] = ()  # e.g. VolumeBinding
    provisioner: bool = True  # False: no dynamic provisioning at all
    # What provisions: "csi" (default), upstream's external-provisioner and
    # external-attacher with our driver pvchaos-csi (pvchaos/clusters/csi.py), so
    # rescheduling, retries and events are upstream's; or "test-double", the old
    # pvchaos-provisioner (zonal.csi.pvchaos.dev, local.csi.pvchaos.dev), kept to compare
    # the two (bench/csi_provisioning.py) and for the reschedule-race findings it
    # reproduces (bench/reschedule_loop.py, provisioner_reschedule below).
    provisioner_kind: str = "csi"
    csi: CsiOptions = field(default_factory=CsiOptions)
    # Who removes selected-node after a provisioning failure that asks for another node
    # (tools/provisioner/reschedule.go): "guarded" (ours), "library" (v13.1.0's, racy:
    # bench/reschedule_loop.py), "off" (nobody: a broken reschedule, for self-checks).
    provisioner_reschedule: str = "guarded"
    node_monitor_grace_seconds: int = 8  # upstream default 50 s; short so loss shows in seconds
    node_lease_seconds: int = 4  # KWOK renews every quarter of this
    node_monitor_period_seconds: int = 1  # how often the lifecycle controller looks at every node; upstream 5 s
    pv_sync_seconds: int = 5  # --pvclaimbinder-sync-period, upstream default 15 s
    # --node-eviction-rate: nodes a second a healthy zone's tainter may NoExecute-taint
    # (upstream 0.1: a 2-node zone waits 10 s for its second taint). The rule under test
    # (a token bucket per zone, stopped in partial and full disruption) is the same at 1/s;
    # the zone suite's bounds and windows are computed from the configured rate.
    node_eviction_rate: float = 1.0
    extra_kcm_flags: tuple[str, ...] = ()
    extra_apiserver_flags: tuple[str, ...] = ()
    # Client QPS/burst of kube-controller-manager (--kube-api-qps/--kube-api-burst) and
    # kube-scheduler (clientConnection.qps/burst); 0 keeps the defaults: the scheduler's
    # own (50/100), and KCM_CLIENT for the controller-manager, since upstream's 20/30 makes
    # 1,000 nodes wait a minute and more for their taints to go. Storms raise both, as
    # ClusterLoader2 set-ups do.
    client_qps: int = 0
    client_burst: int = 0
    # The scheduler's percentageOfNodesToScore: 0 keeps its adaptive default (42% of 1,000
    # nodes, 50% of small clusters). Large clusters lower it (upstream's "Scheduler
    # Performance Tuning"): the scheduler stops filtering once it has found that share of
    # feasible nodes, which bounds the per-node VolumeBinding work a storm multiplies.
    nodes_to_score_percent: int = 0
    # Go CPU/heap profiles at /debug/pprof of kube-apiserver (admin token), the
    # controller-manager and the scheduler (loopback only, no credentials; /metrics too):
    # how a storm's bottleneck is found (bench.storm --profile).
    profiling: bool = False

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"cluster name {self.name!r}: use 1-40 lowercase letters, digits and '-'")
        minor = minor_of(self.k8s_version)
        for gate, first in GATE_FIRST_MINOR.items():
            if gate in self.feature_gates and minor < first:
                raise ValueError(
                    f"feature gate {gate} does not exist in {self.k8s_version} (first in 1.{first}); "
                    "the components would refuse to start"
                )
        if self.provisioner_kind not in PROVISIONER_KINDS:
            raise ValueError(f"provisioner_kind {self.provisioner_kind!r}: use one of {', '.join(PROVISIONER_KINDS)}")
        if self.provisioner_reschedule not in RESCHEDULE_MODES:
            raise ValueError(f"provisioner_reschedule {self.provisioner_reschedule!r}: use one of {', '.join(RESCHEDULE_MODES)}")
        if not 0 <= self.nodes_to_score_percent <= 100:
            raise ValueError(f"nodes_to_score_percent {self.nodes_to_score_percent}: use 0 (the scheduler's default) to 100")
        if self.node_eviction_rate <= 0:
            raise ValueError(f"node_eviction_rate {self.node_eviction_rate}: use a rate above 0 nodes a second")
        if self.client_qps < 0 or self.client_burst < 0:
            raise ValueError(f"client_qps {self.client_qps}, client_burst {self.client_burst}: use 0 (default) or more")
        if self.topology.node_count > MAX_NODES:
            raise ValueError(f"topology: {self.topology.node_count} nodes; a local cluster has room for {MAX_NODES}")
        if self.node_lease_seconds * 0.5 >= self.node_monitor_grace_seconds:
            raise ValueError("node_monitor_grace_seconds must exceed half the node lease duration")

    @property
    def minor(self) -> int:
        return minor_of(self.k8s_version)

    @property
    def runs_csi(self) -> bool:
        """Dynamic volumes come from the CSI stack (not the test double, not none)."""
        return self.provisioner and self.provisioner_kind == "csi"

    @property
    def runs_test_double(self) -> bool:
        return self.provisioner and self.provisioner_kind == "test-double"

    def effective_gates(self) -> dict[str, bool]:
        """MutablePVNodeAffinity on by default from 1.35 (the suites test it); overridable."""
        gates: dict[str, bool] = {}
        if self.minor >= GATE_FIRST_MINOR[MUTABLE_PV_GATE]:
            gates[MUTABLE_PV_GATE] = True
        gates.update(self.feature_gates)
        return gates


def timings_for(node_count: int) -> Timings:
    """The timing fields a cluster of `node_count` nodes takes instead of ours ({} for none).

    Our short timings make a node's loss show in seconds, but KWOK renews every Lease each
    quarter of its duration: 1,000 nodes at 4 s are 1,000 writes a second, more than the
    apiserver of a 2-core machine serves, and a storm beside them crawls (docs/findings.md).
    The lifecycle controller's 1 s sweep and the PV controller's 5 s resync of every claim
    grow with the cluster too. Past BUSY_RENEWALS a cluster runs upstream's timings, as a
    real one of that size does.
    """
    if node_count * 4 / LocalClusterConfig.node_lease_seconds <= BUSY_RENEWALS:
        return {}
    return UPSTREAM_TIMINGS.copy()


def sized(cfg: LocalClusterConfig) -> LocalClusterConfig:
    """`cfg` with the timings its node count calls for (timings_for)."""
    return replace(cfg, **timings_for(cfg.topology.node_count))


def gates_flag(gates: dict[str, bool]) -> list[str]:
    if not gates:
        return []
    return ["--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))]


def apiserver_args(cfg: LocalClusterConfig, d: Path, etcd_port: int, port: int) -> list[str]:
    """Flags for a loopback-only apiserver with a static admin token and our own
    serving certificate (its own would cost an RSA key at every start).

    ServiceAccount admission is off: no kubelet ever mounts a token here, and it would
    reject pods created in the instant before a new namespace's default account exists.
    """
    return [
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={d / 'pki'}",
        *_serving_cert_flags(d),
        f"--token-auth-file={d / 'pki' / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={d / 'pki' / 'sa.key'}",
        f"--service-account-signing-key-file={d / 'pki' / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--disable-admission-plugins=ServiceAccount",
        "--enable-priority-and-fairness=false",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        f"--profiling={str(cfg.profiling).lower()}",
        *gates_flag(cfg.effective_gates()),
        *cfg.extra_apiserver_flags,
    ]


def controller_manager_args(cfg: LocalClusterConfig, d: Path, port: int) -> list[str]:
    controllers = ",".join(["*", *(f"-{c}" for c in cfg.disabled_controllers)])
    return [
        f"--kubeconfig={d / 'kubeconfig'}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--controllers={controllers}",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={d / 'pki' / 'sa.key'}",
        f"--node-monitor-period={cfg.node_monitor_period_seconds}s",
        f"--node-monitor-grace-period={cfg.node_monitor_grace_seconds}s",
        f"--pvclaimbinder-sync-period={cfg.pv_sync_seconds}s",
        f"--node-eviction-rate={cfg.node_eviction_rate:g}",
        *_serving_cert_flags(d),
        *_profiling_flags(cfg),
        f"--kube-api-qps={cfg.client_qps or KCM_CLIENT[0]}",
        f"--kube-api-burst={cfg.client_burst or KCM_CLIENT[1]}",
        *gates_flag(cfg.effective_gates()),
        *cfg.extra_kcm_flags,
    ]


def scheduler_config_yaml(cfg: LocalClusterConfig, d: Path) -> str:
    """A KubeSchedulerConfiguration; disabling a plugin takes it out of every extension point."""
    lines = [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "clientConnection:",
        f"  kubeconfig: {d / 'kubeconfig'}",
        *([f"  qps: {cfg.client_qps}"] if cfg.client_qps else []),
        *([f"  burst: {cfg.client_burst}"] if cfg.client_burst else []),
        "leaderElection:",
        "  leaderElect: false",
        *([f"percentageOfNodesToScore: {cfg.nodes_to_score_percent}"] if cfg.nodes_to_score_percent else []),
    ]
    if cfg.disabled_scheduler_plugins:
        lines += ["profiles:", "- schedulerName: default-scheduler", "  plugins:", "    multiPoint:", "      disabled:"]
        lines += [f"      - name: {p}" for p in cfg.disabled_scheduler_plugins]
    return "\n".join(lines) + "\n"


def scheduler_args(cfg: LocalClusterConfig, d: Path, port: int) -> list[str]:
    return [
        f"--config={d / 'scheduler.yaml'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        *_serving_cert_flags(d),
        *_profiling_flags(cfg),
        *gates_flag(cfg.effective_gates()),
    ]


def _serving_cert_flags(d: Path) -> list[str]:
    """The cluster's P-256 serving certificate (loopback names), for the apiserver, the
    controller-manager and the scheduler alike: without one each makes an RSA-2048 key at
    start, 0.2 s of the controller-manager's critical path to the nodes' readiness."""
    return [f"--tls-cert-file={d / 'pki' / 'apiserver.crt'}", f"--tls-private-key-file={d / 'pki' / 'apiserver.key'}"]


def _profiling_flags(cfg: LocalClusterConfig) -> list[str]:
    """Profiles and metrics readable without credentials (the port is loopback-only):
    delegated authorization would otherwise ask the apiserver about every scrape."""
    if not cfg.profiling:
        return ["--profiling=false"]
    return ["--profiling=true", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*"]


def etcd_args(d: Path, client_port: int, peer_port: int) -> list[str]:
    """A single-member etcd without fsync: test data, speed over durability. A lone member
    still waits one election timeout before it leads (1 s by default, a quarter of a cluster's
    start); with no peer to lose, 100 ms is as safe."""
    return [
        "--name=pvchaos",
        f"--data-dir={d / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{client_port}",
        f"--advertise-client-urls=http://127.0.0.1:{client_port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=pvchaos=http://127.0.0.1:{peer_port}",
        "--unsafe-no-fsync",
        "--heartbeat-interval=20",
        "--election-timeout=100",
        "--quota-backend-bytes=2147483648",
        "--log-level=warn",
    ]


CONTROLLER_LABEL = "kwok.pvchaos.dev/controller"
MAX_NODES = 250 * 156  # 10.100.0.0/24 ... 10.255.249.0/24
STOPPED = "stopped"  # a CONTROLLER_LABEL value no KWOK controller selects: a node nobody heartbeats


def kwok_args(cfg: LocalClusterConfig, d: Path, controller: str, stages: Path) -> list[str]:
    """One KWOK controller per zone, serving the nodes whose CONTROLLER_LABEL names it.

    A label, not an annotation: KWOK v0.8.0 filters annotations in the client, so a node
    whose annotation changes is silently kept (its Lease renewed), while a label selector
    goes to the apiserver, whose watch turns "no longer matches" into a DELETED event on
    which KWOK releases the node's Lease at once (node_controller.go, onNodeUnmanaged).
    Node addresses and pod CIDRs are per node, in the Node object (node_network); the
    flags below are only KWOK's fallbacks for a node that has none.
    """
    return [
        f"--kubeconfig={d / 'kubeconfig'}",
        f"--config={stages}",
        f"--manage-nodes-with-label-selector={CONTROLLER_LABEL}={controller}",
        f"--node-lease-duration-seconds={cfg.node_lease_seconds}",
        "--node-ip=10.254.255.254",
        "--cidr=10.254.0.0/24",
    ]


def node_network(index: int) -> tuple[str, str]:
    """The InternalIP and pod CIDR (a /24, room for 110 pods) of the index-th node:
    distinct for up to 39,000 nodes."""
    if not 0 <= index < MAX_NODES:
        raise ValueError(f"node index {index}: only {MAX_NODES} nodes have distinct addresses")
    return f"10.255.{index // 250}.{index % 250 + 1}", f"10.{100 + index // 250}.{index % 250}.0/24"


def node_object(spec: NodeSpec, index: int, controller: str) -> dict[str, Any]:
    """The Node a local cluster creates: the topology's, plus the label that picks its KWOK
    controller, its own address and pod CIDR (KWOK renders both from the object)."""
    obj = spec.to_node_object()
    ip, cidr = node_network(index)
    obj["metadata"]["labels"][CONTROLLER_LABEL] = controller
    obj["spec"] = {"podCIDR": cidr, "podCIDRs": [cidr]}
    obj["status"]["addresses"] = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": spec.name}]
    return obj


def provisioner_args(d: Path, reschedule: str = "guarded") -> list[str]:
    return [f"--kubeconfig={d / 'kubeconfig'}", "-v=2", f"-reschedule={reschedule}"]

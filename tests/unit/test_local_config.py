"""pvchaos.clusters.local.config and clusters.topology: the flags a configuration turns into, and
the mistakes refused before any process starts (pure; nothing is launched)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pvchaos.clusters.local import config as flags
from pvchaos.clusters.local.config import MUTABLE_PV_GATE, LocalClusterConfig, parse_feature_gates
from pvchaos.clusters.topology import HOSTNAME_KEY, KWOK_ANNOTATION, OWNER_LABEL, REGION_KEY, ZONE_KEY, Topology

D = Path("/state/c1")
GATE_ON = f"--feature-gates={MUTABLE_PV_GATE}=true"


def all_component_args(cfg: LocalClusterConfig) -> dict[str, list[str]]:
    return {
        "kube-apiserver": flags.apiserver_args(cfg, D, 2379, 6443),
        "kube-controller-manager": flags.controller_manager_args(cfg, D, 10257),
        "kube-scheduler": flags.scheduler_args(cfg, D, 10259),
    }


# ---- feature gates -----------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1.35.4", "v1.36.3", "v1.37.2"])
def test_mutable_pv_gate_on_by_default_from_1_35(version: str) -> None:
    cfg = LocalClusterConfig(name="c1", k8s_version=version)
    assert cfg.effective_gates() == {MUTABLE_PV_GATE: True}
    for component, args in all_component_args(cfg).items():
        assert GATE_ON in args, component


def test_no_gate_flag_at_all_for_1_34() -> None:
    cfg = LocalClusterConfig(name="c1", k8s_version="v1.34.4")
    assert cfg.effective_gates() == {}
    for component, args in all_component_args(cfg).items():
        assert not [a for a in args if a.startswith("--feature-gates")], component


@pytest.mark.parametrize("value", [True, False])
def test_1_34_request_for_the_gate_is_refused_in_one_line(value: bool) -> None:
    with pytest.raises(ValueError) as err:
        LocalClusterConfig(name="c1", k8s_version="v1.34.4", feature_gates={MUTABLE_PV_GATE: value})
    msg = str(err.value)
    assert len(msg.splitlines()) == 1
    assert MUTABLE_PV_GATE in msg and "v1.34.4" in msg and "1.35" in msg


def test_gate_can_be_turned_off_and_others_added() -> None:
    cfg = LocalClusterConfig(name="c1", feature_gates={MUTABLE_PV_GATE: False, "Zeta": True})
    assert cfg.effective_gates() == {MUTABLE_PV_GATE: False, "Zeta": True}
    assert f"--feature-gates={MUTABLE_PV_GATE}=false,Zeta=true" in flags.apiserver_args(cfg, D, 1, 2)


def test_parse_feature_gates() -> None:
    assert parse_feature_gates("") == {}
    assert parse_feature_gates("A=true, B=False,,") == {"A": True, "B": False}


@pytest.mark.parametrize("bad", ["A", "A=yes", "=true", "A=true,B", "A=1"])
def test_parse_feature_gates_errors_name_the_item(bad: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_feature_gates(bad)
    msg = str(err.value)
    assert len(msg.splitlines()) == 1 and msg.startswith("--feature-gates:") and "NAME=true|false" in msg


# ---- controllers, scheduler plugins, component flags ------------------------------------------

def test_disabled_controllers_become_minus_entries() -> None:
    cfg = LocalClusterConfig(name="c1", disabled_controllers=("nodelifecycle", "persistentvolume-binder"))
    args = flags.controller_manager_args(cfg, D, 10257)
    assert "--controllers=*,-nodelifecycle,-persistentvolume-binder" in args
    assert "--controllers=*" in flags.controller_manager_args(LocalClusterConfig(name="c1"), D, 10257)


def test_disabled_scheduler_plugins_leave_every_extension_point() -> None:
    cfg = LocalClusterConfig(name="c1", disabled_scheduler_plugins=("VolumeBinding", "VolumeZone"))
    doc = yaml.safe_load(flags.scheduler_config_yaml(cfg, D))
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert doc["clientConnection"]["kubeconfig"] == str(D / "kubeconfig")
    assert doc["leaderElection"] == {"leaderElect": False}
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    assert profile["plugins"] == {"multiPoint": {"disabled": [{"name": "VolumeBinding"}, {"name": "VolumeZone"}]}}
    plain = yaml.safe_load(flags.scheduler_config_yaml(LocalClusterConfig(name="c1"), D))
    assert "profiles" not in plain


def test_nodes_to_score_is_the_schedulers_only_when_asked() -> None:
    tuned = LocalClusterConfig(name="c1", nodes_to_score_percent=10, disabled_scheduler_plugins=("VolumeZone",))
    doc = yaml.safe_load(flags.scheduler_config_yaml(tuned, D))
    assert doc["percentageOfNodesToScore"] == 10 and doc["profiles"]
    assert "percentageOfNodesToScore" not in yaml.safe_load(flags.scheduler_config_yaml(LocalClusterConfig(name="c1"), D))
    with pytest.raises(ValueError, match="nodes_to_score_percent 101"):
        LocalClusterConfig(name="c1", nodes_to_score_percent=101)


def test_scheduler_reads_its_config_file() -> None:
    args = flags.scheduler_args(LocalClusterConfig(name="c1"), D, 10259)
    assert f"--config={D / 'scheduler.yaml'}" in args and "--secure-port=10259" in args


def test_apiserver_is_loopback_only_token_authenticated_without_sa_admission() -> None:
    cfg = LocalClusterConfig(name="c1", extra_apiserver_flags=("--v=4",))
    args = flags.apiserver_args(cfg, D, 2379, 6443)
    for want in ("--etcd-servers=http://127.0.0.1:2379", "--bind-address=127.0.0.1", "--secure-port=6443",
                 f"--token-auth-file={D / 'pki' / 'tokens.csv'}", "--disable-admission-plugins=ServiceAccount",
                 "--authorization-mode=RBAC"):
        assert want in args
    assert args[-1] == "--v=4"  # extra flags last, so they override


def test_node_timings_reach_the_controller_manager() -> None:
    cfg = LocalClusterConfig(name="c1", node_monitor_grace_seconds=12, pv_sync_seconds=3,
                             extra_kcm_flags=("--v=3",))
    args = flags.controller_manager_args(cfg, D, 10257)
    assert "--node-monitor-grace-period=12s" in args and "--pvclaimbinder-sync-period=3s" in args
    assert "--leader-elect=false" in args and args[-1] == "--v=3"


def test_grace_must_exceed_half_the_lease() -> None:
    with pytest.raises(ValueError, match="node_monitor_grace_seconds"):
        LocalClusterConfig(name="c1", node_lease_seconds=20, node_monitor_grace_seconds=8)


def test_kwok_serves_the_nodes_labelled_with_its_zone() -> None:
    cfg = LocalClusterConfig(name="c1", node_lease_seconds=4)
    a = flags.kwok_args(cfg, D, "zone-a", Path("/s.yaml"))
    assert f"--manage-nodes-with-label-selector={flags.CONTROLLER_LABEL}=zone-a" in a
    assert "--node-lease-duration-seconds=4" in a
    assert not any(x.startswith("--manage-single-node") for x in a)


def test_nodes_have_distinct_addresses_and_pod_cidrs_and_their_controller_label() -> None:
    specs = Topology(zones=("zone-a", "zone-b"), nodes_per_zone=300).nodes()
    objs = [flags.node_object(s, i, s.zone) for i, s in enumerate(specs)]
    ips = {o["status"]["addresses"][0]["address"] for o in objs}
    cidrs = {o["spec"]["podCIDR"] for o in objs}
    assert len(ips) == len(cidrs) == 600
    assert all(o["metadata"]["labels"][flags.CONTROLLER_LABEL] == o["metadata"]["labels"][ZONE_KEY] for o in objs)
    assert flags.STOPPED not in {s.zone for s in specs}
    assert "kwok.pvchaos.dev/controller" not in specs[0].labels  # the topology's own labels are untouched
    with pytest.raises(ValueError, match="distinct addresses"):
        flags.node_network(flags.MAX_NODES)


def test_too_many_nodes_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="room for"):
        LocalClusterConfig(name="c1", topology=Topology(zones=("z",), nodes_per_zone=flags.MAX_NODES + 1))


def test_etcd_listens_on_loopback_ports_given() -> None:
    args = flags.etcd_args(D, 12379, 12380)
    assert "--listen-client-urls=http://127.0.0.1:12379" in args
    assert "--listen-peer-urls=http://127.0.0.1:12380" in args
    assert f"--data-dir={D / 'etcd'}" in args


def test_every_process_names_the_cluster_directory() -> None:
    """The directory is the marker that lets teardown tell our pids from recycled ones."""
    cfg = LocalClusterConfig(name="c1")
    argvs = [*all_component_args(cfg).values(), flags.etcd_args(D, 1, 2),
             flags.kwok_args(cfg, D, "zone-a", Path("/s.yaml")), flags.provisioner_args(D, cfg.provisioner_reschedule)]
    for argv in argvs:
        assert any(str(D) in a for a in argv), argv


# ---- names and versions -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["t1", "a", "dev-2", "x" * 40])
def test_valid_names(name: str) -> None:
    assert LocalClusterConfig(name=name).name == name


@pytest.mark.parametrize("name", ["", "Dev", "under_score", "-lead", "trail-", "x" * 41, "a/b", "a.b"])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="cluster name"):
        LocalClusterConfig(name=name)


@pytest.mark.parametrize("version", ["1.35.4", "v1.35", "latest", "v1.35.4-gke.0"])
def test_invalid_versions_are_refused(version: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes release version"):
        LocalClusterConfig(name="c1", k8s_version=version)


# ---- topology ------------------------------------------------------------------------------

def test_topology_parse_counts_and_names() -> None:
    assert Topology.parse("3").zones == ("zone-a", "zone-b", "zone-c")
    assert Topology.parse(2, 1) == Topology(zones=("zone-a", "zone-b"), nodes_per_zone=1)
    assert Topology.parse("east, west").zones == ("east", "west")
    assert Topology.parse(None) == Topology()
    assert Topology.parse("26").zones[-1] == "zone-z"


@pytest.mark.parametrize(("zones", "npz", "match"), [
    ("0", None, "--zones"), ("27", None, "--zones"), ("a,a", None, "repeat"), (" , ", None, "at least one"),
    ("2", 0, "nodes_per_zone"),
])
def test_topology_parse_errors(zones: str, npz: int | None, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        Topology.parse(zones, npz)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("zones", ["zone a", "-1", "Zone_A"])
def test_zone_names_must_be_usable_in_node_names_and_labels(zones: str) -> None:
    with pytest.raises(ValueError):
        Topology.parse(zones)


def test_node_labels_and_allocatable() -> None:
    topo = Topology(zones=("zone-a", "zone-b"), nodes_per_zone=3, extra_labels={"team": "storage"})
    nodes = topo.nodes()
    assert [n.name for n in nodes] == ["zone-a-1", "zone-a-2", "zone-a-3", "zone-b-1", "zone-b-2", "zone-b-3"]
    assert topo.node_count == 6
    for n in nodes:
        assert n.labels[ZONE_KEY] == n.zone and n.name.startswith(n.zone)
        assert n.labels[REGION_KEY] == "region-1"
        assert n.labels[HOSTNAME_KEY] == n.name
        assert n.labels[OWNER_LABEL] == "true" and n.labels["team"] == "storage"
        assert set(n.allocatable) == {"cpu", "memory", "pods", "ephemeral-storage"}
    assert [n.labels["storage"] for n in nodes[:3]] == ["ssd", "standard", "ssd"]


def test_hostname_prefix_and_no_storage_labels() -> None:
    (node,) = Topology(zones=("z",), nodes_per_zone=1, hostname_prefix="host-", storage_labels=()).nodes()
    assert node.labels[HOSTNAME_KEY] == "host-z-1" and node.name == "z-1"
    assert "storage" not in node.labels


def test_node_object_is_a_kwok_fake_with_its_allocatable() -> None:
    (spec,) = Topology(zones=("zone-a",), nodes_per_zone=1).nodes()
    obj = spec.to_node_object()
    assert obj["kind"] == "Node" and obj["metadata"]["name"] == "zone-a-1"
    assert obj["metadata"]["annotations"] == {KWOK_ANNOTATION: "fake"}
    assert obj["status"]["allocatable"] == obj["status"]["capacity"] == spec.allocatable
    obj["metadata"]["labels"]["x"] = "y"
    assert "x" not in spec.labels  # a copy: mutating the object leaves the spec alone


def test_provisioner_reschedule_mode_reaches_its_flag_and_typos_are_refused() -> None:
    assert "-reschedule=guarded" in flags.provisioner_args(D, LocalClusterConfig(name="c1").provisioner_reschedule)
    assert "-reschedule=library" in flags.provisioner_args(D, "library")
    with pytest.raises(ValueError, match="provisioner_reschedule 'sometimes'"):
        LocalClusterConfig(name="c1", provisioner_reschedule="sometimes")


def test_past_a_hundred_lease_renewals_a_second_a_cluster_runs_upstream_timings() -> None:
    small = LocalClusterConfig(name="c1", topology=Topology(nodes_per_zone=33))  # 99 nodes: 99 renewals/s
    big = LocalClusterConfig(name="c1", topology=Topology(nodes_per_zone=34))  # 102 nodes
    assert flags.timings_for(small.topology.node_count) == {} and flags.sized(small) == small
    sized = flags.sized(big)
    assert (sized.node_lease_seconds, sized.node_monitor_grace_seconds) == (40, 50)
    kcm = flags.controller_manager_args(sized, Path("/tmp/x"), 1)
    assert "--node-monitor-period=5s" in kcm and "--pvclaimbinder-sync-period=15s" in kcm
    assert "--node-eviction-rate=0.1" in kcm and "--node-eviction-rate=1" in flags.controller_manager_args(
        small, Path("/tmp/x"), 1)
    assert "--node-lease-duration-seconds=40" in flags.kwok_args(sized, Path("/tmp/x"), "zone-a", Path("/s"))


def test_profiling_opens_pprof_and_metrics_only_when_asked() -> None:
    from pvchaos.clusters.local.config import apiserver_args, scheduler_args
    off = LocalClusterConfig(name="c1")
    on = LocalClusterConfig(name="c1", profiling=True)
    d = Path("/tmp/x")
    assert "--profiling=false" in flags.controller_manager_args(off, d, 1) and "--profiling=false" in scheduler_args(off, d, 1)
    assert "--profiling=false" in apiserver_args(off, d, 1, 2)
    for args in (flags.controller_manager_args(on, d, 1), scheduler_args(on, d, 1)):
        assert "--profiling=true" in args
        assert any(a.startswith("--authorization-always-allow-paths=") and "/debug/pprof/*" in a for a in args)
    assert "--profiling=true" in apiserver_args(on, d, 1, 2)


def test_controller_manager_and_scheduler_serve_with_the_clusters_certificate() -> None:
    """Without a certificate each would make an RSA key at start (0.2 s before nodes are Ready)."""
    cfg = LocalClusterConfig(name="c1")
    for component in ("kube-controller-manager", "kube-scheduler"):
        args = all_component_args(cfg)[component]
        assert f"--tls-cert-file={D / 'pki' / 'apiserver.crt'}" in args, component
        assert f"--tls-private-key-file={D / 'pki' / 'apiserver.key'}" in args, component


def test_the_pool_sizes_timings_to_the_request_and_a_request_still_overrides_them() -> None:
    from pvchaos.clusters.options import Options
    from pvchaos.clusters.pool import ClusterPool, ClusterRequest
    pool = ClusterPool(Options())
    assert _config_for(pool, ClusterRequest()).node_lease_seconds == 4
    big = _config_for(pool, ClusterRequest(nodes_per_zone=40))  # 120 nodes
    assert (big.node_lease_seconds, big.pv_sync_seconds, big.node_monitor_period_seconds) == (40, 15, 5)
    assert _config_for(pool, ClusterRequest(nodes_per_zone=40, node_monitor_grace_seconds=70)).node_monitor_grace_seconds == 70


def _config_for(pool, request):  # type: ignore[no-untyped-def]
    """The local cluster configuration the pool's provider makes for a request."""
    from pvchaos.clusters.local.provider import PROVIDER
    return PROVIDER.config_for(request, pool.defaults, pool.hooks)

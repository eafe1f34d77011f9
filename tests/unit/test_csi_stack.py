"""The host-side CSI stack's command lines and objects (pvchaos/clusters/csi.py), pure:
the sidecar flags the brief fixes, what the harness writes in a kubelet's place, and a
start that fails naming its component and log with nothing left running."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pvchaos.clusters import csi
from pvchaos.clusters.common.processes import is_ours
from pvchaos.kube import builders as b
from pvchaos.kube.errors import ClusterError

D = Path("/state/c1")
BINS = csi.CsiBinaries(Path("/bin/pvchaos-csi"), Path("/bin/csi-provisioner"), Path("/bin/csi-attacher"),
                       Path("/bin/csi-resizer"))


def test_the_controller_runs_the_drivers_fixed_cli_in_the_clusters_directory() -> None:
    paths = csi.paths_for(D)
    assert csi.controller_args(BINS.driver, paths) == [
        "/bin/pvchaos-csi", "controller", "--endpoint=unix:///state/c1/csi/d.sock",
        "--driver-name=csi.pvchaos.dev", "--state-file=/state/c1/csi/state.json",
        "--calls-log=/state/c1/csi/calls.jsonl", "--data-root=/state/c1/csi/data", "--control-dir=/state/c1/csi/control"]
    assert paths.log("csi-attacher") == D / "logs" / "csi-attacher.log", "beside the cluster's other logs"


def test_the_sidecars_dial_the_fault_proxy_which_forwards_to_the_controller() -> None:
    paths = csi.paths_for(D)
    assert csi.proxy_args(BINS.driver, paths) == [
        "/bin/pvchaos-csi", "proxy", "--listen=unix:///state/c1/csi/c.sock", "--target=unix:///state/c1/csi/d.sock",
        "--rules=/state/c1/csi/proxy-rules.json", "--log=/state/c1/csi/proxy-calls.jsonl"]


def test_provisioner_flags_follow_the_options_and_upstream_defaults() -> None:
    argv = csi.provisioner_args(BINS.provisioner, csi.paths_for(D), D / "kubeconfig", csi.CsiOptions())
    for flag in ("--csi-address=/state/c1/csi/c.sock", "--kubeconfig=/state/c1/kubeconfig",
                 "--leader-election=false", "--feature-gates=Topology=true", "--strict-topology=false",
                 "--immediate-topology=true", "--extra-create-metadata", "--retry-interval-start=250ms",
                 "--retry-interval-max=5s"):
        assert flag in argv
    assert not any(a.startswith("--enable-capacity") for a in argv)
    tracked = csi.provisioner_args(BINS.provisioner, csi.paths_for(D), D / "kubeconfig",
                                   csi.CsiOptions(strict_topology=True, immediate_topology=False,
                                                  capacity_tracking=True))
    assert {"--strict-topology=true", "--immediate-topology=false", "--enable-capacity",
            "--capacity-ownerref-level=-1", "--capacity-poll-interval=2s"} <= set(tracked)


def test_attacher_flags() -> None:
    argv = csi.attacher_args(BINS.attacher, csi.paths_for(D), D / "kubeconfig")
    assert argv[0] == "/bin/csi-attacher"
    assert {"--csi-address=/state/c1/csi/c.sock", "--kubeconfig=/state/c1/kubeconfig",
            "--leader-election=false", "--timeout=15s", "--retry-interval-start=250ms"} <= set(argv)


def test_what_a_kubelet_and_registrar_would_write() -> None:
    node = csi.csi_node_object("zone-a-1", csi.CsiOptions(max_volumes_per_node=7))
    assert node["metadata"]["name"] == "zone-a-1"
    assert node["spec"]["drivers"] == [{"name": "csi.pvchaos.dev", "nodeID": "zone-a-1",
                                        "topologyKeys": ["topology.kubernetes.io/zone", "kubernetes.io/hostname"],
                                        "allocatable": {"count": 7}}]
    unlimited = csi.csi_node_object("zone-a-1", csi.CsiOptions())["spec"]["drivers"][0]
    assert "allocatable" not in unlimited, "the default driver reports no limit: the kubelet writes no count"
    ann = csi.node_annotations("zone-a-1")
    assert json.loads(ann["csi.volume.kubernetes.io/nodeid"]) == {"csi.pvchaos.dev": "zone-a-1"}
    assert ann["volumes.kubernetes.io/controller-managed-attach-detach"] == "true"


def test_the_csidriver_needs_attach_and_says_whether_capacity_is_tracked() -> None:
    spec = csi.csi_driver_object(csi.CsiOptions())["spec"]
    assert spec == {"attachRequired": True, "podInfoOnMount": True, "storageCapacity": False,
                    "fsGroupPolicy": "File", "volumeLifecycleModes": ["Persistent", "Ephemeral"]}
    assert csi.csi_driver_object(csi.CsiOptions(fs_group_policy="None"))["spec"]["fsGroupPolicy"] == "None"
    with pytest.raises(ValueError, match="fs_group_policy"):
        csi.CsiOptions(fs_group_policy="Sometimes")
    assert csi.csi_driver_object(csi.CsiOptions(capacity_tracking=True))["spec"]["storageCapacity"] is True
    # the self-checks' driver without inline volumes: the kubelet then refuses them
    assert csi.csi_driver_object(csi.CsiOptions(fault_no_inline=True))["spec"]["volumeLifecycleModes"] == ["Persistent"]


def test_the_default_driver_has_no_volume_limit_and_the_description_says_so() -> None:
    assert csi.CsiOptions().max_volumes_per_node == 0
    rows = csi.description(csi.CsiOptions(), "v5", "v4", "v2")
    assert rows["csi volume limit"] == "no volume limit (0: unlimited)"
    assert rows["csi capacity"].startswith("not tracked")
    limited = csi.description(csi.CsiOptions(max_volumes_per_node=1, capacity_tracking=True), "v5", "v4", "v2")
    assert limited["csi volume limit"] == "1 volume per node"
    assert limited["csi capacity"] == "tracked (CSIStorageCapacity every 2s)"


def test_static_stand_in_pvs_use_the_driver_the_cluster_exempts_from_attach() -> None:
    pv = b.persistent_volume("pv-1", "1Gi", "sc")
    assert pv["spec"]["csi"]["driver"] == csi.STATIC_DRIVER


def test_bad_options_and_too_deep_a_socket_are_refused() -> None:
    with pytest.raises(ValueError, match="max_volumes_per_node"):
        csi.CsiOptions(max_volumes_per_node=-1)
    with pytest.raises(ClusterError, match="longer than a unix socket allows"):
        csi.paths_for(Path("/" + "d" * 100))
    assert len(str(csi.paths_for(Path("/" + "d" * 95)).socket)) == 107  # the longest a socket may be


def _fake(tmp: Path, name: str, script: str) -> Path:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n{script}\n")
    path.chmod(0o755)
    return path


def test_a_sidecar_that_exits_is_one_line_naming_it_and_its_log_and_nothing_stays(tmp_path: Path) -> None:
    serve = ("import socket, sys, time\n"
             "addr = next(a for a in sys.argv if a.startswith(('--endpoint=', '--listen='))).split('unix://')[1]\n"
             "s = socket.socket(socket.AF_UNIX); s.bind(addr); s.listen(); time.sleep(60)")
    bins = csi.CsiBinaries(_fake(tmp_path, "driver", serve),
                           _fake(tmp_path, "prov", "import sys; print('F0101 no such flag'); sys.exit(3)"),
                           _fake(tmp_path, "att", "import time; print('Starting CSI attacher', flush=True); time.sleep(60)"),
                           _fake(tmp_path, "rsz",
                                 "import time; print('Starting external resizer', flush=True); time.sleep(60)"))
    paths = csi.paths_for(tmp_path)
    book = csi.ProcessBook(paths, marker=str(tmp_path))
    with pytest.raises(ClusterError) as err:
        csi.start_stack(paths, tmp_path / "kubeconfig", bins, csi.CsiOptions(), book, timeout=10)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("csi-provisioner exited at start (exit code 3): F0101 no such flag")
    assert text.endswith(f"(log: {paths.log('csi-provisioner')})")
    records = book._load()
    assert set(records) == {"csi-controller", "csi-proxy", "csi-provisioner", "csi-attacher", "csi-resizer"}
    assert not any(is_ours(r, str(tmp_path)) for r in records.values()), "nothing is left running"


def test_a_stack_that_starts_is_stopped_by_its_book(tmp_path: Path) -> None:
    serve = ("import socket, sys, time\n"
             "addr = next(a for a in sys.argv if a.startswith(('--endpoint=', '--listen='))).split('unix://')[1]\n"
             "s = socket.socket(socket.AF_UNIX); s.bind(addr); s.listen(); time.sleep(60)")
    bins = csi.CsiBinaries(_fake(tmp_path, "driver", serve),
                           _fake(tmp_path, "prov",
                                 "import time; print('Started provisioner controller', flush=True); time.sleep(60)"),
                           _fake(tmp_path, "att", "import time; print('Starting CSI attacher', flush=True); time.sleep(60)"),
                           _fake(tmp_path, "rsz",
                                 "import time; print('Starting external resizer', flush=True); time.sleep(60)"))
    paths = csi.paths_for(tmp_path)
    book = csi.ProcessBook(paths, marker=str(tmp_path))
    csi.start_stack(paths, tmp_path / "kubeconfig", bins, csi.CsiOptions(), book, timeout=10)
    records = book._load()
    assert all(is_ours(r, str(tmp_path)) for r in records.values())
    book.stop_all()
    assert not any(is_ours(r, str(tmp_path)) for r in records.values())


def test_a_tests_calls_are_those_naming_its_volumes() -> None:
    from pvchaos.plugin.csi_calls import matching, pretty
    lines = ['{"method":"CreateVolume","request":{"name":"pvc-1"}}',
             '{"method":"ControllerPublishVolume","request":{"volume_id":"pvchaos-aa"}}',
             '{"method":"CreateVolume","request":{"name":"pvc-2"}}', "", '{"method":"Probe"}']
    mine = matching(lines, ["pvc-1", "pvchaos-aa", ""])
    assert [json.loads(ln)["method"] for ln in mine] == ["CreateVolume", "ControllerPublishVolume"]
    assert pretty(mine).count("\n") == 1 and pretty(["not json"]) == "not json"


def test_the_registrar_adds_our_driver_once_and_keeps_the_others() -> None:
    from pvchaos.clusters.local.csi_registrar import argv, registration
    opts = csi.CsiOptions(max_volumes_per_node=5)
    fresh = registration(None, "joined-1", opts)
    assert fresh == csi.csi_node_object("joined-1", opts)
    other = {"metadata": {"name": "joined-1"}, "spec": {"drivers": [{"name": "other.csi", "nodeID": "x"}]}}
    both = registration(other, "joined-1", opts)
    assert both is not None and [d["name"] for d in both["spec"]["drivers"]] == ["other.csi", csi.DRIVER_NAME]
    assert both["spec"]["drivers"][1]["allocatable"] == {"count": 5}
    assert registration(both, "joined-1", opts) is None, "already registered: nothing to write"
    line = argv(D / "kubeconfig", opts)
    assert line[1:3] == ["-m", "pvchaos.clusters.local.csi_registrar"] and "--max-volumes-per-node=5" in line


def test_the_resizer_dials_the_proxy_and_a_self_check_can_turn_its_modify_controller_off() -> None:
    paths = csi.paths_for(D)
    argv = csi.resizer_args(BINS.resizer, paths, Path("/k"))
    assert argv[:4] == ["/bin/csi-resizer", "--csi-address=/state/c1/csi/c.sock", "--kubeconfig=/k",
                        "--leader-election=false"]
    assert not any(a.startswith("--feature-gates") for a in argv), "the resizer's own VolumeAttributesClass check"
    broken = csi.resizer_args(BINS.resizer, paths, Path("/k"), csi.CsiOptions(fault_resizer_no_modify=True))
    assert "--feature-gates=VolumeAttributesClass=false" in broken
    assert csi.description(csi.CsiOptions(), "v6", "v4", "v2.3.0")["external-resizer"] == "v2.3.0"


def test_the_mutable_parameter_is_the_drivers_own() -> None:
    """The Go driver refuses any other key or value (controller_expand.go): the two must agree."""
    source = (Path(csi.__file__).parents[1] / "tools" / "csidriver" / "driver" / "controller_expand.go").read_text()
    assert f'MutableTier = "{csi.MUTABLE_TIER_PARAMETER}"' in source
    assert all(f'"{tier}": true' in source for tier in csi.MUTABLE_TIERS)

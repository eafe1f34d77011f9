"""kind's CSI pieces that need no Docker: the node plugin's unit and command line, the
zone mounts, and what counts as a kubelet registration (pvchaos/clusters/kind_csi.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

from pvchaos.clusters import kind_csi
from pvchaos.clusters.csi import DRIVER_NAME, CsiOptions
from pvchaos.clusters.topology import Topology


def test_the_node_plugin_runs_with_the_nodes_identity_and_the_drivers_fixed_cli() -> None:
    spec = Topology().nodes()[3]  # zone-b-2
    unit = kind_csi.node_unit(spec, CsiOptions(max_volumes_per_node=7))
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    assert argv[:2] == ["/usr/local/bin/pvchaos-csi", "node"]
    assert set(argv[2:]) == {
        f"--endpoint=unix:///var/lib/kubelet/plugins/{DRIVER_NAME}/driver.sock", f"--driver-name={DRIVER_NAME}",
        f"--kubelet-endpoint=unix:///var/lib/kubelet/plugins/{DRIVER_NAME}/csi.sock",
        "--node-id=zone-b-2", "--zone=zone-b", "--hostname=zone-b-2", "--max-volumes-per-node=7",
        "--data-root=/var/lib/pvchaos-csi", "--calls-log=/var/log/pvchaos-csi/calls.jsonl",
        "--registration-dir=/var/lib/kubelet/plugins_registry"}
    assert "Restart=always" in unit and "WantedBy=multi-user.target" in unit, "comes back with the node"
    broken = kind_csi.node_plugin_args(spec, CsiOptions(fault_block_file=True))  # a self-check's broken plugin
    assert broken[-1] == "--fault-block-file" and "--fault-block-file" not in argv


def test_the_kubelet_dials_the_fault_proxy_which_forwards_to_the_plugin() -> None:
    unit = kind_csi.proxy_unit()
    argv = shlex.split(next(ln for ln in unit.splitlines() if ln.startswith("ExecStart=")).removeprefix("ExecStart="))
    assert argv[:2] == ["/usr/local/bin/pvchaos-csi", "proxy"]
    assert f"--listen=unix://{kind_csi.KUBELET_SOCKET}" in argv and f"--target=unix://{kind_csi.PLUGIN_SOCKET}" in argv
    assert f"--rules={kind_csi.NODE_PROXY_RULES}" in argv and "Restart=always" in unit
    inert = kind_csi.proxy_unit(CsiOptions(proxy_rules=False))  # the csi-proxy-inert breakage
    assert "--rules=" not in inert and f"--log={kind_csi.NODE_PROXY_LOG}" in inert


def test_zonal_data_lives_under_the_clusters_directory_and_mounts_per_zone() -> None:
    d = Path("/state/kind-x")
    assert kind_csi.data_root(d) == d / "csi"
    assert kind_csi.zones_dir(d) == d / "csi" / "zones"
    assert kind_csi.zone_mounts(kind_csi.zones_dir(d), "zone-c") == [
        {"hostPath": "/state/kind-x/csi/zones/zone-c", "containerPath": "/var/lib/pvchaos-csi/zone"}]


def test_registered_means_the_kubelet_wrote_both_topology_keys_and_the_limit() -> None:
    opts = CsiOptions(max_volumes_per_node=64)

    def csinode(**drv: object) -> dict:
        return {"spec": {"drivers": [{"name": DRIVER_NAME, "nodeID": "n",
                                      "topologyKeys": ["kubernetes.io/hostname", "topology.kubernetes.io/zone"],
                                      "allocatable": {"count": 64}, **drv}]}}

    assert kind_csi.registered(csinode(), opts)
    assert not kind_csi.registered(None, opts)
    assert not kind_csi.registered({"spec": {"drivers": None}}, opts)
    assert not kind_csi.registered(csinode(topologyKeys=["topology.kubernetes.io/zone"]), opts)
    assert not kind_csi.registered(csinode(allocatable=None), opts)
    assert not kind_csi.registered(csinode(name="other.csi"), opts)
    unlimited = CsiOptions()  # no limit: the kubelet writes no allocatable at all
    assert kind_csi.registered(csinode(allocatable=None), unlimited)
    assert not kind_csi.registered(csinode(), unlimited)


def test_a_pvs_data_directory_inside_the_node() -> None:
    def pv(topology: str | None) -> dict:
        attrs = {} if topology is None else {"pvchaos.dev/topology": topology}
        return {"spec": {"csi": {"driver": DRIVER_NAME, "volumeHandle": "pvc-1", "volumeAttributes": attrs}}}

    assert kind_csi.node_volume_dir(pv("node")) == "/var/lib/pvchaos-csi/local/pvc-1"
    assert kind_csi.node_volume_dir(pv("zone")) == "/var/lib/pvchaos-csi/zone/pvc-1"
    assert kind_csi.node_volume_dir(pv(None)) == "/var/lib/pvchaos-csi/zone/pvc-1"
    assert kind_csi.node_volume_dir({"spec": {"hostPath": {"path": "/var/lib/pvchaos/volumes/x"}}}) == \
        "/var/lib/pvchaos/volumes/x"
    assert kind_csi.node_volume_dir({"spec": {"csi": {"driver": "other", "volumeHandle": "h"}}}) is None


def test_inotify_limits_are_raised_never_lowered(tmp_path: Path) -> None:
    from pvchaos.clusters.kind import raise_inotify_limits
    (tmp_path / "max_user_instances").write_text("128\n")
    (tmp_path / "max_user_watches").write_text("1048576\n")
    assert raise_inotify_limits(tmp_path) == ["fs.inotify.max_user_instances 128 -> 512"]
    assert (tmp_path / "max_user_instances").read_text() == "512"
    assert (tmp_path / "max_user_watches").read_text() == "1048576\n"
    (tmp_path / "max_user_watches").unlink()
    assert "left as it is" in raise_inotify_limits(tmp_path)[0]


def test_nodes_give_their_loop_devices_back_before_they_are_deleted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The kubelet's fd-lock devices are released before the driver's, in every node that
    has the plugin; a node that cannot be asked releases nothing and stops nothing."""
    import subprocess

    calls: list[list[str]] = []

    def fake_docker(engine, args, timeout=0):  # type: ignore[no-untyped-def]
        calls.append(list(args))
        if args[1] == "paused":
            raise subprocess.TimeoutExpired(args, timeout)
        return subprocess.CompletedProcess(args, 0, "detached /dev/loop7 (/var/lib/pvchaos-csi/zone/v/block)\n", "")

    monkeypatch.setattr(kind_csi, "docker", fake_docker)
    got = kind_csi.release_loop_devices(object(), ["abcdef0123456789", "paused"])  # type: ignore[arg-type]
    assert got == ["abcdef012345: /dev/loop7 (/var/lib/pvchaos-csi/zone/v/block)"]
    script = calls[0][-1]
    assert script.index(kind_csi.KUBELET_BLOCK_DIR) < script.index(kind_csi.NODE_DATA_ROOT) and "release-loops" in script
    assert kind_csi.release_loop_devices(object(), []) == []  # type: ignore[arg-type]


def test_snapshots_cut_on_the_nodes_run_a_csi_snapshotter_beside_each_node_plugin() -> None:
    spec = Topology().nodes()[3]  # zone-b-2
    assert "--node-snapshots" in kind_csi.node_plugin_args(spec, CsiOptions(node_snapshots=True))
    assert "--node-snapshots" not in kind_csi.node_plugin_args(spec, CsiOptions())
    unit = kind_csi.node_snapshotter_unit(spec)
    assert "Environment=NODE_NAME=zone-b-2" in unit and "Restart=always" in unit
    argv = shlex.split(next(ln for ln in unit.splitlines() if ln.startswith("ExecStart=")).removeprefix("ExecStart="))
    assert argv[0] == kind_csi.NODE_SNAPSHOTTER_BINARY and "--node-deployment" in argv
    assert f"--csi-address={kind_csi.KUBELET_SOCKET}" in argv, "on the node's fault proxy, like the kubelet"
    assert f"--kubeconfig={kind_csi.NODE_KUBECONFIG}" in argv and "--leader-election=false" in argv

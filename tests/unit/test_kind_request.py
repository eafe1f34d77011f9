"""The kind backend provides a cluster for a request with the request's storage stack
(issue 35): what such a cluster can do is known before it starts, a vendor's package
is refused for CSI settings only pvchaos-csi takes (with the reason), and a cluster
another process started is rebuilt from its spec (`--kind-cluster`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvchaos.clusters import kind_csi, vendor_proxy
from pvchaos.clusters.backend import Capability
from pvchaos.clusters.kind import KindBackend, default_gates
from pvchaos.clusters.request import CannotProvide, ClusterDefaults, ClusterRequest
from pvchaos.clusters.storage import HarnessStorage, VendorStorage
from pvchaos.clusters.topology import Topology
from pvchaos.clusters.vendor_package import load_package
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vendor-driver"


def defaults(vendor: bool, package: Path = EXAMPLE) -> ClusterDefaults:
    storage = VendorStorage(load_package(package, need_images=False)) if vendor else None
    return ClusterDefaults(Topology.parse("3", 1), default_gates(DEFAULT_K8S_VERSION), DEFAULT_K8S_VERSION, storage)


def test_a_vendor_cluster_attaches_as_its_csidriver_says_and_has_no_harness_control() -> None:
    vendor = KindBackend.for_request(ClusterRequest(), defaults(True), cluster="t")
    caps = vendor.capabilities()
    assert Capability.ATTACH in caps and Capability.REAL_KUBELET in caps and Capability.NODE_FAILURE in caps
    assert Capability.HARNESS_DRIVER not in caps and Capability.PROVISIONING_FAILURES not in caps
    assert not vendor.runs_csi and vendor.vendor is not None
    mounts = json.dumps(vendor.config())  # each zone's workers share a stand-in for zonal network storage
    assert kind_csi.VENDOR_ZONE_DIR in mounts and kind_csi.NODE_ZONE_DIR not in mounts
    own = KindBackend.for_request(ClusterRequest(), defaults(False), cluster="t")
    assert Capability.HARNESS_DRIVER in own.capabilities() and own.runs_csi
    # block is pvchaos-csi's (loop devices on the nodes); a vendor's comes from its profile
    assert Capability.BLOCK in own.capabilities() and Capability.BLOCK not in caps


def test_a_vendor_cluster_has_the_fault_proxy_where_its_sockets_can_be_rewired() -> None:
    """Issue 36: csi-proxy where both sockets are flags; the controller proxy's directory
    is mounted in every node (the controller may run on the control plane)."""
    vendor = KindBackend.for_request(ClusterRequest(), defaults(True), cluster="t")
    assert Capability.CSI_PROXY in vendor.capabilities()
    for node in vendor.config()["nodes"]:
        assert {"hostPath": str(vendor.directory / "csi"), "containerPath": vendor_proxy.CONTROLLER_DIR} in (
            node.get("extraMounts") or []), node
    local = KindBackend.for_request(ClusterRequest(), defaults(True, EXAMPLE.parent / "vendor-node-local"), cluster="t")
    assert Capability.CSI_PROXY not in local.capabilities()
    assert "per-node provisioning" in (local.proxy_wiring() or vendor_proxy.ProxyWiring((), (), ())).refusal
    own = KindBackend.for_request(ClusterRequest(), defaults(False), cluster="t")
    assert all(vendor_proxy.CONTROLLER_DIR not in json.dumps(n) for n in own.config()["nodes"])


def test_a_package_that_provisions_only_for_scheduled_pods_says_so() -> None:
    """Per-node external-provisioner without immediate binding: Immediate claims of its class
    never get a volume, so tests needing one are not applicable (wffc-only), not failures."""
    local = KindBackend.for_request(ClusterRequest(), defaults(True, EXAMPLE.parent / "vendor-node-local"), cluster="t")
    assert Capability.WFFC_ONLY in local.capabilities()
    central = KindBackend.for_request(ClusterRequest(), defaults(True), cluster="t")
    assert Capability.WFFC_ONLY not in central.capabilities()


def test_a_shaped_request_keeps_the_vendor_package_and_refuses_what_only_pvchaos_csi_takes() -> None:
    gate_off = KindBackend.for_request(ClusterRequest(feature_gates=(("MutablePVNodeAffinity", False),),
                                                      nodes_per_zone=2), defaults(True), cluster="t")
    assert isinstance(gate_off.storage, VendorStorage) and gate_off.topology.nodes_per_zone == 2
    assert Capability.MUTABLE_PV_AFFINITY not in gate_off.capabilities()
    with pytest.raises(CannotProvide, match="storageCapacity false"):
        KindBackend.for_request(ClusterRequest(csi_capacity_tracking=True), defaults(True), cluster="t")
    with pytest.raises(CannotProvide, match="--strict-topology"):
        KindBackend.for_request(ClusterRequest(csi_strict_topology=True), defaults(True), cluster="t")
    with pytest.raises(CannotProvide, match="volume limit"):
        KindBackend.for_request(ClusterRequest(csi_max_volumes_per_node=1), defaults(True), cluster="t")
    with pytest.raises(CannotProvide, match="fsGroupPolicy None"):
        KindBackend.for_request(ClusterRequest(csi_fs_group_policy="None"), defaults(True), cluster="t")
    with pytest.raises(CannotProvide, match="no csi-snapshotter with --node-deployment"):
        KindBackend.for_request(ClusterRequest(csi_node_snapshots=True), defaults(True), cluster="t")
    with pytest.raises(CannotProvide, match="disabled_controllers"):
        KindBackend.for_request(ClusterRequest(disabled_controllers=("ttl",)), defaults(False), cluster="t")
    harness = KindBackend.for_request(ClusterRequest(csi_capacity_tracking=True), defaults(False), cluster="t")
    assert isinstance(harness.storage, HarnessStorage) and harness.storage.csi.capacity_tracking
    none = KindBackend.for_request(ClusterRequest(csi_fs_group_policy="None"), defaults(False), cluster="t")
    assert isinstance(none.storage, HarnessStorage) and none.storage.csi.fs_group_policy == "None"


def test_a_running_cluster_is_rebuilt_from_its_spec(tmp_path: Path) -> None:
    for vendor in (True, False):
        backend = KindBackend.for_request(ClusterRequest(csi_capacity_tracking=not vendor), defaults(vendor),
                                          cluster="t")
        backend.directory = tmp_path
        backend.image = "pvchaos/kind-node:x"
        backend._write_spec()
        again = KindBackend.from_spec("t", tmp_path, json.loads(backend.spec_file.read_text()))
        assert again.topology == backend.topology and again.feature_gates == backend.feature_gates
        assert again.capabilities() == backend.capabilities() and again.image == backend.image
        assert type(again.storage) is type(backend.storage)
        assert again.csi_options == backend.csi_options


def test_snapshots_cut_on_the_nodes_are_a_kind_shape_and_refused_on_local() -> None:
    """Distributed snapshotting needs a node plugin beside each csi-snapshotter: kind starts
    it for pvchaos-csi; local (KWOK nodes) says why not in one line."""
    from pvchaos.clusters.local.provider import LocalProvider
    from pvchaos.clusters.provider import ProvideHooks

    nodes = KindBackend.for_request(ClusterRequest(csi_node_snapshots=True), defaults(False), cluster="t")
    assert isinstance(nodes.storage, HarnessStorage) and nodes.storage.csi.node_snapshots
    assert Capability.SNAPSHOTS in nodes.capabilities()
    with pytest.raises(CannotProvide, match="needs real kubelets"):
        LocalProvider().config_for(ClusterRequest(csi_node_snapshots=True), defaults(False), ProvideHooks())


def test_a_package_whose_csi_snapshotter_runs_per_node_is_told_apart(tmp_path: Path) -> None:
    """`--node-deployment` on a package's csi-snapshotter: the cluster's snapshot-controller
    must label contents for it, and a test asking for node-cut snapshots may run."""
    import shutil

    assert not load_package(EXAMPLE, need_images=False).snapshots_on_nodes
    copy = tmp_path / "pkg"
    shutil.copytree(EXAMPLE, copy)
    manifest = copy / "03-controller.yaml"
    image = "image: pvchaos.dev/vendor/csi-snapshotter:v8.7.0\n          args: ["
    assert image in manifest.read_text(), "the example package runs a csi-snapshotter with args"
    manifest.write_text(manifest.read_text().replace(image, image + '"--node-deployment", '))
    package = load_package(copy, need_images=False)
    assert package.snapshots_on_nodes

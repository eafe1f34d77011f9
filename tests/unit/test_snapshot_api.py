"""The VolumeSnapshot API as the harness speaks it (no cluster): the custom kinds' calls
in CustomObjectsApi's argument order, the snapshot components' flags, the drivers'
snapshot classes, and the profile fields that give a vendor's driver snapshots or clones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pvchaos.clusters import csi
from pvchaos.clusters.backend import Capability, ClusterHandle
from pvchaos.drivers.driver import DriverError, HarnessDriver, ProfileDriver
from pvchaos.drivers.profile import harness_capabilities, parse_profile, skip_reason
from pvchaos.kube import builders as b
from pvchaos.kube import kinds

D = Path("/state/c1")


class FakeCustom:
    """Records each CustomObjectsApi call as (method, positional args)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, **kw: Any) -> str:
            self.calls.append((method, args))
            return method
        return call


class FakeKube:
    def __init__(self) -> None:
        self.custom = FakeCustom()


def test_custom_kinds_put_group_version_and_plural_first_and_the_name_after_the_scope() -> None:
    kube: Any = FakeKube()
    snap, content = kinds.kind("VolumeSnapshot"), kinds.kind("VolumeSnapshotContent")
    snap.call(kube, "read")("s1", "ns")
    snap.call(kube, "create")("ns", {"kind": "VolumeSnapshot"})
    snap.call(kube, "patch")("s1", "ns", {"spec": {}})
    snap.call(kube, "list", all_namespaces=True)()
    content.call(kube, "delete")("c1")
    content.call(kube, "list")()
    g, v = "snapshot.storage.k8s.io", "v1"
    assert kube.custom.calls == [
        ("get_namespaced_custom_object", (g, v, "ns", "volumesnapshots", "s1")),
        ("create_namespaced_custom_object", (g, v, "ns", "volumesnapshots", {"kind": "VolumeSnapshot"})),
        ("patch_namespaced_custom_object", (g, v, "ns", "volumesnapshots", "s1", {"spec": {}})),
        ("list_custom_object_for_all_namespaces", (g, v, "volumesnapshots")),
        ("delete_cluster_custom_object", (g, v, "volumesnapshotcontents", "c1")),
        ("list_cluster_custom_object", (g, v, "volumesnapshotcontents")),
    ]


def test_the_snapshot_components_flags() -> None:
    paths = csi.paths_for(D)
    sidecar = csi.snapshotter_args(Path("/bin/csi-snapshotter"), paths, D / "kubeconfig")
    assert {"--csi-address=/state/c1/csi/c.sock", "--kubeconfig=/state/c1/kubeconfig", "--leader-election=false",
            "--retry-interval-start=250ms"} <= set(sidecar), "on the fault proxy's socket, like the other sidecars"
    controller = csi.snapshot_controller_args(Path("/bin/snapshot-controller"), D / "kubeconfig")
    assert not any(a.startswith("--csi-address") for a in controller), "cluster-wide: no driver socket"
    assert "--kubeconfig=/state/c1/kubeconfig" in controller


def test_binaries_without_the_snapshot_components_start_none() -> None:
    bins = csi.CsiBinaries(Path("/bin/pvchaos-csi"), Path("/bin/csi-provisioner"), Path("/bin/csi-attacher"),
                          Path("/bin/csi-resizer"))
    assert not bins.snapshots
    assert csi.spawn_snapshots(csi.paths_for(D), D / "kubeconfig", bins, lambda *a: pytest.fail("started")) == {}


def test_snapshot_and_data_source_bodies() -> None:
    snap = b.volume_snapshot("snap", "source", "cls")
    assert snap["spec"] == {"volumeSnapshotClassName": "cls", "source": {"persistentVolumeClaimName": "source"}}
    restore = b.with_data_source(b.persistent_volume_claim("r", "1Gi", "sc"), "VolumeSnapshot", "snap")
    assert restore["spec"]["dataSource"] == {"kind": "VolumeSnapshot", "name": "snap",
                                             "apiGroup": "snapshot.storage.k8s.io"}
    clone = b.with_data_source(b.persistent_volume_claim("c", "1Gi", "sc"), "PersistentVolumeClaim", "source")
    assert clone["spec"]["dataSource"] == {"kind": "PersistentVolumeClaim", "name": "source"}, "core group: none"


def _handle() -> ClusterHandle:
    return ClusterHandle(name="c", backend="local", kubeconfig=Path("/nowhere"), context=None, k8s_version="v1.35.4",
                         capabilities=frozenset({Capability.SNAPSHOTS}), zonal_class_provisioner="csi.pvchaos.dev")


def _profile(snapshot_class: dict | None, caps: dict[str, bool]) -> Any:
    data: dict[str, Any] = {"StorageClass": {"FromName": True}, "DriverInfo": {
        "Name": "csi.example.com", "Capabilities": {"persistence": True, **caps}}}
    if snapshot_class is not None:
        data["SnapshotClass"] = snapshot_class
    return parse_profile(data, "/pkg/driver.yaml", None)


def test_snapshot_classes_name_the_drivers_own_snapshotter(tmp_path: Path) -> None:
    harness = HarnessDriver(_handle()).snapshot_class("s1")
    assert (harness["kind"], harness["driver"], harness["deletionPolicy"]) == (
        "VolumeSnapshotClass", "csi.pvchaos.dev", "Delete")
    named = ProfileDriver(_profile({"FromName": True}, {"snapshotDataSource": True}), _handle()).snapshot_class("s2")
    assert named["driver"] == "csi.example.com" and "parameters" not in named
    (tmp_path / "snapclass.yaml").write_text("driver: csi.example.com\ndeletionPolicy: Retain\nparameters: {tier: gold}\n")
    data = {"StorageClass": {"FromName": True}, "SnapshotClass": {"FromFile": "snapclass.yaml"},
            "DriverInfo": {"Name": "csi.example.com", "Capabilities": {"snapshotDataSource": True}}}
    from_file = ProfileDriver(parse_profile(data, str(tmp_path / "driver.yaml"), tmp_path), _handle())
    assert from_file.snapshot_class("s3")["parameters"] == {"tier": "gold"}
    assert from_file.snapshot_class("s3")["deletionPolicy"] == "Retain"
    with pytest.raises(DriverError, match="FromExistingClassName 'gold' does not exist"):
        ProfileDriver(_profile({"FromExistingClassName": "gold"}, {"snapshotDataSource": True}),
                      _handle()).snapshot_class("s4")


def test_a_vendor_has_snapshots_only_with_the_capability_and_a_snapshot_class() -> None:
    full = _profile({"FromName": True}, {"snapshotDataSource": True, "pvcDataSource": True})
    assert {Capability.SNAPSHOTS, Capability.CLONES} <= harness_capabilities(full)
    no_class = _profile(None, {"snapshotDataSource": True})
    assert Capability.SNAPSHOTS not in harness_capabilities(no_class)
    assert "profile sets no SnapshotClass" in str(skip_reason(no_class, Capability.SNAPSHOTS))
    unset = _profile({"FromName": True}, {})
    assert "snapshotDataSource unset" in str(skip_reason(unset, Capability.SNAPSHOTS))
    assert "pvcDataSource unset" in str(skip_reason(unset, Capability.CLONES))


def test_snapshots_cut_on_the_nodes_start_no_central_sidecar_and_a_labelling_controller() -> None:
    """Distributed snapshotting: a central csi-snapshotter would take every content, so none
    runs; the snapshot-controller labels contents for the nodes' sidecars, unless the
    no-distributed-snapshotting breakage leaves the flag out."""
    bins = csi.CsiBinaries(Path("/bin/pvchaos-csi"), Path("/bin/csi-provisioner"), Path("/bin/csi-attacher"),
                          Path("/bin/csi-resizer"), Path("/bin/csi-snapshotter"), Path("/bin/snapshot-controller"),
                          (Path("/crds/a.yaml"),))
    started: dict[str, list[str]] = {}

    def start(component: str, argv: list[str], env: object) -> object:
        started[component] = argv
        return object()
    csi.spawn_snapshots(csi.paths_for(D), D / "kubeconfig", bins, start, csi.CsiOptions(node_snapshots=True))  # type: ignore[arg-type]
    assert list(started) == [csi.SNAPSHOT_CONTROLLER]
    assert "--enable-distributed-snapshotting" in started[csi.SNAPSHOT_CONTROLLER]
    started.clear()
    csi.spawn_snapshots(csi.paths_for(D), D / "kubeconfig", bins, start,  # type: ignore[arg-type]
                        csi.CsiOptions(node_snapshots=True, fault_no_distributed_snapshotting=True))
    assert "--enable-distributed-snapshotting" not in started[csi.SNAPSHOT_CONTROLLER]
    started.clear()
    csi.spawn_snapshots(csi.paths_for(D), D / "kubeconfig", bins, start, csi.CsiOptions())  # type: ignore[arg-type]
    assert set(started) == {csi.SNAPSHOT_CONTROLLER, csi.SNAPSHOTTER}
    assert "--enable-distributed-snapshotting" not in started[csi.SNAPSHOT_CONTROLLER]

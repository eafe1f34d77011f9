"""Real CSI on a local cluster (issue 24): a WaitForFirstConsumer claim is provisioned by
upstream's external-provisioner through pvchaos-csi, the attach/detach controller's
VolumeAttachment is attached by the external-attacher and detached when the pod goes,
the node-local class gets hostname affinity, and a cluster whose sidecar cannot start
fails in one line with nothing left running."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.topology import HOSTNAME_KEY, ZONE_KEY, Topology
from pvchaos.drivers.driver import HarnessDriver
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.wait import phase_is, pod_running, wait_for, wait_for_state
from pvchaos.tools.csi_sidecars import ATTACHER, PROVISIONER
from tests.cluster.test_lifecycle import assert_nothing_left


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Kube]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("PVCHAOS_STATE_DIR", str(tmp_path_factory.mktemp("csi")))
    local = LocalCluster(LocalClusterConfig(name="csi", topology=Topology(zones=("zone-a", "zone-b"), nodes_per_zone=1)))
    try:
        handle = local.up()
        kube = connect(handle.kubeconfig)
        try:
            yield local, kube
        finally:
            kube.api.close()
    finally:
        local.down()
        mp.undo()


@pytest.fixture
def ws(running: tuple[LocalCluster, Kube], request: pytest.FixtureRequest) -> Iterator[Workspace]:
    local, kube = running
    cleanup = Cleanup(f"cleanup of {request.node.name}")
    try:
        yield Workspace(kube, local.handle(), request.node.name, cleanup)
    finally:
        cleanup.run()


def _attachments(kube: Kube, pv: str) -> list[dict]:
    return [va for va in kinds.list_objects(kube, "VolumeAttachment")[0]
            if va["spec"]["source"].get("persistentVolumeName") == pv]


@pytest.mark.slow
def test_the_cluster_is_what_a_kubelet_and_registrar_would_leave(running: tuple[LocalCluster, Kube]) -> None:
    local, kube = running
    handle = local.handle()
    assert handle.zonal_class_provisioner == handle.local_class_provisioner == csi.DRIVER_NAME
    assert PROVISIONER.version in handle.description["provisioner"]
    assert handle.description["external-attacher"] == ATTACHER.version
    for node in kinds.list_objects(kube, "Node")[0]:
        name = o.name(node)
        ann = node["metadata"]["annotations"]
        assert json.loads(ann[csi.NODE_ID_ANNOTATION]) == {csi.DRIVER_NAME: name}
        assert ann[csi.ATTACH_DETACH_ANNOTATION] == "true"
        csinode = kinds.get(kube, "CSINode", name)
        assert csinode is not None
        (driver,) = csinode["spec"]["drivers"]
        assert (driver["name"], driver["nodeID"]) == (csi.DRIVER_NAME, name)
        assert (driver.get("allocatable") or {}).get("count") == (local.cfg.csi.max_volumes_per_node or None)
    spec = (kinds.get(kube, "CSIDriver", csi.DRIVER_NAME) or {})["spec"]
    assert spec["attachRequired"] is True and spec["podInfoOnMount"] is True


@pytest.mark.slow
def test_wffc_claim_is_provisioned_attached_and_detached_through_csi(ws: Workspace) -> None:
    sc = ws.create(ws.driver.storage_class(ws.name("wffc")))["metadata"]["name"]
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    pod = wait_for(ws.kube, "Pod", "app", pod_running, "Running", ws.namespace, timeout=60)
    claim = wait_for(ws.kube, "PersistentVolumeClaim", "data", phase_is("Bound"), "Bound", ws.namespace)
    pv = ws.get("PersistentVolume", claim["spec"]["volumeName"])
    node = kinds.get(ws.kube, "Node", o.node_name(pod))
    assert pv is not None and node is not None
    assert pv["spec"]["csi"]["driver"] == csi.DRIVER_NAME
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [o.zone(node)]}]}]

    name = o.name(pv)
    attached = wait_for_state(ws.kube, "VolumeAttachment",
                              lambda st: next((va for va in st.values()
                                               if va["spec"]["source"].get("persistentVolumeName") == name
                                               and (va.get("status") or {}).get("attached")), None),
                              f"a VolumeAttachment of {name} attached", timeout=60)
    assert attached["spec"]["nodeName"] == o.node_name(pod)
    assert attached["spec"]["attacher"] == csi.DRIVER_NAME

    kinds.delete(ws.kube, "Pod", "app", ws.namespace)
    wait_for_state(ws.kube, "VolumeAttachment", lambda st: True if not any(
        va["spec"]["source"].get("persistentVolumeName") == name for va in st.values()) else None,
        f"the VolumeAttachment of {name} gone after its pod", timeout=60)

    calls = [json.loads(ln) for ln in csi.paths_for(ws.cluster.directory).calls_log.read_text().splitlines()]
    methods = [c["method"] for c in calls if pv["spec"]["csi"]["volumeHandle"] in json.dumps(c) or name in json.dumps(c)]
    # The external-attacher may publish more than once (it syncs the VolumeAttachment again
    # after its own finalizer update; publishing is idempotent), so the order is asserted.
    assert methods[0] == "CreateVolume", methods
    assert "ControllerPublishVolume" in methods and methods[-1] == "ControllerUnpublishVolume", methods
    assert methods.index("ControllerPublishVolume") < methods.index("ControllerUnpublishVolume"), methods


@pytest.mark.slow
def test_the_node_local_class_pins_the_volume_to_its_node(ws: Workspace) -> None:
    assert isinstance(ws.driver, HarnessDriver)
    sc = ws.create(ws.driver.local_class(ws.name("local")))["metadata"]["name"]
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    pod = wait_for(ws.kube, "Pod", "app", pod_running, "Running", ws.namespace, timeout=60)
    claim = wait_for(ws.kube, "PersistentVolumeClaim", "data", phase_is("Bound"), "Bound", ws.namespace)
    pv = ws.get("PersistentVolume", claim["spec"]["volumeName"])
    assert pv is not None
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": HOSTNAME_KEY, "operator": "In", "values": [o.node_name(pod)]}]}]


@pytest.mark.slow
def test_a_sidecar_that_cannot_start_fails_the_start_in_one_line_and_nothing_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(tmp_path / "state"))
    local = LocalCluster(LocalClusterConfig(name="badcsi", topology=Topology(zones=("zone-a",), nodes_per_zone=1)))
    broken = tmp_path / "csi-attacher"
    broken.write_text("#!/bin/sh\necho 'F1204 cannot reach the CSI socket' >&2\nexit 3\n")
    broken.chmod(0o755)
    bins = local.csi_binaries
    local._csi_binaries = csi.CsiBinaries(bins.driver, bins.provisioner, broken, bins.resizer)
    with pytest.raises(ClusterError) as err:
        local.up()
    text = str(err.value)
    assert "\n" not in text
    # whichever wait notices first names it (here possibly the apiserver's readiness wait)
    assert "csi-attacher exited at start (exit code 3): F1204 cannot reach the CSI socket (log: " in text, text
    assert_nothing_left(local.directory)


@pytest.mark.slow
def test_capacity_tracking_publishes_the_drivers_capacity_per_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(tmp_path / "state"))
    local = LocalCluster(LocalClusterConfig(name="cap", topology=Topology(zones=("zone-a", "zone-b"), nodes_per_zone=1),
                                            csi=csi.CsiOptions(capacity_tracking=True)))
    try:
        handle = local.up()
        (csi.paths_for(local.directory).control_dir / "capacity.json").write_text(json.dumps({"zone-a": "10Gi"}))
        kube = connect(handle.kubeconfig)
        try:
            assert (kinds.get(kube, "CSIDriver", csi.DRIVER_NAME) or {})["spec"]["storageCapacity"] is True
            kinds.create(kube, b.storage_class("cap-wffc", csi.DRIVER_NAME, "WaitForFirstConsumer"))
            found = wait_for_state(kube, "CSIStorageCapacity",
                                   lambda st: {c["nodeTopology"]["matchLabels"][ZONE_KEY]: c.get("capacity")
                                               for c in st.values()} if len(st) == 2 else None,
                                   "one CSIStorageCapacity per node segment", csi.CAPACITY_NAMESPACE, timeout=60)
        finally:
            kube.api.close()
        assert found == {"zone-a": "10Gi", "zone-b": "1Ti"}, found  # zones missing from the file: unlimited
    finally:
        local.down()


def test_a_node_that_joins_gets_the_driver_in_its_csinode(running: tuple[LocalCluster, Kube]) -> None:
    """Issue 36: the registrar writes what a node plugin DaemonSet's kubelet would, for a
    node created through the API after the start (about a second)."""
    local, kube = running
    local.join_node("joined-1", "zone-a", {"pvchaos.dev/joined": "true"})
    try:
        csinode = wait_for_state(kube, "CSINode", lambda st: st.get("joined-1"), "CSINode joined-1 with the driver",
                                 timeout=30)
        (driver,) = csinode["spec"]["drivers"]
        limit = local.cfg.csi.max_volumes_per_node  # 0: no limit, and no allocatable (as a driver reporting none)
        assert (driver["name"], driver["nodeID"], driver.get("allocatable")) == (
            csi.DRIVER_NAME, "joined-1", {"count": limit} if limit else None)
        node = kinds.get(kube, "Node", "joined-1") or {}
        assert json.loads(node["metadata"]["annotations"][csi.NODE_ID_ANNOTATION]) == {csi.DRIVER_NAME: "joined-1"}
    finally:
        local.remove_node("joined-1")


@pytest.mark.slow
def test_the_provisioner_sweeps_an_orphaned_snapshot_source_finalizer(ws: Workspace) -> None:
    """The snapshot tests bound a restore's cleanup by the provisioner's orphan sweep
    (csi.SNAPSHOT_ORPHAN_SWEEP_SECONDS). external-provisioner makes that sweep only if the
    VolumeSnapshot API is served when it starts; a stack started before the CRDs never
    sweeps, and a snapshot whose finalizer removal lost a race keeps it for good. Here the
    finalizer is put on a snapshot no pending claim restores from: the sweep must take it off."""
    finalizer = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"
    ws.create({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
               "metadata": {"name": "orphan", "finalizers": [finalizer]},
               "spec": {"source": {"persistentVolumeClaimName": "never-made"}}})
    wait_for(ws.kube, "VolumeSnapshot", "orphan", lambda s: finalizer not in (s["metadata"].get("finalizers") or []),
             f"{finalizer} swept off VolumeSnapshot orphan (no pending claim restores from it)", ws.namespace,
             timeout=csi.SNAPSHOT_ORPHAN_SWEEP_SECONDS + 20)

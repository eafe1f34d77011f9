"""CSI on kind is real: the kubelet registers our node plugin, the attach/detach
controller and upstream's external-attacher attach, the node plugin bind-mounts a
zone's shared directory, and a pod's data follows it to another node of its zone.

One small cluster of its own (2 zones x 2 workers: a zone with a second node to move to).
Skipped where no Docker engine answers and none can be started.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pvchaos.clusters import kind_csi
from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.csi import DRIVER_NAME, TOPOLOGY_KEYS
from pvchaos.clusters.kind import KindBackend, KindFaults, sweep_orphaned_kind_clusters
from pvchaos.clusters.topology import Topology
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.docker_engine import EngineError, docker, ensure_engine
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]
WORKERS = ("zone-a-1", "zone-a-2", "zone-b-1", "zone-b-2")


@pytest.fixture(scope="module")
def csi_cluster() -> Iterator[tuple[KindBackend, ClusterHandle]]:
    try:
        engine = ensure_engine()
    except EngineError as exc:
        pytest.skip(f"no Docker engine here and none can be started: {exc}")
    sweep_orphaned_kind_clusters(engine)
    backend = KindBackend(cluster=f"pvcsi-{secrets.token_hex(3)}", engine=engine,
                          topology=Topology(zones=("zone-a", "zone-b"), nodes_per_zone=2))
    handle = backend.up()
    try:
        yield backend, handle
    finally:
        backend.down(handle)
        left = docker(engine, ["ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={backend.cluster}"])
        assert not left.stdout.split(), f"containers left behind: {left.stdout}"
        assert backend.directory is not None and not backend.directory.exists()


def kubectl(handle: ClusterHandle, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    binary = ensure_binaries(DEFAULT_K8S_VERSION, only=("kubernetes",)).kubectl
    return subprocess.run([str(binary), "--kubeconfig", str(handle.kubeconfig), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def get(handle: ClusterHandle, *args: str) -> dict:
    proc = kubectl(handle, "get", *args, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def eventually(check: Callable[[], object], what: str, timeout: float = 90) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(1)


def pod(ns: str, name: str, node: str, command: str) -> str:
    """A pod the scheduler puts on `node` (not nodeName: the scheduler must pick the node,
    or a WaitForFirstConsumer claim never gets its selected node)."""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: pvchaos.local/busybox:1
    command: [sh, -c, "{command}"]
    volumeMounts: [{{name: d, mountPath: /data}}]
  volumes: [{{name: d, persistentVolumeClaim: {{claimName: data}}}}]
"""


def test_every_worker_is_registered_by_its_kubelet(csi_cluster) -> None:
    _, handle = csi_cluster
    assert handle.zonal_class_provisioner == handle.local_class_provisioner == DRIVER_NAME
    csinodes = {n["metadata"]["name"]: n for n in get(handle, "csinode")["items"]}
    for worker in WORKERS:
        (drv,) = [d for d in csinodes[worker]["spec"]["drivers"] if d["name"] == DRIVER_NAME]
        assert drv["nodeID"] == worker
        assert sorted(drv["topologyKeys"]) == sorted(TOPOLOGY_KEYS)
        assert "allocatable" not in drv, "no limit by default: NodeGetInfo says 0, the kubelet writes no count"
        # the kubelet's own writes on registration: the node id annotation and the topology labels it checked
        node = get(handle, "node", worker)
        assert json.loads(node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"]) == {DRIVER_NAME: worker}
    assert DRIVER_NAME not in json.dumps(csinodes.get(f"{handle.name}-control-plane", {})), "no plugin there"


def test_zonal_data_follows_the_pod_to_another_node_of_its_zone(csi_cluster, tmp_path: Path) -> None:
    backend, handle = csi_cluster
    faults = handle.faults
    assert isinstance(faults, KindFaults)
    ns = f"t-{secrets.token_hex(3)}"
    manifest = tmp_path / "claim.yaml"
    manifest.write_text(f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {ns}-zonal}}
provisioner: {DRIVER_NAME}
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data, namespace: {ns}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {ns}-zonal
  resources: {{requests: {{storage: 1Gi}}}}
""")
    writer, reader = tmp_path / "writer.yaml", tmp_path / "reader.yaml"
    writer.write_text(pod(ns, "writer", "zone-a-1", "echo written-by-pod > /data/f && exec sleep 3600"))
    reader.write_text(pod(ns, "reader", "zone-a-2", "cat /data/f && exec sleep 3600"))
    try:
        assert kubectl(handle, "apply", "-f", str(manifest), "-f", str(writer)).returncode == 0
        waited = kubectl(handle, "-n", ns, "wait", "--for=condition=Ready", "pod/writer", "--timeout=150s")
        assert waited.returncode == 0, waited.stderr + kubectl(handle, "-n", ns, "describe", "pod", "writer").stdout
        pv_name = get(handle, "-n", ns, "pvc", "data")["spec"]["volumeName"]
        pv = get(handle, "pv", pv_name)
        assert pv["spec"]["csi"]["driver"] == DRIVER_NAME and "hostPath" not in pv["spec"]
        volume_id = pv["spec"]["csi"]["volumeHandle"]
        zone_terms = json.dumps(pv["spec"]["nodeAffinity"])
        assert "zone-a" in zone_terms and "zone-b" not in zone_terms

        # attached by the external-attacher while the pod runs
        attachments = [va for va in get(handle, "volumeattachment")["items"]
                       if va["spec"]["source"].get("persistentVolumeName") == pv_name]
        assert [(va["spec"]["attacher"], va["spec"]["nodeName"], va["status"]["attached"])
                for va in attachments] == [(DRIVER_NAME, "zone-a-1", True)]

        # the data is in the zone's host directory, and the pod's mount is a bind mount of it
        assert backend.directory is not None
        host_dir = kind_csi.zones_dir(backend.directory) / "zone-a" / volume_id
        assert (host_dir / "f").read_text().strip() == "written-by-pod"
        assert not (kind_csi.zones_dir(backend.directory) / "zone-b" / volume_id).exists()
        mounts = faults.node_exec("zone-a-1", f"grep {volume_id} /proc/self/mountinfo")
        pod_mounts = [m for m in mounts.splitlines() if "/volumes/kubernetes.io~csi/" in m]
        assert pod_mounts, mounts
        # mountinfo field 4 is the root of the mount inside its filesystem: the zone
        # directory's volume (the host's <zones>/zone-a/<id>), not a hostPath under /var/lib/pvchaos
        assert all(m.split()[3].endswith(f"/zone-a/{volume_id}") for m in pod_mounts), pod_mounts
        other_zone = faults.node_exec("zone-b-1", f"ls {kind_csi.NODE_ZONE_DIR}/{volume_id} 2>&1 || true")
        assert "No such file" in other_zone, "another zone cannot reach the volume"

        # the pod goes; the attachment goes with it; a pod on the zone's other node reads the data
        assert kubectl(handle, "-n", ns, "delete", "pod", "writer", "--timeout=120s").returncode == 0
        eventually(lambda: not [va for va in get(handle, "volumeattachment")["items"]
                                if va["spec"]["source"].get("persistentVolumeName") == pv_name],
                   "VolumeAttachment of zone-a-1 removed after the pod")
        assert kubectl(handle, "apply", "-f", str(reader)).returncode == 0
        waited = kubectl(handle, "-n", ns, "wait", "--for=condition=Ready", "pod/reader", "--timeout=150s")
        assert waited.returncode == 0, waited.stderr + kubectl(handle, "-n", ns, "describe", "pod", "reader").stdout
        assert eventually(lambda: kubectl(handle, "-n", ns, "logs", "reader").stdout.strip(),  # noqa: PLW0108  re-run each try
                          "reader's log") == "written-by-pod"
        (va,) = [va for va in get(handle, "volumeattachment")["items"]
                 if va["spec"]["source"].get("persistentVolumeName") == pv_name]
        assert (va["spec"]["nodeName"], va["status"]["attached"]) == ("zone-a-2", True)
        calls = faults.node_exec("zone-a-2", f"cat {kind_csi.NODE_CALLS_LOG}")
        assert "NodeStageVolume" in calls and "NodePublishVolume" in calls
    finally:
        kubectl(handle, "delete", "namespace", ns, "--wait=true", "--timeout=120s")
        kubectl(handle, "delete", "storageclass", f"{ns}-zonal", "--wait=false")


def test_the_node_plugin_comes_back_with_a_crashed_node(csi_cluster) -> None:
    """`docker stop`/`start` reboots the node's systemd: the enabled unit starts again and
    the kubelet registers it anew (its plugin watcher sees a fresh socket)."""
    backend, handle = csi_cluster
    faults = handle.faults
    assert isinstance(faults, KindFaults)

    def registrations() -> int:
        out = faults.node_exec("zone-b-2", f"grep -c NotifyRegistrationStatus {kind_csi.NODE_CALLS_LOG} || true")
        return int(out or 0)

    before = registrations()
    assert before >= 1
    faults.crash_node("zone-b-2")
    try:
        assert faults.node_stopped("zone-b-2")
    finally:
        faults.start_node("zone-b-2")
    eventually(lambda: faults.node_exec("zone-b-2", f"systemctl is-active {kind_csi.UNIT} || true") == "active",
               f"{kind_csi.UNIT} active again after docker start", timeout=120)
    eventually(lambda: registrations() > before, "the kubelet registered the restarted plugin again", timeout=120)
    assert kind_csi.registered(get(handle, "csinode", "zone-b-2"), backend.csi_options)

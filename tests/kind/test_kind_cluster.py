"""The kind backend for real: engine set-up and teardown, one create/delete cycle, each
fault and its undo, and bad input, on a Docker engine this machine runs.

Skipped (with the reason) where no engine answers and none can be started: not root,
no apt-get. Every test here shares one small cluster (2 zones x 1 worker).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pvchaos.clusters import kind_csi
from pvchaos.clusters.backend import Capability, ClusterError, ClusterHandle
from pvchaos.clusters.kind import KindBackend, KindFaults, sweep_orphaned_kind_clusters
from pvchaos.clusters.topology import Topology
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.docker_engine import Engine, EngineError, answers, docker, ensure_engine, stop_engine, user_engine
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]


@pytest.fixture(scope="module")
def engine() -> Engine:
    try:
        engine = ensure_engine()
    except EngineError as exc:
        pytest.skip(f"no Docker engine here and none can be started: {exc}")
    sweep_orphaned_kind_clusters(engine)  # a run that died may have left some; dockerd restarts them
    return engine


def test_an_engine_pvchaos_starts_is_the_one_it_stops(engine: Engine) -> None:
    if user_engine() is not None:
        pytest.skip("a user's engine answers: pvchaos uses it and never stops it")
    assert engine.owned and engine.pid and answers(engine.host)
    assert stop_engine(engine), "nothing of ours runs on it, so it is stopped"
    stat = Path(f"/proc/{engine.pid}/stat")
    assert not stat.exists() or "(dockerd)" not in stat.read_text(), \
        f"dockerd {engine.pid} is still in the process table (a zombie is not reaped): {stat.read_text()[:60]}"
    assert not answers(engine.host)
    again = ensure_engine()
    assert again.owned and again.pid != engine.pid and answers(again.host)


@pytest.fixture(scope="module")
def kind_cluster(engine: Engine) -> Iterator[tuple[KindBackend, ClusterHandle]]:
    backend = KindBackend(cluster=f"pvct-{secrets.token_hex(3)}", topology=Topology(zones=("zone-a", "zone-b"),
                                                                                     nodes_per_zone=1))
    handle = backend.up()
    try:
        yield backend, handle
    finally:
        containers = _containers(backend)
        backend.down(handle)
        engine_now = backend.engine
        assert engine_now is not None
        if answers(engine_now.host):
            for cid in containers:
                assert docker(engine_now, ["inspect", cid]).returncode != 0, f"container {cid} left behind"
            assert docker(engine_now, ["network", "inspect", backend.network]).returncode != 0
        assert not handle.kubeconfig.exists()


def _containers(backend: KindBackend) -> list[str]:
    assert backend.engine is not None
    out = docker(backend.engine, ["ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={backend.cluster}"])
    return out.stdout.split()


def kubectl(handle: ClusterHandle, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    binary = ensure_binaries(DEFAULT_K8S_VERSION, only=("kubernetes",)).kubectl
    return subprocess.run([str(binary), "--kubeconfig", str(handle.kubeconfig), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def node(handle: ClusterHandle, name: str) -> dict:
    proc = kubectl(handle, "get", "node", name, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ready(handle: ClusterHandle, name: str) -> str:
    conds = node(handle, name)["status"]["conditions"]
    return next(c["status"] for c in conds if c["type"] == "Ready")


def await_ready(handle: ClusterHandle, name: str, want: str, timeout: float = 120) -> float:
    """Seconds until the node's Ready condition is `want` (a watch is overkill for a test
    of the backend; the suites use the harness's watch-based waits)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if ready(handle, name) == want:
            return time.monotonic() - start
        time.sleep(1)
    raise AssertionError(f"node {name}: Ready={ready(handle, name)}, wanted {want} within {timeout}s")


def test_nodes_have_topology_names_zone_labels_and_real_kubelets(kind_cluster) -> None:
    backend, handle = kind_cluster
    for name, zone in (("zone-a-1", "zone-a"), ("zone-b-1", "zone-b")):
        n = node(handle, name)
        assert n["metadata"]["labels"]["topology.kubernetes.io/zone"] == zone
        assert n["metadata"]["labels"]["kubernetes.io/hostname"] == name
        info = n["status"]["nodeInfo"]
        assert info["kubeletVersion"] == DEFAULT_K8S_VERSION
        assert info["containerRuntimeVersion"].startswith("containerd://2.")
    assert {Capability.REAL_KUBELET, Capability.ZONES, Capability.MUTABLE_PV_AFFINITY} <= handle.capabilities
    assert len(_containers(backend)) == 3


def test_a_pod_really_runs_and_writes_to_its_provisioned_volume(kind_cluster, tmp_path: Path) -> None:
    _, handle = kind_cluster
    ns = f"t-{secrets.token_hex(3)}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {ns}-zonal}}
provisioner: {handle.zonal_class_provisioner}
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data, namespace: {ns}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {ns}-zonal
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: writer, namespace: {ns}}}
spec:
  nodeSelector: {{topology.kubernetes.io/zone: zone-b}}
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: pvchaos.local/busybox:1
    command: [sh, -c, "echo written-by-pod > /data/f && exec sleep 3600"]
    volumeMounts: [{{name: d, mountPath: /data}}]
  volumes: [{{name: d, persistentVolumeClaim: {{claimName: data}}}}]
""")
    try:
        assert kubectl(handle, "apply", "-f", str(manifest)).returncode == 0
        waited = kubectl(handle, "-n", ns, "wait", "--for=condition=Ready", "pod/writer", "--timeout=120s")
        assert waited.returncode == 0, waited.stderr + kubectl(handle, "-n", ns, "describe", "pod", "writer").stdout
        pv = json.loads(kubectl(handle, "-n", ns, "get", "pvc", "data", "-o", "json").stdout)["spec"]["volumeName"]
        spec = json.loads(kubectl(handle, "get", "pv", pv, "-o", "json").stdout)["spec"]
        terms = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == ["zone-b"]
        faults = handle.faults
        assert isinstance(faults, KindFaults)
        assert spec["csi"]["driver"] == handle.zonal_class_provisioner  # CSI: tests/kind/test_kind_csi.py
        path = f"{kind_csi.NODE_ZONE_DIR}/{spec['csi']['volumeHandle']}"
        assert faults.node_exec("zone-b-1", f"cat {path}/f") == "written-by-pod"
    finally:
        kubectl(handle, "delete", "-f", str(manifest), "--wait=false")


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service_and_resolves_it(kind_cluster) -> None:
    """What a vendor's pods expect: kube-proxy (the `kubernetes` Service with the default
    in-cluster config: KUBERNETES_SERVICE_HOST/PORT and the service account) and CoreDNS
    (the Service's name resolves). One pod, not hostNetwork. The client is the node's own
    kubectl (static; client-go's in-cluster config when no kubeconfig is given), since
    busybox's TLS cannot agree on a cipher with the API server."""
    _, handle = kind_cluster
    name = f"incluster-{secrets.token_hex(3)}"
    script = "nslookup kubernetes.default.svc.cluster.local && /kubectl get --raw /api"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "pvchaos.local/busybox:1", "command": ["sh", "-c", script],
                                    "volumeMounts": [{"name": "kubectl", "mountPath": "/kubectl", "readOnly": True}]}],
                    "volumes": [{"name": "kubectl", "hostPath": {"path": "/usr/bin/kubectl", "type": "File"}}]}}
    service_ip = json.loads(kubectl(handle, "get", "svc", "kubernetes", "-o", "json").stdout)["spec"]["clusterIP"]
    try:
        made = subprocess.run([str(ensure_binaries(DEFAULT_K8S_VERSION, only=("kubernetes",)).kubectl), "--kubeconfig",
                               str(handle.kubeconfig), "create", "-f", "-"], input=json.dumps(pod), capture_output=True,
                              text=True, timeout=60, check=False)
        assert made.returncode == 0, made.stderr
        done = kubectl(handle, "wait", f"pod/{name}", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s",
                       timeout=150)
        logs = kubectl(handle, "logs", name).stdout
        assert done.returncode == 0, (f"{done.stderr}\nlogs: {logs}\n"
                                      + kubectl(handle, "describe", "pod", name).stdout[-2000:])
        assert service_ip in logs, f"kubernetes.default.svc.cluster.local did not resolve to {service_ip}: {logs}"
        assert '"kind": "APIVersions"' in logs or '"kind":"APIVersions"' in logs, logs
    finally:
        kubectl(handle, "delete", "pod", name, "--wait=false")


@pytest.mark.parametrize("fault", ["stop_node", "crash_node", "partition_node"])
def test_each_node_fault_makes_the_node_unknown_and_its_undo_brings_it_back(kind_cluster, fault: str) -> None:
    _, handle = kind_cluster
    faults = handle.faults
    assert isinstance(faults, KindFaults)
    getattr(faults, fault)("zone-a-1")
    try:
        assert faults.node_stopped("zone-a-1")
        lost = await_ready(handle, "zone-a-1", "Unknown", timeout=60)
    finally:
        faults.start_node("zone-a-1")
    assert not faults.node_stopped("zone-a-1")
    back = await_ready(handle, "zone-a-1", "True", timeout=180)
    print(f"{fault}: Unknown after {lost:.1f}s, Ready {back:.1f}s after the undo")


def test_a_stopped_scheduler_leaves_pods_pending_until_it_returns(kind_cluster) -> None:
    _, handle = kind_cluster
    faults = handle.faults
    assert isinstance(faults, KindFaults)
    name = f"wait-{secrets.token_hex(3)}"
    faults.stop_component("kube-scheduler")
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            pods = kubectl(handle, "-n", "kube-system", "get", "pods", "-l", "component=kube-scheduler", "-o", "name")
            if not pods.stdout.strip():
                break
            time.sleep(1)
        assert not pods.stdout.strip(), "the kubelet removed the scheduler's static pod"
        assert kubectl(handle, "run", name, "--image=registry.k8s.io/pause:3.10", "--restart=Never").returncode == 0
        time.sleep(10)
        assert json.loads(kubectl(handle, "get", "pod", name, "-o", "json").stdout)["spec"].get("nodeName") is None
    finally:
        faults.start_component("kube-scheduler")
    scheduled = kubectl(handle, "wait", "--for=condition=PodScheduled", f"pod/{name}", "--timeout=120s")
    kubectl(handle, "delete", "pod", name, "--wait=false")
    assert scheduled.returncode == 0, scheduled.stderr


def test_an_existing_cluster_name_is_one_line_and_creates_nothing(kind_cluster) -> None:
    backend, _ = kind_cluster
    before = _containers(backend)
    with pytest.raises(ClusterError, match=f"kind cluster '{backend.cluster}' already exists") as err:
        KindBackend(cluster=backend.cluster, topology=backend.topology).up()
    assert "\n" not in str(err.value)
    assert _containers(backend) == before


def test_a_leftover_network_of_the_same_name_is_one_line_and_creates_nothing(engine: Engine) -> None:
    backend = KindBackend(cluster=f"pvct-{secrets.token_hex(3)}", topology=Topology(zones=("zone-a",),
                                                                                     nodes_per_zone=1))
    engine = ensure_engine()
    assert docker(engine, ["network", "create", backend.network]).returncode == 0
    try:
        with pytest.raises(ClusterError, match=f"Docker network {backend.network} exists already") as err:
            backend.up()
        assert "\n" not in str(err.value)
        assert _containers(backend) == []
        assert not backend.kubeconfig.parent.exists()
    finally:
        docker(engine, ["network", "rm", backend.network])
        stop_engine(engine)


def test_bad_versions_are_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes release"):
        KindBackend(cluster="x", k8s_version="v1.35")
    with pytest.raises(ValueError, match="v1.33 is not supported"):
        KindBackend(cluster="x", k8s_version="v1.33.2")
    with pytest.raises(ValueError, match="cluster name"):
        KindBackend(cluster="Bad_Name")

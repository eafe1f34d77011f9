"""The kind backend's command lines, recorded by stand-in `kind` and `docker` executables
(these machines have no Docker engine; nothing here ran against a real one)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clusters.backend import Capability, ClusterError
from clusters.kind import KindBackend, KindFaults, kind_config, node_image, render_yaml

IMAGE = node_image("v1.35").image
IMAGE_36 = node_image("v1.36").image


def backend(tmp_path: Path, **kw) -> KindBackend:
    return KindBackend(cluster="pvc-t", directory=tmp_path / "state", **kw)


def test_up_runs_preflight_then_kind_create(recorder, tmp_path: Path) -> None:
    recorder.set("kind", "get", out="other\n")
    b = backend(tmp_path)
    handle = b.up()
    d = tmp_path / "state"
    assert recorder.calls() == [
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        ["kind", "get", "clusters"],
        ["kind", "create", "cluster", "--name", "pvc-t", "--config", str(d / "kind-config.yaml"),
         "--image", IMAGE, "--kubeconfig", str(d / "kubeconfig"), "--wait", "120s"],
    ]
    assert (d / "kind-config.yaml").read_text() == render_yaml(kind_config(), "v1.35")
    assert handle.backend == "kind" and handle.context == "kind-pvc-t" and handle.k8s_version == "v1.35.8"
    assert handle.kubeconfig == d / "kubeconfig"
    assert {Capability.OWNED, Capability.ZONES, Capability.NODE_FAILURE, Capability.NODE_LABELS,
            Capability.COMPONENT_RESTART, Capability.MUTABLE_PV_AFFINITY, Capability.DYNAMIC_LOCAL} <= handle.capabilities
    assert Capability.DYNAMIC_ZONAL not in handle.capabilities and Capability.RWX not in handle.capabilities
    assert handle.local_class_provisioner == "rancher.io/local-path"
    assert "zone-a-1=pvc-t-worker" in handle.description["nodes"]


def test_up_for_another_version_passes_its_image(recorder, tmp_path: Path) -> None:
    backend(tmp_path, k8s_version="v1.36").up()
    create = recorder.calls()[-1]
    assert create[create.index("--image") + 1] == IMAGE_36


def test_down_deletes_the_cluster_and_its_files(recorder, tmp_path: Path) -> None:
    b = backend(tmp_path)
    handle = b.up()
    b.down(handle)
    assert recorder.calls()[-1] == ["kind", "delete", "cluster", "--name", "pvc-t",
                                    "--kubeconfig", str(tmp_path / "state" / "kubeconfig")]
    assert not (tmp_path / "state").exists()


def test_node_failure_and_return_are_docker_pause_and_unpause(recorder, tmp_path: Path) -> None:
    faults = backend(tmp_path).up().faults
    assert isinstance(faults, KindFaults)
    before = len(recorder.calls())
    faults.stop_node("pvc-t-worker2")
    recorder.set("docker", "inspect", out="true\n")
    assert faults.node_stopped("pvc-t-worker2")
    faults.start_node("pvc-t-worker2")
    inspect = ["docker", "inspect", "--format", "{{.State.Paused}}", "pvc-t-worker2"]
    assert recorder.calls()[before:] == [
        ["docker", "pause", "pvc-t-worker2"], inspect, inspect, ["docker", "unpause", "pvc-t-worker2"]]


def test_starting_a_running_node_only_looks(recorder) -> None:
    recorder.set("docker", "inspect", out="false\n")
    KindFaults("pvc-t").start_node("pvc-t-worker")
    assert recorder.calls() == [["docker", "inspect", "--format", "{{.State.Paused}}", "pvc-t-worker"]]


def test_faults_refuse_containers_of_other_clusters(recorder) -> None:
    with pytest.raises(KeyError, match="'prod-worker' is not one of its nodes"):
        KindFaults("pvc-t").stop_node("prod-worker")
    assert recorder.calls() == []


def test_components_stop_by_moving_their_static_pod_manifest(recorder) -> None:
    faults = KindFaults("pvc-t")
    faults.stop_component("kube-scheduler")
    faults.start_component("kube-scheduler")
    live, parked = "/etc/kubernetes/manifests/kube-scheduler.yaml", "/etc/kubernetes/kube-scheduler.yaml.pvchaos-stopped"
    assert recorder.calls() == [
        ["docker", "exec", "pvc-t-control-plane", "sh", "-c", f"if [ -f {live} ]; then mv {live} {parked}; fi"],
        ["docker", "exec", "pvc-t-control-plane", "sh", "-c", f"if [ -f {parked} ]; then mv {parked} {live}; fi"],
    ]
    with pytest.raises(KeyError, match="kube-apiserver"):
        faults.stop_component("kube-apiserver")


def test_a_failing_docker_command_is_one_line(recorder) -> None:
    recorder.set("docker", "pause", rc=1, err="Error response from daemon: No such container: pvc-t-worker9\n")
    with pytest.raises(ClusterError) as err:
        KindFaults("pvc-t").stop_node("pvc-t-worker9")
    assert str(err.value) == "docker pause pvc-t-worker9: Error response from daemon: No such container: pvc-t-worker9"


@pytest.mark.parametrize("tool", ["kind", "docker"])
def test_missing_binary_is_one_line_and_creates_nothing(recorder, tmp_path: Path, tool: str) -> None:
    recorder.remove(tool)
    with pytest.raises(ClusterError) as err:
        backend(tmp_path).up()
    assert str(err.value).startswith(f"kind backend: no `{tool}` on PATH")
    assert "\n" not in str(err.value)
    assert recorder.calls() == [] and not (tmp_path / "state").exists()


def test_no_docker_engine_is_one_line_and_creates_nothing(recorder, tmp_path: Path) -> None:
    recorder.set("docker", "info", rc=1, err="Client:\n Version: 28\nCannot connect to the Docker daemon at "
                                              "unix:///var/run/docker.sock. Is the docker daemon running?\n")
    with pytest.raises(ClusterError) as err:
        backend(tmp_path).up()
    assert str(err.value) == ("kind backend: no Docker engine reachable: Cannot connect to the Docker daemon at "
                              "unix:///var/run/docker.sock. Is the docker daemon running?")
    assert recorder.calls() == [["docker", "info", "--format", "{{.ServerVersion}}"]]
    assert not (tmp_path / "state").exists()


def test_the_real_docker_cli_without_an_engine(recorder, tmp_path: Path, monkeypatch) -> None:
    """This machine's docker CLI, if any, with the stand-in kind."""
    real = shutil.which("docker", path="/usr/local/bin:/usr/bin:/bin")
    if real is None:
        pytest.skip("no docker CLI installed")
    if subprocess.run([real, "info"], capture_output=True, timeout=30).returncode == 0:
        pytest.skip("a Docker engine is reachable here")
    recorder.remove("docker")
    monkeypatch.setenv("PATH", f"{recorder.bin_dir}:{Path(real).parent}")
    with pytest.raises(ClusterError, match=r"^kind backend: no Docker engine reachable: .*docker daemon"):
        backend(tmp_path).up()
    assert recorder.calls() == [] and not (tmp_path / "state").exists()


def test_harness_provisioner_is_refused_before_anything_runs(recorder, tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="provisioner 'harness' .* not supported on kind yet"):
        backend(tmp_path, provisioner="harness").up()
    assert recorder.calls() == []


def test_an_existing_cluster_name_is_refused(recorder, tmp_path: Path) -> None:
    recorder.set("kind", "get", out="kind\npvc-t\n")
    with pytest.raises(ClusterError, match="kind cluster 'pvc-t' already exists"):
        backend(tmp_path).up()
    assert [c[:2] for c in recorder.calls()] == [["docker", "info"], ["kind", "get"]]


def test_a_failed_create_is_cleaned_up(recorder, tmp_path: Path) -> None:
    recorder.set("kind", "create", rc=1, err="Creating cluster ...\nERROR: failed to create cluster: boom\n")
    with pytest.raises(ClusterError) as err:
        backend(tmp_path).up()
    assert str(err.value) == "kind create cluster pvc-t: ERROR: failed to create cluster: boom"
    assert recorder.calls()[-1][:5] == ["kind", "delete", "cluster", "--name", "pvc-t"]
    assert not (tmp_path / "state").exists()


def test_bad_settings_are_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cluster name 'Bad_Name'"):
        KindBackend(cluster="Bad_Name", directory=tmp_path)
    with pytest.raises(ValueError, match="provisioner 'nfs'"):
        KindBackend(provisioner="nfs", directory=tmp_path)


def test_from_options_picks_the_minor_image_and_merges_gates(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(tmp_path))
    opts = SimpleNamespace(k8s_version="v1.36.3", zones="2", nodes_per_zone=1, feature_gates="Foo=true")
    b = KindBackend.from_options(opts)
    assert b.k8s_version == "v1.36" and node_image(b.k8s_version).tag == "v1.36.4"
    assert b.feature_gates == {"MutablePVNodeAffinity": True, "Foo": True}
    assert b.topology.zones == ("zone-a", "zone-b") and b.directory == tmp_path / "kind-pvchaos"
    with pytest.raises(ClusterError, match=r"^kind v0.33.0: no node image for v1.30; published: v1.34, "):
        KindBackend.from_options(SimpleNamespace(k8s_version="v1.30.1", zones="3", nodes_per_zone=2, feature_gates=""))

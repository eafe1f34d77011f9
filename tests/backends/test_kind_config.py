"""The kind configs: generated from Topology, rendered into kind-config/, and checked with
kind v0.33.0's own code (its strict loader, validator, kubeadm template and patcher)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pvchaos.clusters.kind import CONFIG_DIR, DEFAULT_CONFIG_FILE, kind_config, kind_node_names, pick_subnet, render_yaml
from pvchaos.clusters.topology import Topology
from pvchaos.tools.nodeimage.recipe import KIND_VERSION

PATCH_VERSIONS = {34: "v1.34.6", 35: "v1.35.4", 36: "v1.36.3", 37: "v1.37.2"}


def kind_configs() -> list[Path]:
    """Every kind Cluster config in kind-config/."""
    files = sorted(CONFIG_DIR.glob("*.yaml"))
    configs = [f for f in files if (yaml.safe_load(f.read_text()) or {}).get("kind") == "Cluster"]
    assert set(files) == set(configs), "a file in kind-config/ is not a kind Cluster config"
    return configs


def test_rendered_default_is_what_the_generator_makes() -> None:
    assert DEFAULT_CONFIG_FILE.read_text() == render_yaml(kind_config())
    assert yaml.safe_load(DEFAULT_CONFIG_FILE.read_text()) == kind_config()


def test_default_config_is_three_zones_of_two_workers() -> None:
    cfg = kind_config()
    roles = [n["role"] for n in cfg["nodes"]]
    assert roles == ["control-plane"] + ["worker"] * 6
    workers = cfg["nodes"][1:]
    zones = [n["labels"]["topology.kubernetes.io/zone"] for n in workers]
    assert zones == ["zone-a", "zone-a", "zone-b", "zone-b", "zone-c", "zone-c"]
    assert {n["labels"]["topology.kubernetes.io/region"] for n in workers} == {"region-1"}
    assert [n["labels"]["storage"] for n in workers] == ["ssd", "standard"] * 3
    assert all("kubernetes.io/hostname" not in n["labels"] for n in workers), "the kubelet sets the hostname"
    assert cfg["featureGates"] == {"MutablePVNodeAffinity": True}
    patches = [yaml.safe_load(p) for p in cfg["kubeadmConfigPatches"]]
    assert {"kind": "ClusterConfiguration", "controllerManager": {"extraArgs": {
        "node-monitor-grace-period": "8s", "node-monitor-period": "1s"}}} in patches
    init = next(p for p in patches if p["kind"] == "InitConfiguration")
    assert init["skipPhases"] == ["addon/kube-proxy"], "kube-proxy is a node service; CoreDNS is kubeadm's addon"
    kubelet = next(p for p in patches if p["kind"] == "KubeletConfiguration")
    assert kubelet["failCgroupV1"] is False, "1.35+ kubelets refuse cgroup v1 hosts without it"
    assert cfg["networking"] == {"ipFamily": "ipv4", "disableDefaultCNI": True, "kubeProxyMode": "none"}
    names = [yaml.safe_load(n["kubeadmConfigPatches"][0])["nodeRegistration"]["name"] for n in workers]
    assert names == ["zone-a-1", "zone-a-2", "zone-b-1", "zone-b-2", "zone-c-1", "zone-c-2"]
    assert len({n["image"] for n in cfg["nodes"]}) == 1


def test_each_worker_mounts_its_own_zones_csi_directory_and_no_other() -> None:
    """Zonal CSI volumes behave like network storage in one zone (clusters/kind_csi.py)."""
    cfg = kind_config(zones_dir="/state/kind-x/csi/zones")
    assert "extraMounts" not in cfg["nodes"][0], "the control plane runs no volumes"
    for worker in cfg["nodes"][1:]:
        zone = worker["labels"]["topology.kubernetes.io/zone"]
        assert worker["extraMounts"] == [{"hostPath": f"/state/kind-x/csi/zones/{zone}",
                                          "containerPath": "/var/lib/pvchaos-csi/zone"}]
    assert all("extraMounts" not in n for n in kind_config(zones_dir=None)["nodes"]), "test double: no mounts"
    assert kind_config()["nodes"][1]["extraMounts"][0]["hostPath"] == "<state dir>/kind-<cluster>/csi/zones/zone-a"


def test_topology_drives_the_workers() -> None:
    cfg = kind_config(Topology(zones=("east", "west"), nodes_per_zone=3), "v1.36.3")
    assert len(cfg["nodes"]) == 7
    assert [n["labels"]["topology.kubernetes.io/zone"] for n in cfg["nodes"][1:]] == ["east"] * 3 + ["west"] * 3
    assert kind_node_names("t", Topology(zones=("east", "west"), nodes_per_zone=1)) == {
        "east-1": "t-worker", "west-1": "t-worker2"}


def test_gate_is_refused_where_it_does_not_exist() -> None:
    assert "featureGates" not in kind_config(k8s_version="v1.34.6")
    with pytest.raises(ValueError, match="MutablePVNodeAffinity does not exist before v1.35"):
        kind_config(k8s_version="v1.34.6", feature_gates={"MutablePVNodeAffinity": True})


def test_versions_are_releases_of_supported_minors() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes release"):
        kind_config(k8s_version="v1.35")
    with pytest.raises(ValueError, match="v1.33 is not supported"):
        kind_config(k8s_version="v1.33.1")


def test_subnet_avoids_every_taken_network() -> None:
    assert pick_subnet([]) == "172.30.0.0/24"
    assert pick_subnet(["172.30.0.0/24", "172.30.1.128/25", "10.0.0.0/8", "fc00::/64"]) == "172.30.2.0/24"
    with pytest.raises(ValueError, match="clashes"):
        pick_subnet(["172.30.0.0/16"])


def test_labels_the_kubelet_may_not_set_are_refused() -> None:
    with pytest.raises(ValueError, match="node-role.kubernetes.io/infra"):
        kind_config(Topology(extra_labels={"node-role.kubernetes.io/infra": ""}))
    cfg = kind_config(Topology(extra_labels={"node.kubernetes.io/pool": "a"}))
    assert cfg["nodes"][1]["labels"]["node.kubernetes.io/pool"] == "a"


# ---- kind's own code -----------------------------------------------------------------

def run_kindcheck(kindcheck: Path, *files: Path, versions: str = "v1.35.4,v1.36.3,v1.37.2") -> list[dict]:
    proc = subprocess.run([str(kindcheck), "-k8s", versions, *map(str, files)],
                          capture_output=True, text=True, timeout=120, check=False)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert (proc.returncode == 0) == all(r["ok"] for r in results)
    return results


@pytest.mark.parametrize("config", kind_configs(), ids=lambda p: p.name)
def test_kind_loads_validates_and_patches_every_config(kindcheck: Path, config: Path) -> None:
    (res,) = run_kindcheck(kindcheck, config)
    assert res["ok"], res.get("error")
    assert [n["role"] for n in res["nodes"]] == ["control-plane"] + ["worker"] * 6
    assert res["featureGates"] == {"MutablePVNodeAffinity": True}
    for version, want_api in (("v1.35.4", "v1beta3"), ("v1.36.3", "v1beta4"), ("v1.37.2", "v1beta4")):
        r = res["rendered"][version]
        assert r["kubeadmAPIVersion"] == f"kubeadm.k8s.io/{want_api}"
        assert r["controllerManagerArgs"]["node-monitor-grace-period"] == "8s"
        assert r["controllerManagerArgs"]["node-monitor-period"] == "1s"
        assert "MutablePVNodeAffinity=true" in r["apiServerArgs"]["feature-gates"]
        assert r["kubelet"]["nodeLeaseDurationSeconds"] == 4
        assert r["kubelet"]["nodeStatusUpdateFrequency"] == "2s"
        assert r["kubelet"]["failCgroupV1"] is False
        assert r["unmatchedPatchKinds"] is None, "a patch matched no kubeadm document"
        assert "topology.kubernetes.io/zone=zone-a" in r["nodeLabels"][1]
        assert "topology.kubernetes.io/zone=zone-c" in r["nodeLabels"][6]
    mounts = [[(m["hostPath"], m["containerPath"]) for m in n.get("extraMounts") or []] for n in res["nodes"]]
    assert mounts[0] == [] and mounts[1] == [("<state dir>/kind-<cluster>/csi/zones/zone-a", "/var/lib/pvchaos-csi/zone")]
    assert mounts[6] == [("<state dir>/kind-<cluster>/csi/zones/zone-c", "/var/lib/pvchaos-csi/zone")]


@pytest.mark.parametrize("minor", sorted(PATCH_VERSIONS))
def test_generated_config_for_each_minor_passes_kind(kindcheck: Path, tmp_path: Path, minor: int) -> None:
    f = tmp_path / f"v1.{minor}.yaml"
    f.write_text(render_yaml(kind_config(k8s_version=PATCH_VERSIONS[minor]), PATCH_VERSIONS[minor]))
    (res,) = run_kindcheck(kindcheck, f, versions=PATCH_VERSIONS[minor])
    assert res["ok"], res.get("error")
    args = res["rendered"][PATCH_VERSIONS[minor]]["apiServerArgs"]
    assert ("MutablePVNodeAffinity=true" in args.get("feature-gates", "")) == (minor >= 35)


def test_kindcheck_rejects_unknown_keys_and_invalid_configs(kindcheck: Path, tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text(DEFAULT_CONFIG_FILE.read_text().replace("  labels:", "  lables:", 1))
    no_cp = tmp_path / "no-cp.yaml"
    no_cp.write_text("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: worker\n")
    bad, invalid = run_kindcheck(kindcheck, typo, no_cp)
    assert not bad["ok"] and "field lables not found" in bad["error"]
    assert not invalid["ok"] and "must have at least one control-plane node" in invalid["error"]


def test_the_kind_cli_parses_configs_before_it_needs_docker(kind_binary: Path, recorder, tmp_path: Path) -> None:
    """The real kind binary, with a `docker` that always fails: a good config gets past
    kind's strict decoding and stops at the provider check; a typo stops at decoding.
    Nothing can be created either way."""
    recorder.remove("kind")
    recorder.set("docker", "info", rc=1, err="Cannot connect to the Docker daemon (stand-in)\n")
    recorder.set("docker", "-v", rc=1)
    env = {"PATH": str(recorder.bin_dir), "HOME": str(tmp_path), "FAKE_LOG": str(recorder.log),
           **{k: v for k, v in os.environ.items() if k.startswith("FAKE_")}}
    typo = tmp_path / "typo.yaml"
    typo.write_text(DEFAULT_CONFIG_FILE.read_text().replace("  labels:", "  lables:", 1))

    def create(config: Path) -> str:
        proc = subprocess.run([str(kind_binary), "create", "cluster", "--name", "pvchaos-check", "--config",
                               str(config)], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode != 0
        return proc.stderr

    for config in kind_configs():
        err = create(config)
        assert "failed to get docker info" in err and "decode" not in err, err
    err = create(typo)
    assert "unable to decode config" in err and "field lables not found" in err, err
    assert {tuple(c[:2]) for c in recorder.calls()} <= {("docker", "-v"), ("docker", "info")}
    assert KIND_VERSION == "v0.33.0"

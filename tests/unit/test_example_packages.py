"""The example driver packages of examples/ are laid out as vendors ship them: no
hostNetwork and no API-server address overrides (the kind clusters run kube-proxy and
CoreDNS), one node DaemonSet with its own registration sidecar in upstream's layout, and
each broken package broken in exactly one place, by the fault its name promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pvchaos.clusters import vendor_package as pkg

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PACKAGES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and any(p.glob("*.yaml")))
BUILT = {"pvchaos.dev/vendor/pvchaos-csi:0.1.0", "pvchaos.dev/vendor/csi-provisioner:v6.4.0",
         "pvchaos.dev/vendor/csi-attacher:v4.13.0", "pvchaos.dev/vendor/csi-snapshotter:v8.7.0",
         "pvchaos.dev/vendor/csi-resizer:v2.3.0"}
# package -> the one driver flag that breaks it (None: a correct driver)
FAULTS = {"vendor-driver": None, "vendor-driver-broken": "--fault-no-topology",
          "vendor-never-attaches": "--fault-never-attach", "vendor-unenforced-limit": "--fault-attach-limit=2",
          "vendor-node-local": None}


def objects(package: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted((EXAMPLES / package).glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        out += [d for d in docs if "kind" in d and "apiVersion" in d]
    return out


def pod_specs(package: str) -> list[tuple[str, dict[str, Any]]]:
    return [(o["kind"], o["spec"]["template"]["spec"]) for o in objects(package)
            if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]


def args_of(package: str) -> list[str]:
    return [a for _, spec in pod_specs(package) for c in spec["containers"] for a in c.get("args", [])]


def test_every_package_is_listed() -> None:
    assert set(PACKAGES) == set(FAULTS)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_host_network_and_no_api_address_overrides(package: str) -> None:
    for kind, spec in pod_specs(package):
        assert not spec.get("hostNetwork"), f"{package}: a {kind} on the host network"
        for c in spec["containers"]:
            env = {e["name"] for e in c.get("env", [])}
            assert not env & {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}, f"{package}/{c['name']}"
            assert c["image"] in BUILT, f"{package}/{c['name']}: {c['image']} is not built by build.py"


@pytest.mark.parametrize("package", PACKAGES)
def test_one_node_daemonset_with_its_own_registrar_in_upstreams_layout(package: str) -> None:
    driver = next(o["metadata"]["name"] for o in objects(package) if o["kind"] == "CSIDriver")
    nodes = [spec for kind, spec in pod_specs(package) if kind == "DaemonSet"]
    assert len(nodes) == 1, f"{package}: one node DaemonSet for every zone"
    spec = nodes[0]
    registrar = next(c for c in spec["containers"] if c.get("args", [""])[0] == "registrar")
    assert f"--kubelet-registration-path=/var/lib/kubelet/plugins/{driver}/csi.sock" in registrar["args"]
    mounts = {m["name"]: m["mountPath"] for m in registrar["volumeMounts"]}
    paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert paths[next(n for n, p in mounts.items() if p == "/registration")] == "/var/lib/kubelet/plugins_registry"
    assert paths[next(n for n, p in mounts.items() if p == "/csi")] == f"/var/lib/kubelet/plugins/{driver}"
    drv = next(c for c in spec["containers"] if c is not registrar and c["image"].endswith("/pvchaos-csi:0.1.0"))
    assert "--endpoint=unix:///csi/csi.sock" in drv["args"]
    assert not any(a.startswith("--registration-dir") for a in drv["args"]), "the sidecar registers, not the driver"
    assert not any(a.startswith("--zone=") for a in drv["args"]), "the zone comes from the node, not the manifest"


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_is_broken_in_exactly_the_promised_place(package: str) -> None:
    faults = {a for a in args_of(package) if a.startswith("--fault-")}
    want = FAULTS[package]
    assert faults == ({want} if want else set()), f"{package}: {faults}"


def test_the_zonal_packages_read_their_zone_from_the_node() -> None:
    for package in ("vendor-driver", "vendor-driver-broken", "vendor-never-attaches", "vendor-unenforced-limit"):
        assert "--topology-from-node-labels=topology.kubernetes.io/zone" in args_of(package)
        assert pkg.load_package(EXAMPLES / package, need_images=False).storage_class == "vendor-zonal"


def test_the_node_local_package_provisions_per_node_with_its_own_key() -> None:
    kinds = {kind for kind, _ in pod_specs("vendor-node-local")}
    assert kinds == {"DaemonSet"}, "distributed provisioning: no central controller"
    args = args_of("vendor-node-local")
    assert "--node-deployment" in args and "--node-topology-key=vendor.example.com/node" in args
    assert args[0] == "all", "controller and node services on the socket the node's provisioner asks"
    driver = next(o for o in objects("vendor-node-local") if o["kind"] == "CSIDriver")
    assert driver["spec"]["attachRequired"] is False
    profile = yaml.safe_load((EXAMPLES / "vendor-node-local" / "profile.yaml").read_text())
    assert profile["DriverInfo"]["TopologyKeys"] == ["vendor.example.com/node"]


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_advertises_snapshots_only_with_the_means_to_exercise_them(package: str) -> None:
    """pvchaos-csi advertises snapshots and clones unless --snapshots=false. A package that
    leaves them on must run csi-snapshotter, ship a VolumeSnapshotClass and name it in its
    profile with both capabilities declared, or certify could not exercise them (and would
    rightly not certify); one that turns them off declares neither."""
    advertises = "--snapshots=false" not in args_of(package)
    images = {c["image"] for _, spec in pod_specs(package) for c in spec["containers"]}
    profile = yaml.safe_load((EXAMPLES / package / "profile.yaml").read_text())
    caps = profile["DriverInfo"]["Capabilities"]
    classes = [d for f in sorted((EXAMPLES / package).glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
               if isinstance(d, dict) and d.get("kind") == "VolumeSnapshotClass"]
    if advertises:
        assert any("csi-snapshotter" in i for i in images), f"{package}: no csi-snapshotter sidecar"
        assert [c["metadata"]["name"] for c in classes] == [profile["SnapshotClass"]["FromExistingClassName"]]
        assert caps.get("snapshotDataSource") is True and caps.get("pvcDataSource") is True
    else:
        assert not caps.get("snapshotDataSource") and not caps.get("pvcDataSource") and not classes


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_declares_block_only_where_its_node_plugin_has_the_hosts_dev(package: str) -> None:
    """pvchaos-csi gives a block volume a loop device over its backing file: the node
    plugin needs the node's /dev (its loop devices, and the nodes it makes for them) for
    the kubelet and the container runtime to see the device. A package declares block
    with that mount, and says block false without it (certify: "not supported")."""
    spec = next(spec for kind, spec in pod_specs(package) if kind == "DaemonSet")
    paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    driver = next(c for c in spec["containers"] if c.get("args", [""])[0] in ("node", "all"))
    has_dev = any(m["mountPath"] == "/dev" and paths.get(m["name"]) == "/dev" for m in driver["volumeMounts"])
    caps = yaml.safe_load((EXAMPLES / package / "profile.yaml").read_text())["DriverInfo"]["Capabilities"]
    assert caps.get("block") is has_dev, f"{package}: block {caps.get('block')}, host /dev mounted {has_dev}"

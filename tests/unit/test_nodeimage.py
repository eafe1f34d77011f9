"""The offline kind node image's inputs and layout, the Docker engine's decisions and the
runtime wrapper: everything that can be checked without an engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pvchaos.tools import docker_engine, docker_runtime
from pvchaos.tools.nodeimage import recipe as r
from pvchaos.tools.nodeimage.rootfs import ENABLED_UNITS, MASKED_UNITS, debian_mirror, install_layout

KUBEADM_135 = """registry.k8s.io/kube-apiserver:v1.35.4
registry.k8s.io/kube-controller-manager:v1.35.4
registry.k8s.io/kube-scheduler:v1.35.4
registry.k8s.io/kube-proxy:v1.35.4
registry.k8s.io/coredns/coredns:v1.12.1
registry.k8s.io/pause:3.10.1
registry.k8s.io/etcd:3.6.5-0
"""


def test_plan_builds_what_kubeadm_asks_under_its_names_and_skips_kube_proxy() -> None:
    plan = r.image_plan(KUBEADM_135.splitlines())
    assert {(c.name, c.binary) for c in plan} == {
        ("registry.k8s.io/kube-apiserver:v1.35.4", "kube-apiserver"),
        ("registry.k8s.io/kube-controller-manager:v1.35.4", "kube-controller-manager"),
        ("registry.k8s.io/kube-scheduler:v1.35.4", "kube-scheduler"),
        ("registry.k8s.io/pause:3.10.1", "pause"),
        ("registry.k8s.io/etcd:3.6.5-0", "etcd"),
        ("registry.k8s.io/coredns/coredns:v1.12.1", "coredns"),
    }
    assert r.pause_image(plan) == "registry.k8s.io/pause:3.10.1"


def test_coredns_is_built_at_the_version_kubeadm_asks_for_in_upstreams_layout() -> None:
    from pvchaos.tools.nodeimage.coredns import PLUGINS, image_version, main_go

    assert image_version("registry.k8s.io/coredns/coredns:v1.12.1") == "v1.12.1"
    with pytest.raises(ValueError, match="not a module version"):
        image_version("registry.k8s.io/coredns/coredns:latest")
    assert 'ENTRYPOINT ["/coredns"]' in r.binary_dockerfile("coredns")
    src = main_go()
    # every plugin of kubeadm's Corefile is compiled in, as a directive and an import
    for directive in ("errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache", "loop", "reload",
                      "loadbalance"):
        assert f'"{directive}"' in src
    assert all(f"/plugin/{pkg}\"" in src for _, pkg in PLUGINS)


def test_an_image_the_builder_has_no_source_for_fails_the_build() -> None:
    with pytest.raises(ValueError, match="no source for 'kube-newthing'"):
        r.image_plan([*KUBEADM_135.splitlines(), "registry.k8s.io/kube-newthing:v1.38.0"])
    with pytest.raises(ValueError, match="no pause image"):
        r.image_plan(["registry.k8s.io/kube-apiserver:v1.35.4"])
    with pytest.raises(ValueError, match="cannot read"):
        r.image_plan(["not an image"])


def test_the_tag_follows_every_input() -> None:
    base = r.Recipe("v1.35.4")
    assert base.tag.startswith("pvchaos/kind-node:v1.35.4-") and base.base_tag.startswith("pvchaos/kind-base:bookworm-")
    assert r.Recipe("v1.35.4").tag == base.tag, "the same inputs name the same image"
    changed = [r.Recipe("v1.36.3"), r.Recipe("v1.35.4", containerd_version="v2.4.2"),
               r.Recipe("v1.35.4", packages=(*r.PACKAGES, "curl")), r.Recipe("v1.35.4", etcd_version="v3.6.15"),
               r.Recipe("v1.35.4", files={**base.files, "entrypoint": "edited"})]
    assert len({c.tag for c in changed} | {base.tag}) == len(changed) + 1
    # Kubernetes and etcd are not in the base: a new version reuses the rootfs.
    assert r.Recipe("v1.36.3").base_tag == base.base_tag
    assert {"entrypoint", "pvchaos-cni", "rootfs.py"} <= set(base.files)


def test_containerd_config_pins_the_pause_image_and_uses_debian_runc() -> None:
    cfg = r.containerd_config("registry.k8s.io/pause:3.10.1")
    assert "version = 3" in cfg
    assert "sandbox = 'registry.k8s.io/pause:3.10.1'" in cfg
    assert "SystemdCgroup = true" in cfg and "BinaryName = '/usr/sbin/runc'" in cfg


def test_one_binary_images_have_no_shell_and_pause_is_the_entrypoint() -> None:
    assert r.binary_dockerfile("etcd").startswith("FROM scratch\n")
    assert "ENTRYPOINT" not in r.binary_dockerfile("kube-apiserver"), "kubeadm's manifests name the command"
    assert 'ENTRYPOINT ["/usr/local/bin/pause"]' in r.binary_dockerfile("pause")
    assert "STOPSIGNAL SIGRTMIN+3" in r.base_dockerfile("x:1")


def test_layout_puts_files_tools_and_units_where_kind_and_systemd_look(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("containerd", "containerd-shim-runc-v2", "ctr", "crictl", *r.CNI_PLUGINS):
        (tools / name).write_text(name)
    root = tmp_path / "rootfs"
    install_layout(root, tools)
    assert (root / "usr/local/bin/entrypoint").stat().st_mode & 0o111
    assert (root / "usr/local/bin/containerd").read_text() == "containerd"
    assert sorted(p.name for p in (root / "opt/cni/bin").iterdir()) == sorted(r.CNI_PLUGINS)
    assert (root / "kind/manifests/default-storage.yaml").exists()
    for unit in ENABLED_UNITS:
        assert (root / "etc/systemd/system/multi-user.target.wants" / unit).is_symlink()
    for unit in MASKED_UNITS:
        assert str((root / "etc/systemd/system" / unit).readlink()) == "/dev/null"
    for disk in r.LOCAL_DISKS:
        assert (root / disk.lstrip("/")).is_dir()
    assert (root / "etc/machine-id").read_text() == "", "each node makes its own machine id"


def test_debian_mirror_is_read_from_apt_sources(tmp_path: Path) -> None:
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm\n")
    one_line = tmp_path / "sources.list"
    one_line.write_text("deb [arch=amd64] http://other.example/debian bookworm main\n")
    assert debian_mirror([deb822]) == "http://mirror.example/debian"
    assert debian_mirror([tmp_path / "missing", one_line]) == "http://other.example/debian"
    assert debian_mirror([tmp_path / "missing"]) == "http://deb.debian.org/debian"


def test_capability_bounding_set_decides_the_wrapper() -> None:
    assert docker_engine.lacks_cap_sys_resource("Name:\tx\nCapBnd:\t000001fffeffffff\n")
    assert not docker_engine.lacks_cap_sys_resource("CapBnd:\t000001ffffffffff\n")
    assert docker_engine.daemon_config(None, None) == {}
    cfg = docker_engine.daemon_config(Path("/c/pvchaos-runc"), "/usr/sbin/runc")
    assert cfg["default-runtime"] == docker_engine.RUNTIME_NAME
    assert cfg["runtimes"][docker_engine.RUNTIME_NAME]["runtimeArgs"] == ["--pvchaos-runc=/usr/sbin/runc"]


def test_wrapper_drops_only_cap_sys_resource() -> None:
    spec = {"process": {"capabilities": {"bounding": ["CAP_CHOWN", "CAP_SYS_RESOURCE"],
                                         "effective": ["CAP_SYS_RESOURCE"], "ambient": None}}}
    out = docker_runtime.drop_capability(spec, process_only=False)
    assert out["process"]["capabilities"] == {"bounding": ["CAP_CHOWN"], "effective": [], "ambient": None}
    proc = {"capabilities": {"permitted": ["CAP_SYS_RESOURCE", "CAP_KILL"]}}
    assert docker_runtime.drop_capability(proc, process_only=True)["capabilities"]["permitted"] == ["CAP_KILL"]


def test_wrapper_rewrites_the_bundle_then_execs_the_real_runtime(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": {"bounding": ["CAP_SYS_RESOURCE"]}}}))
    fake = tmp_path / "runc"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n")
    fake.chmod(0o755)
    subprocess.run([sys.executable, docker_runtime.__file__, f"--pvchaos-runc={fake}", "--root", "/x", "create",
                    "--bundle", str(bundle), "cid"], check=True)
    assert json.loads((bundle / "config.json").read_text())["process"]["capabilities"]["bounding"] == []
    assert (tmp_path / "args").read_text().split() == ["--root", "/x", "create", "--bundle", str(bundle), "cid"]


def test_no_engine_and_no_way_to_install_one_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_engine.shutil, "which", lambda name: None)
    with pytest.raises(docker_engine.EngineError) as err:
        docker_engine.start_engine()
    assert "no Docker engine answers and `dockerd` is not installed" in str(err.value)
    assert "\n" not in str(err.value)

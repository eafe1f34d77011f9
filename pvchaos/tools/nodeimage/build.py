"""Build a kind node image offline: Debian rootfs + Go-built node software + images.

Steps, each cached: the node tools (containerd, crictl, CNI plugins) from Go modules;
a Debian rootfs by debootstrap, with those tools and tools/nodeimage/files, imported as
the base image; kubelet, kubeadm, kubectl and kube-proxy from k8s.io/kubernetes; then a
build container from the base where the control-plane, etcd, CoreDNS and pause images
(each one static binary, built here) are imported into the node's containerd under the names
`kubeadm config images list` gives, and the container is committed as the node image.
The build container and the temporary images are removed whatever happens.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pvchaos.tools import versions
from pvchaos.tools.build import BuildError, _run_go, cache_root, ensure_binaries
from pvchaos.tools.docker_engine import Engine, docker, last_line
from pvchaos.tools.nodeimage import recipe as r
from pvchaos.tools.nodeimage.coredns import ensure_coredns, image_version
from pvchaos.tools.nodeimage.rootfs import build_rootfs, debian_package_file

# The names suites use for their pods' image, besides kubeadm's own pause tag.
EXTRA_PAUSE_NAMES = ("registry.k8s.io/pause:3.10",)


def _log(msg: str) -> None:
    print(f"[pvchaos kind build-image] {msg}", file=sys.stderr, flush=True)


def _check(proc: subprocess.CompletedProcess[str], what: str) -> str:
    if proc.returncode != 0:
        raise BuildError(f"{what}: {last_line(proc)}")
    return proc.stdout


def image_exists(engine: Engine, tag: str) -> bool:
    return docker(engine, ["image", "inspect", "--format", "{{.Id}}", tag], timeout=60).returncode == 0


@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / f".{name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


# ---- node tools from Go modules -------------------------------------------------------

def node_tools_dir(recipe: r.Recipe) -> Path:
    return (cache_root() / "bin" /
            f"node-tools-containerd{recipe.containerd_version}-crictl{recipe.crictl_version}-cni{recipe.cni_plugins_version}")


def ensure_node_tools(recipe: r.Recipe) -> Path:
    """containerd (+shim, ctr), crictl and the CNI plugins, built once per version set."""
    out = node_tools_dir(recipe)
    wanted = ["containerd", "containerd-shim-runc-v2", "ctr", "crictl", *r.CNI_PLUGINS]
    if all((out / n).exists() for n in wanted):
        return out
    log = cache_root() / "build-logs" / f"{out.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    containerd = "github.com/containerd/containerd/v2/cmd"
    cni = "github.com/containernetworking/plugins/plugins"
    cni_paths = {"ptp": "main/ptp", "bridge": "main/bridge", "loopback": "main/loopback",
                 "host-local": "ipam/host-local", "portmap": "meta/portmap"}
    groups = [
        ("containerd", [f"{containerd}/{n}@{recipe.containerd_version}"
                        for n in ("containerd", "containerd-shim-runc-v2", "ctr")],
         "no_aufs no_zfs no_btrfs no_devmapper"),
        ("crictl", [f"sigs.k8s.io/cri-tools/cmd/crictl@{recipe.crictl_version}"], ""),
        ("CNI plugins", [f"{cni}/{cni_paths[n]}@{recipe.cni_plugins_version}" for n in r.CNI_PLUGINS], ""),
    ]
    with tempfile.TemporaryDirectory(prefix="pvchaos-gobin-") as gobin:
        for what, targets, tags in groups:
            start = time.monotonic()
            _log(f"building {what} ...")
            argv = ["go", "install", "-trimpath", "-ldflags", "-s -w", *(["-tags", tags] if tags else []), *targets]
            _run_go(argv, Path(gobin), log, f"build {what}", {"GOBIN": gobin, "GOFLAGS": "-buildvcs=false"})
            _log(f"built {what} in {time.monotonic() - start:.0f}s")
        out.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            shutil.copy2(Path(gobin) / name, out / name)
    return out


def ensure_kind(version: str = r.KIND_VERSION) -> Path:
    """The kind CLI, `go install`ed into the cache like the other binaries."""
    out = cache_root() / "bin" / f"kind-{version}" / "kind"
    if out.exists():
        return out
    log = cache_root() / "build-logs" / f"kind-{version}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with _lock("kind-build"), tempfile.TemporaryDirectory(prefix="pvchaos-gobin-") as gobin:
        if out.exists():
            return out
        start = time.monotonic()
        _log(f"building kind {version} ...")
        _run_go(["go", "install", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kind@{version}"], Path(gobin), log,
                f"build kind {version}", {"GOBIN": gobin, "GOFLAGS": "-buildvcs=false"})
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(gobin) / "kind", out)
        _log(f"built kind {version} in {time.monotonic() - start:.0f}s")
    return out


def _kubernetes_source(version: str) -> Path:
    """The k8s.io/kubernetes module directory (pause.c lives in it); with the newer Go
    toolchain only when the version's go.mod asks for one (v1.38: go 1.27)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    argv = ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tempfile.gettempdir(), env=env, check=False)
    if proc.returncode != 0 and (toolchain := versions.toolchain_for_error(proc.stdout)):
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                              env={**env, "GOTOOLCHAIN": toolchain}, check=False)
    if proc.returncode != 0:
        raise BuildError(f"k8s.io/kubernetes@{version}: {last_line(proc)}")
    return Path(json.loads(proc.stdout)["Dir"])


def build_pause(version: str, out: Path) -> Path:
    """pause from build/pause/linux/pause.c of the kubernetes module, static, as upstream."""
    src = _kubernetes_source(version) / "build" / "pause" / "linux" / "pause.c"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise BuildError("pause: no C compiler (apt-get install gcc)")
    target = out / "pause"
    proc = subprocess.run([cc, "-Os", "-Wall", "-static", f"-DVERSION=pvchaos-{version}", "-o", str(target), str(src)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"pause: {cc} failed: {last_line(proc)}")
    return target


# ---- base image ------------------------------------------------------------------------

def ensure_base_image(engine: Engine, recipe: r.Recipe) -> str:
    """The base image: rootfs + node tools + files, imported into the engine once."""
    if image_exists(engine, recipe.base_tag):
        return recipe.base_tag
    tools = ensure_node_tools(recipe)
    tarball = build_rootfs(recipe, tools)
    _log(f"importing the base image {recipe.base_tag}")
    rootfs_tag = f"{recipe.base_tag}-rootfs"
    with tarball.open("rb") as fh:
        proc = subprocess.run(["docker", "import", "-", rootfs_tag], stdin=fh, capture_output=True, text=True,
                              env=engine.env(), check=False)
    _check(proc, "docker import of the base rootfs")
    # `docker import --change` cannot set STOPSIGNAL; systemd shuts down on SIGRTMIN+3.
    with tempfile.TemporaryDirectory(prefix="pvchaos-base-") as ctx:
        (Path(ctx) / "Dockerfile").write_text(r.base_dockerfile(rootfs_tag))
        _check(docker(engine, ["build", "-q", "-t", recipe.base_tag, ctx]), "docker build of the base image")
    docker(engine, ["rmi", rootfs_tag], timeout=120)
    return recipe.base_tag


# ---- node image ------------------------------------------------------------------------

def _component_images(engine: Engine, plan: list[r.ComponentImage], binaries: dict[str, Path],
                      workdir: Path) -> list[Path]:
    """docker build + docker save of each one-binary image; the images are then removed
    from the engine (they live on only inside the node's containerd)."""
    archives = []
    for component in plan:
        ctx = workdir / f"ctx-{component.binary}"
        ctx.mkdir(exist_ok=True)
        shutil.copy2(binaries[component.binary], ctx / component.binary)
        (ctx / "Dockerfile").write_text(r.binary_dockerfile(component.binary))
        names = [component.name, *(EXTRA_PAUSE_NAMES if component.binary == "pause" else ())]
        tags = [a for n in names for a in ("-t", n)]
        _check(docker(engine, ["build", "-q", *tags, str(ctx)]), f"docker build of {component.name}")
        archive = workdir / f"{component.binary}.tar"
        _check(docker(engine, ["save", "-o", str(archive), *names]), f"docker save of {component.name}")
        docker(engine, ["rmi", *names], timeout=120)
        archives.append(archive)
    ctx = workdir / "ctx-busybox"
    ctx.mkdir(exist_ok=True)
    shutil.copy2(binaries["busybox"], ctx / "busybox")
    (ctx / "Dockerfile").write_text(r.busybox_dockerfile())
    _check(docker(engine, ["build", "-q", "-t", r.TEST_IMAGE, str(ctx)]), "docker build of the busybox test image")
    archive = workdir / "busybox.tar"
    _check(docker(engine, ["save", "-o", str(archive), r.TEST_IMAGE]), "docker save of the busybox test image")
    docker(engine, ["rmi", r.TEST_IMAGE], timeout=120)
    archives.append(archive)
    return archives


_IMPORT = """set -e
containerd >/tmp/containerd.log 2>&1 &
for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.2; done
ctr version >/dev/null
for f in /tmp/images/*.tar; do
  ctr --namespace=k8s.io images import --no-unpack --digests --label=io.cri-containerd.pinned=pinned "$f"
done
ctr --namespace=k8s.io images list -q
pkill containerd
for i in $(seq 1 50); do pgrep containerd >/dev/null || break; sleep 0.2; done
rm -rf /tmp/images /tmp/containerd.log
"""


def build_node_image(engine: Engine, k8s_version: str) -> str:
    """The node image for `k8s_version`, built unless the engine holds it already."""
    recipe = r.Recipe(k8s_version)
    if image_exists(engine, recipe.tag):
        return recipe.tag
    with _lock("nodeimage"):
        if image_exists(engine, recipe.tag):
            return recipe.tag
        start = time.monotonic()
        _log(f"building {recipe.tag} (first use of this version; cached afterwards)")
        base = ensure_base_image(engine, recipe)  # first: debootstrap needs the network, not the CPU
        bins = ensure_binaries(k8s_version, only=("kubernetes", "kubernetes-node", "etcd"))
        k8s_dir = bins.kubectl.parent
        with tempfile.TemporaryDirectory(prefix="pvchaos-nodeimage-") as tmp:
            work = Path(tmp)
            binaries = {
                "kube-apiserver": bins.kube_apiserver, "kube-controller-manager": bins.kube_controller_manager,
                "kube-scheduler": bins.kube_scheduler, "etcd": bins.etcd,
                "pause": build_pause(k8s_version, work), "busybox": _busybox(work),
            }
            listed = subprocess.run([str(k8s_dir / "kubeadm"), "config", "images", "list", "--kubernetes-version",
                                     k8s_version], capture_output=True, text=True, check=False)
            plan = r.image_plan(_check(listed, "kubeadm config images list").splitlines())
            for component in plan:
                if component.binary == "coredns":  # the version kubeadm's addon deploys
                    binaries["coredns"] = ensure_coredns(image_version(component.name))
            archives = _component_images(engine, plan, binaries, work)
            _assemble(engine, recipe, base, k8s_dir, plan, archives, work)
        _log(f"built {recipe.tag} in {time.monotonic() - start:.0f}s")
        _prune_superseded(engine, recipe)
    return recipe.tag


def _prune_superseded(engine: Engine, recipe: r.Recipe) -> None:
    """Remove this version's node images and the base images of earlier recipes, so
    rebuilds do not pile up in the engine (an image a container still uses stays)."""
    listed = docker(engine, ["images", "--format", "{{.Repository}}:{{.Tag}}"], timeout=60).stdout.split()
    stale = [t for t in listed
             if (t.startswith(f"{r.NODE_REPOSITORY}:{recipe.k8s_version}-") and t != recipe.tag)
             or (t.startswith(f"{r.BASE_REPOSITORY}:") and t != recipe.base_tag)]
    if stale:
        docker(engine, ["rmi", *stale], timeout=300)


def _busybox(work: Path) -> Path:
    """/bin/busybox out of Debian's busybox-static package."""
    deb = debian_package_file("busybox-static", work)
    root = work / "busybox-deb"
    _check(subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True, check=False), "dpkg-deb -x")
    return root / "bin" / "busybox"


def _assemble(engine: Engine, recipe: r.Recipe, base: str, k8s_dir: Path, plan: list[r.ComponentImage],
              archives: list[Path], work: Path) -> None:
    name = f"pvchaos-nodeimage-build-{os.getpid()}-{int(time.time())}"
    run = docker(engine, ["run", "-d", "--name", name, "--label", "pvchaos.dev/build=node-image",
                          "--entrypoint", "sleep", "--security-opt", "seccomp=unconfined", base, "infinity"])
    container = _check(run, "docker run of the build container").strip()
    try:
        for binary in ("kubelet", "kubeadm", "kubectl", "kube-proxy"):
            _check(docker(engine, ["cp", str(k8s_dir / binary), f"{container}:/usr/bin/{binary}"]), f"docker cp {binary}")
        (work / "version").write_text(recipe.k8s_version)
        (work / "config.toml").write_text(r.containerd_config(r.pause_image(plan)))
        _check(docker(engine, ["exec", container, "mkdir", "-p", "/tmp/images", "/etc/containerd"]), "mkdir")
        _check(docker(engine, ["cp", str(work / "version"), f"{container}:/kind/version"]), "docker cp /kind/version")
        _check(docker(engine, ["cp", str(work / "config.toml"), f"{container}:/etc/containerd/config.toml"]),
               "docker cp containerd config")
        for archive in archives:
            _check(docker(engine, ["cp", str(archive), f"{container}:/tmp/images/{archive.name}"]),
                   f"docker cp {archive.name}")
        imported = _check(docker(engine, ["exec", container, "bash", "-c", _IMPORT]), "import into the node's containerd")
        missing = [c.name for c in plan if c.name not in imported]
        if missing:
            raise BuildError(f"node image: containerd did not list {missing} after import")
        _check(docker(engine, ["commit", "--change", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                               "--change", 'CMD []', container, recipe.tag]), "docker commit")
    finally:
        docker(engine, ["rm", "-f", "-v", container], timeout=120)

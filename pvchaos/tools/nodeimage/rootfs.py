"""The node's Debian root filesystem, made with debootstrap and kept as a tarball.

debootstrap needs root and a Debian mirror; the mirror is the one this machine's apt
uses when it has a Debian source, else deb.debian.org. The tarball is cached by the
recipe's base digest, so a second build (or a wiped Docker data root) re-imports it in
seconds instead of bootstrapping again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pvchaos.tools.build import BuildError, cache_root
from pvchaos.tools.nodeimage import recipe as r

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Units that have nothing to do in a node container and only slow or fail the boot.
MASKED_UNITS = ("systemd-binfmt.service", "getty.target", "console-getty.service", "systemd-udevd.service",
                "systemd-modules-load.service", "systemd-logind.service", "apt-daily.timer",
                "apt-daily-upgrade.timer", "e2scrub_all.timer", "fstrim.timer")
ENABLED_UNITS = ("pvchaos-cni.service", "containerd.service", "kubelet.service", "kube-proxy.service")
_FILE_PLACES = {
    "entrypoint": "usr/local/bin/entrypoint",
    "pvchaos-cni": "usr/local/bin/pvchaos-cni",
    "pvchaos-cni.service": "etc/systemd/system/pvchaos-cni.service",
    "containerd.service": "etc/systemd/system/containerd.service",
    "kubelet.service": "etc/systemd/system/kubelet.service",
    "pvchaos-kube-proxy": "usr/local/bin/pvchaos-kube-proxy",
    "kube-proxy.service": "etc/systemd/system/kube-proxy.service",
    "kubelet.slice": "etc/systemd/system/kubelet.slice",
    "kubelet.default": "etc/default/kubelet",
    "crictl.yaml": "etc/crictl.yaml",
    "99-pvchaos.conf": "etc/sysctl.d/99-pvchaos.conf",
    "default-storage.yaml": "kind/manifests/default-storage.yaml",  # kind applies it at create
}
EXECUTABLES = ("entrypoint", "pvchaos-cni", "pvchaos-kube-proxy")


def _log(msg: str) -> None:
    print(f"[pvchaos kind build-image] {msg}", file=sys.stderr, flush=True)


def debian_mirror(sources: list[Path] | None = None) -> str:
    """The Debian mirror apt uses here (deb822 `URIs:` or one-line `deb URL`)."""
    paths = sources if sources is not None else [Path("/etc/apt/sources.list"),
                                                 *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in paths:
        try:
            text = path.read_text()
        except OSError:
            continue
        for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+/debian)/?\s*", text, re.M):
            return m.group(1)
    return DEFAULT_MIRROR


def install_layout(rootfs: Path, tools: Path, files: Path = r.FILES) -> None:
    """Put the node tools and pvchaos's files into `rootfs`, enable and mask units, and
    create the directories kind and the suites expect."""
    for name, place in _FILE_PLACES.items():
        target = rootfs / place
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files / name, target)
        target.chmod(0o755 if name in EXECUTABLES else 0o644)
    bin_dir = rootfs / "usr/local/bin"
    for name in ("containerd", "containerd-shim-runc-v2", "ctr", "crictl"):
        shutil.copy2(tools / name, bin_dir / name)
    cni = rootfs / "opt/cni/bin"
    cni.mkdir(parents=True, exist_ok=True)
    for name in r.CNI_PLUGINS:
        shutil.copy2(tools / name, cni / name)
    wants = rootfs / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in ENABLED_UNITS:
        link = wants / unit
        link.unlink(missing_ok=True)
        link.symlink_to(f"/etc/systemd/system/{unit}")
    for unit in MASKED_UNITS:
        link = rootfs / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    for d in ("etc/kubernetes/manifests", "kind/manifests", "var/lib/pvchaos", *(p.lstrip("/") for p in r.LOCAL_DISKS)):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/machine-id").write_text("")




def build_rootfs(recipe: r.Recipe, tools: Path) -> Path:
    """The base rootfs tarball for `recipe`, bootstrapped on first use."""
    out = cache_root() / "nodeimage" / f"rootfs-{recipe.suite}-{recipe.base_digest()}.tar"
    if out.exists():
        return out
    if os.geteuid() != 0:
        raise BuildError("node image: the base rootfs is made with debootstrap, which needs root; "
                         "run once as root (the image is cached) or use an engine that already holds it")
    if shutil.which("debootstrap") is None:
        _apt_install("debootstrap")
    out.parent.mkdir(parents=True, exist_ok=True)
    log = cache_root() / "build-logs" / f"rootfs-{recipe.suite}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    start = time.monotonic()
    _log(f"debootstrap {recipe.suite} from {mirror} (a few minutes; log: {log})")
    with tempfile.TemporaryDirectory(prefix="pvchaos-rootfs-", dir=out.parent) as tmp:
        rootfs = Path(tmp) / "rootfs"
        with log.open("a") as fh:
            proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(recipe.packages)}",
                                   recipe.suite, str(rootfs), mirror], stdout=fh, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(empty log)"]
            raise BuildError(f"debootstrap {recipe.suite} failed ({proc.returncode}): {tail[0]} (log: {log})")
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        install_layout(rootfs, tools)
        partial = out.with_suffix(".partial")
        tar = subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."],
                             capture_output=True, text=True, check=False)
        if tar.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BuildError(f"tar of the rootfs failed: {tar.stderr.strip().splitlines()[-1:]}")
        partial.replace(out)
    _log(f"rootfs ready in {time.monotonic() - start:.0f}s ({out})")
    return out


def _apt_install(package: str) -> None:
    """Install one Debian package (as root), or fail in one line."""
    if shutil.which("apt-get") is None:
        raise BuildError(f"node image: {package} is missing and this machine has no apt-get to install it")
    _log(f"installing Debian's {package}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise BuildError(f"node image: `{' '.join(argv)}` failed: {last[0]}")


def debian_package_file(package: str, directory: Path) -> Path:
    """One .deb from the machine's apt sources (`apt-get download`, no install)."""
    proc = subprocess.run(["apt-get", "download", "-q", package], cwd=directory, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        proc = subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, check=False)
        proc = subprocess.run(["apt-get", "download", "-q", package], cwd=directory, capture_output=True, text=True, check=False)
    debs = sorted(directory.glob(f"{package}_*.deb"))
    if proc.returncode != 0 or not debs:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BuildError(f"apt-get download {package}: {last[0]}")
    return debs[-1]

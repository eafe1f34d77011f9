"""What goes into a kind node image, as data: versions, packages, files, image names.

Pure: no I/O beyond reading this package's own files for the digest. The builder
(`tools.nodeimage.build`) follows it; its digest names the image, so a change of any
input builds a new image and an unchanged recipe finds the cached one.

Why not `kind build node-image`: kind v0.33.0's builder pulls every image kubeadm lists
that it did not build (etcd, coredns, pause) plus kindnetd and local-path-provisioner
from registries (`ctr content fetch` in pkg/build/nodeimage/imageimporter.go), and its
Kubernetes sources are a source tree built with `make quick-release-images` (registry
base images) or release tarballs from dl.k8s.io. None of those is reachable here, so
the same layout (systemd + containerd base, /kind/version, images pre-loaded into the
node's containerd under the names kubeadm asks for) is assembled from Go modules and
Debian packages.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from pvchaos.tools.versions import DEFAULT_ETCD_VERSION

FILES = Path(__file__).resolve().parent / "files"

DEBIAN_SUITE = "bookworm"
# systemd as init; iptables/iproute2/conntrack/ethtool/socat for the kubelet and kubeadm;
# runc from Debian (containerd's shim execs it); mount/util-linux for volume mounts.
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "iptables", "iproute2", "mount", "util-linux", "kmod",
    "ca-certificates", "procps", "conntrack", "ethtool", "socat", "ebtables", "nftables", "runc",
    "libseccomp2", "e2fsprogs", "bash", "coreutils", "findutils", "hostname", "rsync", "less",
)
CONTAINERD_VERSION = "v2.3.4"  # the version kind v0.33.0's base image builds
CRICTL_VERSION = "v1.37.0"
CNI_PLUGINS_VERSION = "v1.9.1"
CNI_PLUGINS = ("ptp", "host-local", "loopback", "portmap", "bridge")
KIND_VERSION = "v0.33.0"
# Static local-volume directories present on every node, as an admin would prepare disks.
LOCAL_DISKS = tuple(f"/mnt/disks/vol{i}" for i in range(1, 9))
TEST_IMAGE = "pvchaos.local/busybox:1"  # busybox from Debian, for pods that run commands
NODE_REPOSITORY = "pvchaos/kind-node"
BASE_REPOSITORY = "pvchaos/kind-base"
# Images kubeadm lists that the harness's kind clusters do not run: kube-proxy runs as a
# systemd service of each node (files/pvchaos-kube-proxy), not as kubeadm's DaemonSet.
SKIPPED_IMAGES = ("kube-proxy",)
# CoreDNS is kubeadm's own addon, its image built from the Go module (nodeimage/coredns.py).
BINARY_IMAGES = {"kube-apiserver": "kube-apiserver", "kube-controller-manager": "kube-controller-manager",
                 "kube-scheduler": "kube-scheduler", "etcd": "etcd", "pause": "pause", "coredns": "coredns"}

_IMAGE = re.compile(r"^(?P<repo>[a-z0-9.\-/:]+?/)?(?P<name>[a-z0-9.\-_]+):(?P<tag>[\w.\-]+)$")


@dataclass(frozen=True)
class ComponentImage:
    """One container image the node must hold: its name and the binary it runs."""

    name: str  # what kubeadm asks for, e.g. registry.k8s.io/kube-apiserver:v1.35.4
    binary: str  # file name of the static binary that is the image's whole content


@dataclass(frozen=True)
class Recipe:
    """Every input of one node image."""

    k8s_version: str
    etcd_version: str = DEFAULT_ETCD_VERSION
    containerd_version: str = CONTAINERD_VERSION
    crictl_version: str = CRICTL_VERSION
    cni_plugins_version: str = CNI_PLUGINS_VERSION
    suite: str = DEBIAN_SUITE
    packages: tuple[str, ...] = PACKAGES
    files: dict[str, str] = field(default_factory=lambda: files_digests())  # noqa: PLW0108  defined below the class

    def base_digest(self) -> str:
        """Inputs of the base image (rootfs + node software, no Kubernetes)."""
        parts = [self.suite, *self.packages, self.containerd_version, self.crictl_version,
                 self.cni_plugins_version, *(f"{k}={v}" for k, v in sorted(self.files.items()))]
        return _digest(parts)

    def digest(self) -> str:
        return _digest([self.base_digest(), builder_digest(), self.k8s_version, self.etcd_version])

    @property
    def base_tag(self) -> str:
        return f"{BASE_REPOSITORY}:{self.suite}-{self.base_digest()}"

    @property
    def tag(self) -> str:
        return f"{NODE_REPOSITORY}:{self.k8s_version}-{self.digest()}"


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def files_digests(directory: Path = FILES) -> dict[str, str]:
    """Hash of each file copied into the base image and of the code that lays it out,
    so an edit of either rebuilds the base."""
    paths = [*sorted(directory.iterdir()), directory.parent / "rootfs.py"]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in paths if p.is_file()}


def builder_digest(directory: Path = FILES.parent) -> str:
    """Hash of the code that assembles the node image on top of the base."""
    return _digest([hashlib.sha256((directory / n).read_bytes()).hexdigest() for n in ("recipe.py", "build.py", "coredns.py")])


def image_plan(kubeadm_images: list[str]) -> list[ComponentImage]:
    """`kubeadm config images list` -> the images to build, by the names kubeadm asks for.

    Skipped add-ons are left out; anything else the harness cannot build is an error, so
    a new Kubernetes minor that needs another image fails the build, not the cluster.
    """
    plan = []
    for line in kubeadm_images:
        image = line.strip()
        if not image:
            continue
        m = _IMAGE.match(image)
        if not m:
            raise ValueError(f"kubeadm listed an image name this builder cannot read: {image!r}")
        name = m.group("name")
        if name in SKIPPED_IMAGES:
            continue
        if name not in BINARY_IMAGES:
            raise ValueError(f"kubeadm asks for {image}; the node image builder has no source for {name!r}")
        plan.append(ComponentImage(image, BINARY_IMAGES[name]))
    if not any(c.binary == "pause" for c in plan):
        raise ValueError(f"kubeadm listed no pause image: {kubeadm_images}")
    return plan


def pause_image(plan: list[ComponentImage]) -> str:
    return next(c.name for c in plan if c.binary == "pause")


def containerd_config(sandbox_image: str) -> str:
    """containerd 2.x config (version 3): CRI with systemd cgroups, runc from Debian,
    the pause image kubeadm expects, and the CNI config pvchaos-cni writes."""
    return f"""version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  discard_unpacked_layers = true
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{sandbox_image}'

[plugins.'io.containerd.cri.v1.runtime']
  tolerate_missing_hugepages_controller = true
  # Pods get no lower oom_score_adj than containerd's own. Without it, on hosts whose
  # bounding set lacks CAP_SYS_RESOURCE, runc cannot write the negative scores of
  # critical pods and every sandbox fails ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = true
        BinaryName = '/usr/sbin/runc'
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/opt/cni/bin']
    conf_dir = '/etc/cni/net.d'
"""


def binary_dockerfile(binary: str) -> str:
    """A one-binary image: no shell, no libc (every binary here is static). CoreDNS keeps
    upstream's layout (/coredns, its entrypoint: kubeadm's Deployment passes only args)."""
    if binary == "coredns":
        return 'FROM scratch\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n'
    entry = f'ENTRYPOINT ["/usr/local/bin/{binary}"]\n' if binary == "pause" else ""
    return ("FROM scratch\n"
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            f"COPY {binary} /usr/local/bin/{binary}\n" + entry)


def busybox_dockerfile() -> str:
    """The test image: Debian's static busybox with its applets as /bin links."""
    return ("FROM scratch\n"
            "COPY busybox /bin/busybox\n"
            'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
            "ENV PATH=/bin\n"
            'CMD ["/bin/sh"]\n')


def base_dockerfile(rootfs_image: str) -> str:
    """What `docker import` cannot set: the stop signal systemd shuts down on, the
    container marker systemd reads, and the entrypoint."""
    return (f"FROM {rootfs_image}\n"
            "STOPSIGNAL SIGRTMIN+3\n"
            "ENV container=docker\n"
            'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]\n')

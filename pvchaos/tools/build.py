"""Build the local backend's binaries from Go modules, cached per version.

Everything the embedded cluster runs is built here from the Go module proxy: the
control plane and kubectl (inside a generated wrapper module, see `tools.gomod`),
etcd (a wrapper module too), KWOK, and, only when a cluster asks for it, the old zonal
test provisioner (the default path runs the CSI stack, tools/csi_sidecars.py). A second
call with the same versions finds the binaries in the cache and returns in milliseconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pvchaos.tools import gomod, versions
from pvchaos.tools.versions import DEFAULT_ETCD_VERSION, DEFAULT_KWOK_VERSION

# The checkout (or, installed, the directory above site-packages' pvchaos): where the
# built-in suites, kind-config/ and reports/ live in a checkout.
REPO_ROOT = Path(__file__).resolve().parents[2]
PROVISIONER_SRC = Path(__file__).resolve().parent / "provisioner"
K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
K8S_NODE_COMMANDS = ("kubelet", "kubeadm", "kube-proxy")  # what a kind node image adds (tools/nodeimage)
# What a local cluster runs unless it asks for the test double (`"provisioner"`: 95 s of a
# cold build that the default path never starts).
DEFAULT_PARTS = ("kubernetes", "etcd", "kwok")
# Modules a Kubernetes go.mod requires that the Go module proxy does not serve -> our own
# stand-in (tools/standins/<name>/README.md says what it does and why); used only for the
# versions whose go.mod requires the module.
STANDINS_DIR = Path(__file__).resolve().parent / "standins"
STANDINS = {"sigs.k8s.io/iptables-wrappers": STANDINS_DIR / "iptables-wrappers"}  # 1.38's kubelet


class BuildError(RuntimeError):
    """A binary could not be built; the message names it, the cause and the log."""


@dataclass(frozen=True)
class Binaries:
    """Paths of every executable the local backend starts."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    kwok: Path
    provisioner: Path
    k8s_version: str

    def all(self) -> dict[str, Path]:
        return {
            "kube-apiserver": self.kube_apiserver,
            "kube-controller-manager": self.kube_controller_manager,
            "kube-scheduler": self.kube_scheduler,
            "kubectl": self.kubectl,
            "etcd": self.etcd,
            "kwok": self.kwok,
            "pvchaos-provisioner": self.provisioner,
        }


def cache_root() -> Path:
    """Where built binaries live: $PVCHAOS_CACHE, else ~/.cache/pvchaos (outside the
    clone, so a fresh clone on the same machine, as CI uses, reuses them)."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pvchaos"
    return Path(os.environ.get("PVCHAOS_CACHE") or default).resolve()


def _log(msg: str) -> None:
    print(f"[pvchaos build] {msg}", file=sys.stderr, flush=True)


def _require_go() -> str:
    go = shutil.which("go")
    if not go:
        raise BuildError(
            "go: no Go toolchain on PATH; install Go 1.25+ (Debian: apt-get install golang) "
            "or put it on PATH"
        )
    return go


def _go_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Static builds (CGO off, as upstream ships them), module mode tolerant of new sums."""
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod -buildvcs=false").strip()
    env.update(extra or {})
    return env


def _run_go(args: list[str], cwd: Path, log: Path, what: str, extra_env: dict[str, str] | None = None) -> None:
    """Run one go command, streaming to `log`, printing a heartbeat so users see progress."""
    start = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            _log(f"  {what}: still working, {time.monotonic() - start:.0f}s (log: {log})")

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    try:
        with log.open("a") as out:
            out.write(f"$ (cd {cwd} && {' '.join(args)})\n")
            out.flush()
            proc = subprocess.run(args, cwd=cwd, env=_go_env(extra_env), stdout=out, stderr=subprocess.STDOUT, check=False)
    finally:
        done.set()
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise BuildError(f"{what}: go exited {proc.returncode}: {' | '.join(tail)} (log: {log})")


def _upstream_gomod(module: str, version: str, log: Path) -> str:
    """The go.mod text the proxy serves for module@version. Asked outside any module: the
    wrapper of the version may already name a newer Go than this one (a second build of the
    same version), which the go command would refuse before downloading anything."""
    go = _require_go()
    with log.open("a") as out:
        proc = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            cwd=tempfile.gettempdir(), env=_go_env(), capture_output=True, text=True, check=False,
        )
        out.write(proc.stdout + proc.stderr)
    newer_go = _gomod_needing_newer_go(proc.stdout)
    if newer_go is not None:
        return newer_go
    if proc.returncode != 0:
        detail = proc.stdout.strip() or proc.stderr.strip()
        try:
            detail = json.loads(proc.stdout).get("Error", detail)
        except ValueError:
            pass
        first = detail.strip().splitlines()[0] if detail.strip() else "no answer"
        served = served_releases(module)
        listed = f"served: {', '.join(served)}" if served else f"see `go list -m -versions {module}`"
        raise BuildError(f"{module}@{version}: the Go module proxy does not serve it ({first.split(': ')[-1]}); "
                         f"{listed}")
    return Path(json.loads(proc.stdout)["GoMod"]).read_text()


def _gomod_needing_newer_go(answer: str) -> str | None:
    """The go.mod text when the only complaint of `go mod download -json` is that the
    module needs a newer Go than this one (the proxy served it, the .mod is on disk):
    reading it is what tells which toolchain to build with."""
    try:
        info = json.loads(answer)
    except ValueError:
        return None
    mod = Path(info.get("GoMod") or "/nonexistent")
    if "requires go >=" in info.get("Error", "") and mod.is_file():
        return mod.read_text()
    return None


def served_releases(module: str = "k8s.io/kubernetes") -> list[str]:
    """The module's release versions the proxy serves, of the Kubernetes minors pvchaos
    supports when the module is Kubernetes (its full list starts at v0.x); [] when the
    proxy cannot be asked."""
    go = _require_go()
    proc = subprocess.run([go, "list", "-m", "-versions", module], env=_go_env(), capture_output=True,
                          text=True, timeout=60, cwd=tempfile.gettempdir(), check=False)
    if proc.returncode != 0:
        return []
    found = proc.stdout.split()[1:]
    if module != "k8s.io/kubernetes":
        return [v for v in found if "-" not in v]
    # a minor with no release yet counts through its pre-releases (v1.38.0-beta.0)
    found = [v for v in found if versions.minor_of(v, release_only=True) in versions.SUPPORTED_MINORS]
    released = {versions.minor_of(v) for v in found if not versions.is_prerelease(v)}
    return [v for v in found if not versions.is_prerelease(v) or versions.minor_of(v) not in released]


def _install(built: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.chmod(0o755)
    tmp.replace(target)


def build_kubernetes(version: str, out_dir: Path, log: Path, commands: Iterable[str] = K8S_COMMANDS) -> None:
    """`commands` of k8s.io/kubernetes at `version` (default: the control plane and kubectl)."""
    go = _require_go()
    wrapper = out_dir / "src"
    fresh = not out_dir.exists()
    wrapper.mkdir(parents=True, exist_ok=True)
    try:
        upstream_text = _upstream_gomod("k8s.io/kubernetes", version, log)
    except BuildError:
        if fresh:  # leave no empty version directory behind, and never one with binaries in it
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    upstream = gomod.parse_upstream_mod(upstream_text)
    standins = {m: str(d) for m, d in STANDINS.items() if gomod.requires(upstream_text, m)}
    if standins:
        _log(f"k8s.io/kubernetes {version}: stand-ins for modules the proxy does not serve: {', '.join(standins)}")
    (wrapper / "go.mod").write_text(gomod.kubernetes_wrapper_mod(version, upstream, standins))
    toolchain = versions.go_toolchain_for(upstream.go_version)
    env = {"GOTOOLCHAIN": toolchain} if toolchain else None  # only the versions whose go.mod needs it
    _log(f"k8s.io/kubernetes {version}: wrapper with {len(upstream.local_replaces)} staging replaces"
         + (f", go {upstream.go_version} so GOTOOLCHAIN={toolchain}" if toolchain else ""))
    _run_go([go, "mod", "download", "k8s.io/kubernetes"], wrapper, log, f"download k8s.io/kubernetes@{version}", env)
    ldflags = gomod.version_ldflags(version)
    missing = [name for name in commands if not (out_dir / name).exists()]
    if not missing:
        return
    # One `go build` of every missing command: the package graph is loaded once and each
    # command's link overlaps the others' compiles (four builds in turn load it four times
    # and link one at a time).
    start = time.monotonic()
    _log(f"building {', '.join(missing)} {version} ...")
    tmp_dir = wrapper / "out"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir()
    _run_go([go, "build", "-trimpath", "-ldflags", ldflags, "-o", f"{tmp_dir}/",
             *(f"k8s.io/kubernetes/cmd/{name}" for name in missing)],
            wrapper, log, f"build {', '.join(missing)} {version}", env)
    for name in missing:
        _install(tmp_dir / name, out_dir / name)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    _log(f"built {', '.join(missing)} {version} in {time.monotonic() - start:.0f}s")


def build_etcd(version: str, out_dir: Path, log: Path) -> None:
    """etcd from go.etcd.io/etcd/server/v3, whose go.mod has replaces, hence a wrapper."""
    go = _require_go()
    target = out_dir / "etcd"
    if target.exists():
        return
    wrapper = out_dir / "src"
    wrapper.mkdir(parents=True, exist_ok=True)
    upstream = gomod.parse_upstream_mod(_upstream_gomod("go.etcd.io/etcd/server/v3", version, log))
    (wrapper / "go.mod").write_text(
        f"module pvchaos.local/etcdbuild\n\ngo {upstream.go_version}\n\n"
        f"require go.etcd.io/etcd/server/v3 {version}\n"
    )
    start = time.monotonic()
    _log(f"building etcd {version} ...")
    tmp_out = wrapper / "etcd.out"
    _run_go([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp_out), "go.etcd.io/etcd/server/v3"],
            wrapper, log, f"build etcd {version}")
    _install(tmp_out, target)
    tmp_out.unlink()
    _log(f"built etcd {version} in {time.monotonic() - start:.0f}s")


def _go_install(command: str, version: str, target: Path, log: Path) -> None:
    """`go install sigs.k8s.io/kwok/cmd/<command>@version` into `target`: KWOK's go.mod
    has no replaces, so no wrapper module is needed."""
    if target.exists():
        return
    go = _require_go()
    start = time.monotonic()
    _log(f"building {command} {version} ...")
    with tempfile.TemporaryDirectory(prefix="pvchaos-gobin-") as gobin:
        target.parent.mkdir(parents=True, exist_ok=True)
        _run_go([go, "install", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kwok/cmd/{command}@{version}"],
                target.parent, log, f"build {command} {version}", {"GOBIN": gobin, "GOFLAGS": "-buildvcs=false"})
        _install(Path(gobin) / command, target)
    _log(f"built {command} {version} in {time.monotonic() - start:.0f}s")


def build_kwok(version: str, out_dir: Path, log: Path) -> None:
    """KWOK's controller."""
    _go_install("kwok", version, out_dir / "kwok", log)


def build_kwokctl(version: str = DEFAULT_KWOK_VERSION, log: Path | None = None) -> Path:
    """kwokctl, only for bench/start_vs_kwokctl.py (the clusters never use it); cached
    next to kwok as `<cache>/bin/kwok-<version>/kwokctl`."""
    target = cache_root() / "bin" / f"kwok-{version}" / "kwokctl"
    log = log or cache_root() / "build-logs" / f"kwokctl-{version}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    _go_install("kwokctl", version, target, log)
    return target


def provisioner_digest(src: Path = PROVISIONER_SRC) -> str:
    """Hash of what goes into the provisioner binary (Go sources, go.mod, go.sum; not
    `_test.go`), so any edit to it is a new cache key (`provisioner-<digest>`) and a
    rebuild for every user and CI, while editing a Go test rebuilds nothing."""
    h = hashlib.sha256()
    for path in sorted(src.rglob("*")):
        if path.is_file() and path.suffix in {".go", ".mod", ".sum"} and not path.name.endswith("_test.go"):
            h.update(path.relative_to(src).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def build_provisioner(out_dir: Path, log: Path) -> None:
    """Our zonal test provisioner (tools/provisioner), on sig-storage-lib-external-provisioner."""
    go = _require_go()
    target = out_dir / "pvchaos-provisioner"
    if target.exists():
        return
    start = time.monotonic()
    _log("building pvchaos-provisioner ...")
    tmp_out = out_dir / "pvchaos-provisioner.out"
    out_dir.mkdir(parents=True, exist_ok=True)
    _run_go([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp_out), "."],
            PROVISIONER_SRC, log, "build pvchaos-provisioner")
    _install(tmp_out, target)
    tmp_out.unlink()
    _log(f"built pvchaos-provisioner in {time.monotonic() - start:.0f}s")


def cached_binary(k8s_version: str, name: str) -> Path | None:
    """A Kubernetes command of `k8s_version` if it is built already (never builds)."""
    path = cache_root() / "bin" / f"kubernetes-{k8s_version}" / name
    return path if path.is_file() else None


def ensure_binaries(
    k8s_version: str,
    etcd_version: str = DEFAULT_ETCD_VERSION,
    kwok_version: str = DEFAULT_KWOK_VERSION,
    only: Iterable[str] | None = None,
) -> Binaries:
    """Return cached binaries for these versions, building whatever is missing of `only`
    (default DEFAULT_PARTS: the test provisioner's path is returned, built only when asked)."""
    gomod.staging_version(k8s_version)  # validate before doing anything
    root = cache_root() / "bin"
    k8s_dir = root / f"kubernetes-{k8s_version}"
    etcd_dir = root / f"etcd-{etcd_version}"
    kwok_dir = root / f"kwok-{kwok_version}"
    prov_dir = root / f"provisioner-{provisioner_digest()}"
    logs = cache_root() / "build-logs"
    logs.mkdir(parents=True, exist_ok=True)
    wanted = set(only or DEFAULT_PARTS)
    started = time.monotonic()
    present = {  # installs are atomic renames: a file that exists is complete
        "kubernetes": all((k8s_dir / n).exists() for n in K8S_COMMANDS),
        "kubernetes-node": all((k8s_dir / n).exists() for n in K8S_NODE_COMMANDS),
        "etcd": (etcd_dir / "etcd").exists(), "kwok": (kwok_dir / "kwok").exists(),
        "provisioner": (prov_dir / "pvchaos-provisioner").exists(),
    }
    if not all(present.get(w, False) for w in wanted):  # cached: no wait behind another version's build
        with _build_lock():
            _build_missing(wanted, k8s_version, etcd_version, kwok_version, k8s_dir, etcd_dir, kwok_dir, prov_dir,
                           logs)
    elapsed = time.monotonic() - started
    if elapsed > 2:
        _log(f"all binaries ready in {elapsed:.0f}s (cache: {root})")
    return Binaries(
        kube_apiserver=k8s_dir / "kube-apiserver",
        kube_controller_manager=k8s_dir / "kube-controller-manager",
        kube_scheduler=k8s_dir / "kube-scheduler",
        kubectl=k8s_dir / "kubectl",
        etcd=etcd_dir / "etcd",
        kwok=kwok_dir / "kwok",
        provisioner=prov_dir / "pvchaos-provisioner",
        k8s_version=k8s_version,
    )


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """Parallel workers wait for one build instead of running several."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / ".build.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def build_at_once(builds: Sequence[Callable[[], object]], at_once: int = 2) -> None:
    """Run independent builds (each its own `go` process and targets, none taking the lock:
    the caller holds it) `at_once` at a time. On 2 cores one build leaves a core idle while
    it loads packages, links or downloads, which another fills (bench/build_concurrency.py).
    Every build finishes; then the first error is raised."""
    if len(builds) <= 1 or at_once <= 1:
        for build in builds:
            build()
        return
    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="pvchaos-build") as pool:
        futures = [pool.submit(build) for build in builds]
    for future in futures:
        if (error := future.exception()) is not None:
            raise error


def _build_missing(wanted: set[str], k8s_version: str, etcd_version: str, kwok_version: str,
                   k8s_dir: Path, etcd_dir: Path, kwok_dir: Path, prov_dir: Path, logs: Path) -> None:
    k8s_log = logs / f"kubernetes-{k8s_version}.log"
    commands = [*(K8S_COMMANDS if "kubernetes" in wanted else ()),
                *(K8S_NODE_COMMANDS if "kubernetes-node" in wanted else ())]
    builds: list[Callable[[], object]] = []
    if commands and not all((k8s_dir / n).exists() for n in commands):
        builds.append(lambda: build_kubernetes(k8s_version, k8s_dir, k8s_log, commands))
    if "etcd" in wanted:
        builds.append(lambda: build_etcd(etcd_version, etcd_dir, logs / f"etcd-{etcd_version}.log"))
    if "kwok" in wanted:
        builds.append(lambda: build_kwok(kwok_version, kwok_dir, logs / f"kwok-{kwok_version}.log"))
    if "provisioner" in wanted:
        builds.append(lambda: build_provisioner(prov_dir, logs / "provisioner.log"))
    build_at_once(builds)

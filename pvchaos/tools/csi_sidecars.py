"""Build upstream's CSI sidecars (external-provisioner, external-attacher, external-resizer),
cached per version.

Dynamic volumes come from upstream's own controllers talking to our CSI driver, so the
provisioning behaviour under test (rescheduling, retries, events) is upstream's, not a
test double's. Both modules carry `replace` lines in their go.mod, which `go install M@V`
refuses; so the module is downloaded (`go mod download -json`), copied out of the
read-only module cache into a temporary directory, and built there as the main module,
where its replaces apply. Binaries land in `<cache>/bin/<name>-<version>/<name>`.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pvchaos.tools.build import (
    BuildError,
    _build_lock,
    _go_env,
    _install,
    _log,
    _require_go,
    _run_go,
    build_at_once,
    cache_root,
)


@dataclass(frozen=True)
class Sidecar:
    """One upstream sidecar: its Go module, version and command directory."""

    name: str
    module: str
    version: str
    command: str  # package directory inside the module

    @property
    def target(self) -> Path:
        return cache_root() / "bin" / f"{self.name}-{self.version}" / self.name

    @property
    def log(self) -> Path:
        return cache_root() / "build-logs" / f"{self.name}-{self.version}.log"


PROVISIONER = Sidecar("csi-provisioner", "github.com/kubernetes-csi/external-provisioner/v6", "v6.4.0",
                      "./cmd/csi-provisioner")
ATTACHER = Sidecar("csi-attacher", "github.com/kubernetes-csi/external-attacher/v4", "v4.13.0",
                   "./cmd/csi-attacher")
# external-resizer moved to a /v2 module path at v2.0.0; the old path is not served here
# (which is why earlier rounds found "no resizer"), the /v2 one is
RESIZER = Sidecar("csi-resizer", "github.com/kubernetes-csi/external-resizer/v2", "v2.3.0", "./cmd/csi-resizer")
SIDECARS = (PROVISIONER, ATTACHER, RESIZER)


@dataclass(frozen=True)
class SidecarBinaries:
    """Paths of the built sidecars and the versions they are, for a cluster's description."""

    provisioner: Path
    attacher: Path
    resizer: Path
    provisioner_version: str = PROVISIONER.version
    attacher_version: str = ATTACHER.version
    resizer_version: str = RESIZER.version


def module_dir(module: str, version: str, log: Path, what: str) -> Path:
    """A module's extracted directory in the module cache (downloaded if needed); `what`
    names it in the error."""
    go = _require_go()
    proc = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"],
                          cwd=tempfile.gettempdir(), env=_go_env(), capture_output=True, text=True, check=False)
    with log.open("a") as out:
        out.write(proc.stdout + proc.stderr)
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        detail = info.get("Error") or proc.stderr.strip() or "no answer"
        raise BuildError(f"{what} {version}: go mod download failed: "
                         f"{detail.splitlines()[0]} (log: {log})")
    return Path(info["Dir"])


def copy_writable(source: Path, work: Path) -> Path:
    """`source` (read-only, in the module cache) copied to `work`, writable for go to
    update go.sum."""
    shutil.copytree(source, work, ignore=shutil.ignore_patterns(".git"))
    for path in [work, *work.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return work


def writable_source(sidecar: Sidecar, work: Path) -> Path:
    """The sidecar's module copied to `work`, where it builds as the main module (its
    replaces apply)."""
    return copy_writable(module_dir(sidecar.module, sidecar.version, sidecar.log, sidecar.name), work)


def build_sidecar(sidecar: Sidecar) -> Path:
    """Build one sidecar into the cache unless it is there; no lock (callers hold it)."""
    if sidecar.target.exists():
        return sidecar.target
    sidecar.log.parent.mkdir(parents=True, exist_ok=True)
    go = _require_go()
    start = time.monotonic()
    _log(f"building {sidecar.name} {sidecar.version} ...")
    with tempfile.TemporaryDirectory(prefix=f"pvchaos-{sidecar.name}-") as tmp:
        work = writable_source(sidecar, Path(tmp) / "src")
        out = Path(tmp) / sidecar.name
        _run_go([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out), sidecar.command],
                work, sidecar.log, f"build {sidecar.name} {sidecar.version}")
        _install(out, sidecar.target)
    _log(f"built {sidecar.name} {sidecar.version} in {time.monotonic() - start:.0f}s")
    return sidecar.target


def ensure_csi_sidecars() -> SidecarBinaries:
    """The cached sidecars, building whatever is missing under the one build lock, all at
    once (build_at_once)."""
    if not all(s.target.exists() for s in SIDECARS):  # installs are atomic: present means complete
        with _build_lock():
            build_at_once([partial(build_sidecar, s) for s in SIDECARS if not s.target.exists()])
    return SidecarBinaries(provisioner=PROVISIONER.target, attacher=ATTACHER.target, resizer=RESIZER.target)

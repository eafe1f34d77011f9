"""Build pvchaos's own CSI driver (`pvchaos-csi`, tools/csidriver) and fetch csi-sanity,
both into the binary cache, the way `tools.build` builds the test provisioner.

The driver is keyed by the digest of its sources (a source edit is a new cache entry and
a rebuild; editing a Go test is not) and built static (CGO off, -trimpath) so the same
file can be copied into kind node containers. csi-sanity is keyed by its version.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pvchaos.tools.build import (
    BuildError,
    _build_lock,
    _install,
    _log,
    _require_go,
    _run_go,
    cache_root,
    provisioner_digest,
)

CSI_DRIVER_SRC = Path(__file__).resolve().parent / "csidriver"
CSI_DRIVER_BINARY = "pvchaos-csi"
CSI_SANITY_MODULE = "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
CSI_SANITY_VERSION = "v5.6.0"

__all__ = ["BuildError", "CSI_DRIVER_SRC", "CSI_SANITY_VERSION", "csi_driver_digest", "ensure_csi_driver",
           "ensure_csi_sanity"]


def csi_driver_digest(src: Path = CSI_DRIVER_SRC) -> str:
    """Hash of what goes into the driver binary: its .go (not _test.go), go.mod, go.sum.
    The provisioner's digest function hashes exactly that for any source tree."""
    return provisioner_digest(src)


def ensure_csi_driver() -> Path:
    """The cached `pvchaos-csi` for the current sources, built when missing:
    `<cache>/bin/csidriver-<digest>/pvchaos-csi`."""
    target = cache_root() / "bin" / f"csidriver-{csi_driver_digest()}" / CSI_DRIVER_BINARY
    if target.exists():  # installs are atomic renames: a file that exists is complete
        return target
    log = cache_root() / "build-logs" / "csidriver.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock():
        if not target.exists():  # another worker may have built it while we waited
            _build_csi_driver(target, log)
    return target


def _build_csi_driver(target: Path, log: Path) -> None:
    go = _require_go()
    start = time.monotonic()
    _log(f"building {CSI_DRIVER_BINARY} ...")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = target.parent / f"{CSI_DRIVER_BINARY}.out"
    # _run_go's environment sets CGO_ENABLED=0: a static binary for kind node containers.
    _run_go([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp_out), "."],
            CSI_DRIVER_SRC, log, f"build {CSI_DRIVER_BINARY}")
    _install(tmp_out, target)
    tmp_out.unlink()
    _log(f"built {CSI_DRIVER_BINARY} in {time.monotonic() - start:.0f}s")


def ensure_csi_sanity(version: str = CSI_SANITY_VERSION) -> Path:
    """The cached csi-sanity of `version`, `go install`ed when missing:
    `<cache>/bin/csi-sanity-<version>/csi-sanity`."""
    target = cache_root() / "bin" / f"csi-sanity-{version}" / "csi-sanity"
    if target.exists():
        return target
    log = cache_root() / "build-logs" / f"csi-sanity-{version}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock():
        if not target.exists():
            go = _require_go()
            start = time.monotonic()
            _log(f"building csi-sanity {version} ...")
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="pvchaos-gobin-") as gobin:
                _run_go([go, "install", "-trimpath", "-ldflags", "-s -w", f"{CSI_SANITY_MODULE}@{version}"],
                        target.parent, log, f"build csi-sanity {version}",
                        {"GOBIN": gobin, "GOFLAGS": "-buildvcs=false"})
                _install(Path(gobin) / "csi-sanity", target)
            _log(f"built csi-sanity {version} in {time.monotonic() - start:.0f}s")
    return target

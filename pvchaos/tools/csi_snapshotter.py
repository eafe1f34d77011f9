"""Build upstream's snapshot components (the csi-snapshotter sidecar and the
snapshot-controller) from external-snapshotter v8, cached per version, and find the
VolumeSnapshot CRDs that version ships.

The module's go.mod replaces its client, `github.com/kubernetes-csi/external-snapshotter/client/v8`,
with `./client`, a nested module the proxy serves on its own and leaves out of the parent's
zip; so the client module of the same version is copied into `client/` of the writable
copy, which then builds as upstream's repository does. The CRDs are the client module's
`config/crd` files, as upstream's install instructions apply them. Binaries land in
`<cache>/bin/<name>-<version>/<name>`, like the other sidecars (pvchaos/tools/csi_sidecars.py).

pvchaos/clusters/csi.py applies the CRDs and starts both components beside pvchaos-csi's
stack on the local and kind backends.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pvchaos.tools.build import BuildError, _build_lock, _install, _log, _require_go, _run_go, cache_root
from pvchaos.tools.csi_sidecars import Sidecar, copy_writable, module_dir

SNAPSHOTTER_MODULE = "github.com/kubernetes-csi/external-snapshotter/v8"
CLIENT_MODULE = "github.com/kubernetes-csi/external-snapshotter/client/v8"
SNAPSHOTTER_VERSION = "v8.7.0"
SNAPSHOTTER = Sidecar("csi-snapshotter", SNAPSHOTTER_MODULE, SNAPSHOTTER_VERSION, "./cmd/csi-snapshotter")
SNAPSHOT_CONTROLLER = Sidecar("snapshot-controller", SNAPSHOTTER_MODULE, SNAPSHOTTER_VERSION, "./cmd/snapshot-controller")
SNAPSHOT_COMPONENTS = (SNAPSHOTTER, SNAPSHOT_CONTROLLER)
# The VolumeSnapshot API (snapshot.storage.k8s.io/v1) and the group snapshot API
# (groupsnapshot.storage.k8s.io/v1, GA in v8), in the order of the module's own
# config/crd/kustomization.yaml, as upstream installs them. Both components wait up to
# --retry-crd-interval-max (30 s) for the group CRDs at start when they are missing.
CRD_FILES = ("snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
             "snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
             "snapshot.storage.k8s.io_volumesnapshots.yaml",
             "groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml",
             "groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml",
             "groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml")


@dataclass(frozen=True)
class SnapshotBinaries:
    """Paths of the built components, the CRD files, and the version they all are."""

    snapshotter: Path
    controller: Path
    crds: tuple[Path, ...]
    version: str = SNAPSHOTTER_VERSION


def _log_file() -> Path:
    return cache_root() / "build-logs" / f"external-snapshotter-{SNAPSHOTTER_VERSION}.log"


def snapshot_crds(version: str = SNAPSHOTTER_VERSION) -> tuple[Path, ...]:
    """The VolumeSnapshot CRD files of the client module (downloaded if needed); a file
    missing from it is a BuildError naming the directory looked in."""
    log = _log_file()
    log.parent.mkdir(parents=True, exist_ok=True)
    crd_dir = module_dir(CLIENT_MODULE, version, log, "external-snapshotter client") / "config" / "crd"
    missing = [name for name in CRD_FILES if not (crd_dir / name).is_file()]
    if missing:
        raise BuildError(f"external-snapshotter client {version}: {', '.join(missing)} not in {crd_dir}")
    return tuple(crd_dir / name for name in CRD_FILES)


def snapshot_source(work: Path, log: Path) -> Path:
    """external-snapshotter's module with its client module in `client/`, writable, at `work`."""
    copy_writable(module_dir(SNAPSHOTTER_MODULE, SNAPSHOTTER_VERSION, log, "external-snapshotter"), work)
    copy_writable(module_dir(CLIENT_MODULE, SNAPSHOTTER_VERSION, log, "external-snapshotter client"), work / "client")
    return work


def build_snapshot_components() -> None:
    """Build whichever component is missing from the cache, from one copy of the source;
    no lock (callers hold it). A build that fails installs nothing."""
    missing = [c for c in SNAPSHOT_COMPONENTS if not c.target.exists()]
    if not missing:
        return
    log = _log_file()
    log.parent.mkdir(parents=True, exist_ok=True)
    go = _require_go()
    start = time.monotonic()
    _log(f"building {', '.join(c.name for c in missing)} {SNAPSHOTTER_VERSION} ...")
    with tempfile.TemporaryDirectory(prefix="pvchaos-external-snapshotter-") as tmp:
        work = snapshot_source(Path(tmp) / "src", log)
        for component in missing:
            out = Path(tmp) / component.name
            _run_go([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out), component.command],
                    work, log, f"build {component.name} {SNAPSHOTTER_VERSION}")
            _install(out, component.target)
    _log(f"built {', '.join(c.name for c in missing)} in {time.monotonic() - start:.0f}s")


def ensure_snapshot_components() -> SnapshotBinaries:
    """The cached csi-snapshotter and snapshot-controller (built under the one build lock
    when missing) and the CRD files."""
    if not all(c.target.exists() for c in SNAPSHOT_COMPONENTS):  # installs are atomic: present means complete
        with _build_lock():
            build_snapshot_components()
    return SnapshotBinaries(snapshotter=SNAPSHOTTER.target, controller=SNAPSHOT_CONTROLLER.target,
                            crds=snapshot_crds())

"""Build this package's images offline into images/*.tar, as a vendor ships them.

There is no registry here, so each image is made the way `docker import` makes one (a
root filesystem holding one static binary, with its entrypoint) and written with
`docker save`: pvchaos's own CSI driver `pvchaos-csi` (also the node plugin's registration
sidecar: `pvchaos-csi registrar` stands in for upstream's node-driver-registrar, which the
Go module proxy here does not serve), and upstream's external-provisioner,
external-attacher, external-resizer and csi-snapshotter, all built from Go modules by pvchaos (cached). The other example
packages link this file and images/ (they run the same images with other flags).

Run: .venv/bin/python examples/vendor-driver/build.py   (prints the archives written)
The Docker engine is pvchaos's (started here when none runs, and then stopped again).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from pvchaos.tools.binary_image import digest as _digest  # noqa: E402
from pvchaos.tools.binary_image import rootfs  # noqa: E402
from pvchaos.tools.csi_driver import ensure_csi_driver  # noqa: E402
from pvchaos.tools.csi_sidecars import ATTACHER, PROVISIONER, RESIZER, ensure_csi_sidecars  # noqa: E402
from pvchaos.tools.csi_snapshotter import SNAPSHOTTER_VERSION, ensure_snapshot_components  # noqa: E402
from pvchaos.tools.docker_engine import docker, ensure_engine, last_line, owned_engine, stop_engine  # noqa: E402

IMAGES = HERE / "images"


def _digest_file(name: str) -> Path:
    """Beside each archive, the sha256 of the binary it holds (`<name>.tar.sha256`)."""
    return IMAGES / f"{name}.tar.sha256"


def _recorded(name: str) -> str:
    """The digest recorded beside an archive, "" where there is none."""
    path = _digest_file(name)
    return path.read_text(errors="replace").strip() if path.exists() else ""


def main() -> int:
    sidecars = ensure_csi_sidecars()
    wanted = [
        ("pvchaos-csi", "0.1.0", ensure_csi_driver()),
        ("csi-provisioner", PROVISIONER.version, sidecars.provisioner),
        ("csi-attacher", ATTACHER.version, sidecars.attacher),
        ("csi-resizer", RESIZER.version, sidecars.resizer),
        ("csi-snapshotter", SNAPSHOTTER_VERSION, ensure_snapshot_components().snapshotter),
    ]
    IMAGES.mkdir(exist_ok=True)
    # an archive is current when it was made from this very binary (its digest beside it):
    # certify runs this before every certification, so a rebuilt driver is never shipped stale
    stale = [(name, tag, binary) for name, tag, binary in wanted
             if _recorded(name) != _digest(binary) or not (IMAGES / f"{name}.tar").exists()]
    if not stale:
        return 0
    running = owned_engine() is not None  # another run's engine: never stopped from here
    engine = ensure_engine()
    try:
        for name, tag, binary in stale:
            ref = f"pvchaos.dev/vendor/{name}:{tag}"
            made = docker(engine, ["import", "--change", f'ENTRYPOINT ["/{name}"]', "-", ref],
                          stdin=rootfs(binary, name))
            if made.returncode != 0:
                raise SystemExit(f"docker import {ref}: {last_line(made)}")
            archive = IMAGES / f"{name}.tar"
            saved = docker(engine, ["save", "-o", str(archive), ref])
            if saved.returncode != 0:
                raise SystemExit(f"docker save {ref}: {last_line(saved)}")
            _digest_file(name).write_text(_digest(binary) + "\n")
            print(archive)
    finally:
        if engine.owned and not running:
            stop_engine(engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())

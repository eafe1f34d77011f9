"""An image archive holding one static binary, made offline (no registry here): a root
filesystem with the binary and an empty /tmp, `docker import`ed with its entrypoint and
written by `docker save`, so `kind load image-archive` puts it into the nodes. certify
uses it for the CSI fault proxy it adds to a vendor's pods; cached by the binary's digest."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from pvchaos.tools.build import BuildError, cache_root
from pvchaos.tools.docker_engine import Engine, docker, last_line


def rootfs(binary: Path, name: str) -> bytes:
    """A tar of / with the binary at /<name> and an empty /tmp."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(tmp)
        tar.add(str(binary), arcname=name)
    return out.getvalue()


def digest(binary: Path) -> str:
    return hashlib.sha256(binary.read_bytes()).hexdigest()


def binary_image(engine: Engine, binary: Path, repository: str, name: str) -> tuple[str, Path]:
    """(image reference, archive) of `binary` as /<name>, its entrypoint; tagged with the
    binary's digest, so a rebuilt binary is a new image and an unchanged one is reused."""
    tag = digest(binary)[:12]
    ref = f"{repository}:{tag}"
    archive = cache_root() / "images" / f"{name}-{tag}.tar"
    if archive.exists():
        return ref, archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    made = docker(engine, ["import", "--change", f'ENTRYPOINT ["/{name}"]', "-", ref], stdin=rootfs(binary, name))
    if made.returncode != 0:
        raise BuildError(f"docker import {ref}: {last_line(made)}")
    partial = archive.with_suffix(".tar.partial")
    saved = docker(engine, ["save", "-o", str(partial), ref])
    if saved.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BuildError(f"docker save {ref}: {last_line(saved)}")
    partial.replace(archive)  # whole or not at all
    return ref, archive

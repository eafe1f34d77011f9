"""Stand-ins for a vendor package's files, shared by the unit tests that read packages
(certify's and `run --driver-package`'s): a package's images are `docker save` archives,
and reading one needs only its manifest."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path


def image_archive(path: Path, tags: list[str]) -> Path:
    """A minimal `docker save` archive: manifest.json with RepoTags."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        data = json.dumps([{"Config": "c.json", "RepoTags": tags, "Layers": []}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path

"""Default versions of everything the local backend builds, and the one reader of a
Kubernetes version string, in one place."""

import re

DEFAULT_K8S_VERSION = "v1.35.4"  # newest 1.35.x the module proxy serves; first with MutablePVNodeAffinity
DEFAULT_ETCD_VERSION = "v3.6.16"
DEFAULT_KWOK_VERSION = "v0.8.0"
SUPPORTED_MINORS = (34, 35, 36, 37)

_VERSION = re.compile(r"v?1\.(\d+)(\.\d+)?([-+].*)?")


def minor_of(version: str, release_only: bool = False) -> int | None:
    """35 for v1.35.4 (also 1.35, v1.35.4-gke.1 as clusters report it); None when the text
    is not a 1.x version. `release_only` accepts exactly v1.MINOR.PATCH (what we build)."""
    m = _VERSION.fullmatch(version.strip())
    if not m or (release_only and (not version.startswith("v") or not m.group(2) or m.group(3))):
        return None
    return int(m.group(1))

"""Default versions of everything the local backend builds, and the one reader of a
Kubernetes version string, in one place."""

import re

DEFAULT_K8S_VERSION = "v1.35.4"  # newest 1.35.x the module proxy serves; first with MutablePVNodeAffinity
DEFAULT_ETCD_VERSION = "v3.6.16"
DEFAULT_KWOK_VERSION = "v0.8.0"
SUPPORTED_MINORS = (34, 35, 36, 37, 38)
# The Go toolchain a version's go.mod needs when it is newer than the machine's (go1.26.8):
# the one approved newer toolchain, which the go command fetches from the module proxy.
NEWER_GO_TOOLCHAIN = "go1.27.3"

_VERSION = re.compile(r"v?1\.(\d+)(\.\d+)?([-+].*)?")
# What we build: a release, or an upstream pre-release tag (v1.38.0-beta.0, -alpha.2, -rc.1),
# whose staging modules are published as v0.38.0-beta.0 like a release's.
_BUILDABLE = re.compile(r"v(1)\.(\d+)\.(\d+)(?:-(alpha|beta|rc)\.(\d+))?")


def minor_of(version: str, release_only: bool = False) -> int | None:
    """35 for v1.35.4 (also 1.35, v1.35.4-gke.1 as clusters report it); None when the text
    is not a 1.x version. `release_only` accepts exactly what we build: v1.MINOR.PATCH or an
    upstream pre-release of it (v1.38.0-beta.0), not a vendor's v1.35.4-gke.1."""
    m = _VERSION.fullmatch(version.strip())
    if not m or (release_only and not _BUILDABLE.fullmatch(version.strip())):
        return None
    return int(m.group(1))


def is_prerelease(version: str) -> bool:
    """True for v1.38.0-beta.0 and the like (pure)."""
    m = _BUILDABLE.fullmatch(version.strip())
    return bool(m and m.group(4))


def release(version: str) -> tuple[int, int, int]:
    """(1, 36, 3) for v1.36.3, (1, 38, 0) for v1.38.0-beta.0; ValueError in one line for
    anything we do not build."""
    m = _BUILDABLE.fullmatch(version.strip())
    if not m:
        raise ValueError(f"not a Kubernetes release version: {version!r} (want v1.MINOR.PATCH or v1.MINOR.PATCH-beta.N)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


_PRE_RANK = {"alpha": 0, "beta": 1, "rc": 2}


def order_key(version: str) -> tuple[int, int, int, int, int]:
    """Sort key in release order: v1.38.0-alpha.2 < v1.38.0-beta.0 < v1.38.0-rc.1 < v1.38.0 (pure)."""
    m = _BUILDABLE.fullmatch(version.strip())
    if not m:
        raise ValueError(f"not a Kubernetes release version: {version!r}")
    pre = (_PRE_RANK[m.group(4)], int(m.group(5))) if m.group(4) else (3, 0)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), *pre


_NEEDS_GO = re.compile(r"requires go (?:>|\\u003e)= ?v?(\d+\.\d+(?:\.\d+)?)")  # as is, or JSON-escaped


def toolchain_for_error(message: str) -> str | None:
    """The GOTOOLCHAIN that answers the go command's "requires go >= 1.27.0 (running go
    1.26.8; GOTOOLCHAIN=local)", or None when the message says no such thing (pure)."""
    m = _NEEDS_GO.search(message)
    return go_toolchain_for(m.group(1)) if m else None


def go_toolchain_for(go_line: str, local: str = "1.26.8") -> str | None:
    """GOTOOLCHAIN to set for a module whose go.mod says `go <go_line>`: None when the
    machine's Go suffices, else the approved newer toolchain (pure)."""
    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    return NEWER_GO_TOOLCHAIN if parts(go_line) > parts(local) else None


# The version-skew policy (kubernetes.io/releases/version-skew-policy) as it applies to
# an in-place control-plane upgrade; each refusal names the rule it breaks.
RULE_NO_DOWNGRADE = "no downgrades: the version-skew policy covers upgrades only"
RULE_ONE_MINOR = "kube-apiserver is upgraded one minor version at a time"


def skew_refusal(from_version: str, to_version: str) -> str | None:
    """Why upgrading `from_version` to `to_version` in place breaks the version-skew
    policy, in one line naming the rule, or None when it is allowed (pure)."""
    old, new = release(from_version), release(to_version)
    if new == old:
        return f"{from_version} -> {to_version}: nothing to upgrade (same version)"
    if new < old:
        return f"{from_version} -> {to_version} is a downgrade; rule: {RULE_NO_DOWNGRADE}"
    if new[1] - old[1] > 1:
        skipped = ", ".join(f"1.{m}" for m in range(old[1] + 1, new[1]))
        return (f"{from_version} -> {to_version} skips {skipped}; rule: {RULE_ONE_MINOR} "
                f"(upgrade to 1.{old[1] + 1} first)")
    return None

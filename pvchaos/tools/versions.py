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


def release(version: str) -> tuple[int, int, int]:
    """(1, 36, 3) for v1.36.3; ValueError in one line for anything that is not a release."""
    m = re.fullmatch(r"v(1)\.(\d+)\.(\d+)", version.strip())
    if not m:
        raise ValueError(f"not a Kubernetes release version: {version!r} (want v1.MINOR.PATCH)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


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

"""Check the per-minor message table (conformance/messages.py) against each version's own
source: the wording the table gives for 1.MINOR must be in that version's Go code.

A message is a Go format string upstream (`volume %q already bound...`), so what is
searched is the longest literal fragment of the table's template between placeholders
and quotes. The source is the Go module cache, where `pvchaos build` leaves it: the
k8s.io/kubernetes module and the staging modules whose messages the suites match
(apimachinery's "field is immutable", for one).

    python -m pvchaos.tools.message_sources v1.34.4 v1.35.4     # a table; exit 1 when a wording is missing
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pvchaos.conformance import kubelet_admission, messages
from pvchaos.tools import gomod, versions

# Keys whose text no Go file spells: it is assembled at run time.
ASSEMBLED: dict[str, str] = {
    "PVC_NOT_FOUND": "apimachinery's NewNotFound: `%s %q not found` with the resource and name",
    "PVC_BEING_DELETED": "the scheduler's fmt.Errorf(\"persistentvolumeclaim %q is being deleted\") spelled with %q",
    "PVC_BOUND_TO_MISSING_PV": "binder.go formats the claim and volume with %q around fixed words",
    "CLASS_NOT_FOUND": "apimachinery's NewNotFound for storageclass.storage.k8s.io",
}
STAGING = ("apimachinery", "component-helpers", "api")


@dataclass(frozen=True)
class Check:
    """One key of the table for one version: the wording it expects and whether the source has it."""

    key: str
    minor: int
    wording: str
    fragment: str
    found: bool | None  # None: assembled at run time, not searched


def fragment_of(template: str) -> str:
    """The longest literal run of a message template, split at `{placeholders}` and quotes,
    as a Go format string keeps it between its verbs."""
    parts = re.split(r"\{[^}]*\}|\"", template)
    return max(parts, key=len)


def module_dirs(version: str, modcache: Path) -> list[Path]:
    """Where this version's source is in the module cache (missing ones are left out)."""
    staging = gomod.staging_version(version)
    dirs = [modcache / "k8s.io" / f"kubernetes@{version}"]
    dirs += [modcache / "k8s.io" / f"{name}@{staging}" for name in STAGING]
    return [d for d in dirs if d.is_dir()]


def found_fragments(fragments: set[str], dirs: list[Path]) -> set[str]:
    """Which fragments occur in a non-test .go file under `dirs` (one grep pass)."""
    if not fragments or not dirs:
        return set()
    proc = subprocess.run(
        ["grep", "-rhoF", "--include=*.go", "--exclude=*_test.go", *[a for f in sorted(fragments) for a in ("-e", f)],
         *map(str, dirs)], capture_output=True, text=True, check=False)
    return {line for line in proc.stdout.splitlines()} & fragments


def check_version(version: str, modcache: Path) -> list[Check]:
    """Every key's wording for this version, and whether its source spells it."""
    minor = versions.minor_of(version, release_only=True)
    if minor is None:
        raise ValueError(f"{version}: not a release version (want v1.MINOR.PATCH)")
    dirs = module_dirs(version, modcache)
    if not dirs or not dirs[0].name.startswith("kubernetes@"):
        raise FileNotFoundError(f"no source of k8s.io/kubernetes@{version} in {modcache}; "
                                f"run: bin/pvchaos build --k8s-version {version}")
    rows = [(key, messages.MESSAGES[key]) for key in sorted(messages.MESSAGES)]
    wanted = {key: next(text for since, text in rows_ if minor >= since) for key, rows_ in rows}
    fragments = {key: fragment_of(text) for key, text in wanted.items()}
    hits = found_fragments({f for k, f in fragments.items() if k not in ASSEMBLED}, dirs)
    return [Check(key, minor, wanted[key], fragments[key], None if key in ASSEMBLED else fragments[key] in hits)
            for key in sorted(wanted)]


def kubelet_outcome_in_source(version: str, modcache: Path) -> str:
    """What the version's kubelet does with a pod whose PV no longer allows its node, read
    from its source: refuses where pkg/kubelet names the VolumeNodeAffinity reason, else
    mount-blocked where pkg/volume fails MountVolume on the PV's affinity, else starts
    (conformance/kubelet_admission.py's table, checked against the source)."""
    root = modcache / "k8s.io" / f"kubernetes@{version}" / "pkg"
    if not root.is_dir():
        raise FileNotFoundError(f"no source of k8s.io/kubernetes@{version} in {modcache}; "
                                f"run: bin/pvchaos build --k8s-version {version}")
    if found_fragments({kubelet_admission.REASON}, [root / "kubelet"]):
        return kubelet_admission.REFUSES
    if found_fragments({kubelet_admission.MOUNT_CHECK}, [root / "volume"]):
        return kubelet_admission.MOUNT_BLOCKED
    return kubelet_admission.STARTS


def default_modcache() -> Path:
    out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False)
    return Path(out.stdout.strip() or os.path.expanduser("~/go/pkg/mod"))


def render(results: dict[str, list[Check]]) -> str:
    """Key x version: `yes`, `MISSING`, or `assembled` (and why, below the table)."""
    labels = list(results)
    lines = [f"| message | {' | '.join(labels)} |", f"|---|{'---|' * len(labels)}"]
    keys = sorted({c.key for checks in results.values() for c in checks})
    by = {(v, c.key): c for v, checks in results.items() for c in checks}
    for key in keys:
        cells = ["assembled" if by[(v, key)].found is None else ("yes" if by[(v, key)].found else "**MISSING**")
                 for v in labels]
        lines.append(f"| {key} | {' | '.join(cells)} |")
    lines += ["", "assembled: " + "; ".join(f"{k}: {why}" for k, why in sorted(ASSEMBLED.items()))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+")
    args = parser.parse_args(argv)
    modcache = default_modcache()
    try:
        results = {v: check_version(v, modcache) for v in args.versions}
    except (ValueError, FileNotFoundError) as exc:
        print(f"message_sources: {exc}", file=sys.stderr)
        return 2
    print(render(results), end="")
    missing = [(v, c.key) for v, checks in results.items() for c in checks if c.found is False]
    if missing:
        print("missing: " + ", ".join(f"{k} in {v}" for v, k in missing), file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

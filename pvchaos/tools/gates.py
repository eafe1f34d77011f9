"""The feature gates a Kubernetes version knows, read from its own kube-apiserver.

`kube-apiserver --help` lists every gate registered in that build (Kubernetes' own,
pkg/features, and the component-base and apiserver ones it links), so it is the truth
for exactly the binaries a local cluster runs, with no source parsing to drift. The
list is cached next to the binary: reading it costs one process start, once per version.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

CACHE_NAME = "feature-gates.txt"
# "kube:MutablePVNodeAffinity=true|false (ALPHA - default=false)"; older builds omit "kube:"
_GATE = re.compile(r"^\s*(?:[a-z-]+:)?([A-Z][A-Za-z0-9]*)=true\|false\b", re.MULTILINE)


class GateListError(RuntimeError):
    """The gate list could not be read from the binary."""


def parse_gate_list(help_text: str) -> frozenset[str]:
    """Gate names from `kube-apiserver --help` output (pure)."""
    return frozenset(_GATE.findall(help_text))


def known_gates(apiserver: Path) -> frozenset[str]:
    """Every gate the binary accepts; cached in its directory."""
    cache = apiserver.parent / CACHE_NAME
    if cache.is_file() and cache.stat().st_mtime >= apiserver.stat().st_mtime:
        return frozenset(cache.read_text().split())
    try:
        proc = subprocess.run([str(apiserver), "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GateListError(f"{apiserver} --help: {exc}") from None
    gates = parse_gate_list(proc.stdout + proc.stderr)
    if not gates:
        raise GateListError(f"{apiserver} --help lists no feature gates (exit {proc.returncode})")
    tmp = cache.with_suffix(".tmp")
    tmp.write_text("\n".join(sorted(gates)) + "\n")
    tmp.replace(cache)
    return gates

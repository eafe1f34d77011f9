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
STATES_CACHE_NAME = "feature-gate-states.txt"
# "kube:MutablePVNodeAffinity=true|false (ALPHA - default=false)"; older builds omit "kube:"
_GATE = re.compile(r"^\s*(?:[a-z-]+:)?([A-Z][A-Za-z0-9]*)=true\|false\b", re.MULTILINE)
_GATE_STATE = re.compile(r"^\s*(?:[a-z-]+:)?([A-Z][A-Za-z0-9]*)=true\|false \(([A-Z-]+) - default=(true|false)\)",
                         re.MULTILINE)
_STAGES = {"ALPHA": "alpha", "BETA": "beta", "GA": "GA", "DEPRECATED": "deprecated"}


class GateListError(RuntimeError):
    """The gate list could not be read from the binary."""


def parse_gate_list(help_text: str) -> frozenset[str]:
    """Gate names from `kube-apiserver --help` output (pure)."""
    return frozenset(_GATE.findall(help_text))


def parse_gate_states(help_text: str) -> dict[str, tuple[str, bool]]:
    """Gate -> (stage, default) as the binary describes it at its own version (pure).
    component-base prints only alpha and beta gates this way: a GA or deprecated gate has
    no line (`FeatureSpec.HelpString`), so it is absent here, not off."""
    return {name: (_STAGES.get(stage, stage.lower()), default == "true")
            for name, stage, default in _GATE_STATE.findall(help_text)}


def _help_text(apiserver: Path) -> str:
    try:
        proc = subprocess.run([str(apiserver), "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GateListError(f"{apiserver} --help: {exc}") from None
    return proc.stdout + proc.stderr


def gate_states(apiserver: Path) -> dict[str, tuple[str, bool]]:
    """Every alpha and beta gate of the binary with its stage and default; cached in its
    directory as `Name stage default` lines."""
    cache = apiserver.parent / STATES_CACHE_NAME
    if cache.is_file() and cache.stat().st_mtime >= apiserver.stat().st_mtime:
        rows = [line.split() for line in cache.read_text().splitlines() if line.strip()]
        return {name: (stage, default == "true") for name, stage, default in rows}
    states = parse_gate_states(_help_text(apiserver))
    if not states:
        raise GateListError(f"{apiserver} --help describes no alpha or beta feature gate")
    tmp = cache.with_suffix(".tmp")
    tmp.write_text("".join(f"{n} {st} {str(d).lower()}\n" for n, (st, d) in sorted(states.items())))
    tmp.replace(cache)
    return states


def known_gates(apiserver: Path) -> frozenset[str]:
    """Every gate the binary accepts; cached in its directory."""
    cache = apiserver.parent / CACHE_NAME
    if cache.is_file() and cache.stat().st_mtime >= apiserver.stat().st_mtime:
        return frozenset(cache.read_text().split())
    gates = parse_gate_list(_help_text(apiserver))
    if not gates:
        raise GateListError(f"{apiserver} --help lists no feature gates")
    tmp = cache.with_suffix(".tmp")
    tmp.write_text("\n".join(sorted(gates)) + "\n")
    tmp.replace(cache)
    return gates

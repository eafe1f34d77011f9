"""Feature gates as every backend reads them: parsed from `A=true,B=false`, checked
against the version's own kube-apiserver, and the gates a version does not have yet."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from pvchaos.tools import versions
from pvchaos.tools.build import cached_binary, ensure_binaries
from pvchaos.tools.gates import GateListError, gate_states, known_gates

MUTABLE_PV_GATE = "MutablePVNodeAffinity"
GATE_FIRST_MINOR = {MUTABLE_PV_GATE: 35}


def minor_of(version: str) -> int:
    minor = versions.minor_of(version, release_only=True)
    if minor is None:
        raise ValueError(f"not a Kubernetes release version: {version!r} (want v1.MINOR.PATCH or v1.MINOR.PATCH-beta.N)")
    return minor


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`A=true,B=false` -> {"A": True, "B": False}; rejects anything else in one line."""
    gates: dict[str, bool] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or value.lower() not in {"true", "false"} or not key:
            raise ValueError(f"--feature-gates: {item!r} is not NAME=true|false")
        gates[key] = value.lower() == "true"
    return gates


def gates_for_version(gates: dict[str, bool], minor: int) -> dict[str, bool]:
    """Gates asked for a 1.`minor` cluster, without those asked off that the version does
    not have yet: there the behaviour already is the gate-off one (PV nodeAffinity is
    immutable in 1.34), and the components would refuse the unknown name. A gate asked
    on stays, so the configuration refuses it in one line."""
    return {g: on for g, on in gates.items() if on or minor >= GATE_FIRST_MINOR.get(g, 0)}


def built_gate_states(k8s_version: str) -> dict[str, tuple[str, bool]] | None:
    """The alpha and beta gates of the version's own kube-apiserver with stage and default
    (`kube-apiserver --help`), or None when that version is not built yet: this never
    builds, so a report or a bad-input check costs no build."""
    apiserver = cached_binary(k8s_version, "kube-apiserver")
    if apiserver is None:
        return None
    try:
        return gate_states(apiserver)
    except GateListError:
        return None


def built_gate_environment(k8s_version: str, gates: list[str]) -> dict[str, str]:
    """Lines for a report's environment: each gate as the run's own binary describes it."""
    states = built_gate_states(k8s_version)
    if states is None:
        return {}
    def text(gate: str) -> str:
        found = states.get(gate)
        return f"{found[0]}, {'on' if found[1] else 'off'} by default" if found else "not alpha or beta (GA, or absent)"
    return {f"kube-apiserver {k8s_version} --help: {g}": text(g) for g in gates}


def binary_gates(k8s_version: str) -> frozenset[str]:
    """The gates the version's own kube-apiserver knows (built on first use, then cached)."""
    return known_gates(ensure_binaries(k8s_version, only=["kubernetes"]).kube_apiserver)


def check_feature_gates(text: str, k8s_version: str,
                        known: Callable[[str], frozenset[str]] | None = None) -> dict[str, bool]:
    """`--feature-gates` for a cluster of `k8s_version`: well-formed (NAME=true|false)
    and each gate known to that version, else ValueError with one line. The one check
    `pvchaos run`, `pvchaos cluster up` and the pytest plugin share."""
    gates = parse_feature_gates(text)
    if not gates:
        return gates
    minor_of(k8s_version)
    names = (known or binary_gates)(k8s_version)
    unknown = sorted(set(gates) - names)
    if unknown:
        hints = [m for u in unknown for m in difflib.get_close_matches(u, sorted(names), n=1)]
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise ValueError(f"--feature-gates: {', '.join(unknown)}: no such gate in Kubernetes {k8s_version}"
                         f"{hint}; its kube-apiserver --help lists {len(names)}")
    return gates

"""What must hold after a disturbance, as data (pure), with a readable diff.

Suites compare what they observe with these tables instead of spelling expectations
inline, so a wrong expectation is one edit here, and a failure prints field by field
what was expected and what the cluster did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# SPEC 1 (KEP-5381): a nodeAffinity mutation changes neither phase nor claimRef, and
# evicts nothing. Keyed by the first minor where it holds (the gate exists from 1.35).
AFTER_PV_AFFINITY_MUTATION: dict[int, dict[str, Any]] = {
    35: {"pv phase": "Bound", "claimRef": "unchanged", "claim phase": "Bound", "running pod": "kept"},
}


def after_pv_affinity_mutation(minor: int) -> dict[str, Any]:
    """The expected state for a 1.`minor` cluster (the newest row at or below it)."""
    rows = [m for m in AFTER_PV_AFFINITY_MUTATION if m <= (minor or max(AFTER_PV_AFFINITY_MUTATION))]
    if not rows:
        raise ValueError(f"no expectation for PV affinity mutation on 1.{minor}")
    return dict(AFTER_PV_AFFINITY_MUTATION[max(rows)])


def diff(expected: Mapping[str, Any], observed: Mapping[str, Any]) -> list[str]:
    """One line per field that differs: `field: expected X, observed Y`."""
    return [f"{k}: expected {expected[k]!r}, observed {observed.get(k)!r}"
            for k in expected if observed.get(k) != expected[k]]

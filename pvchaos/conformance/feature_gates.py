"""The feature gates the suites depend on, per Kubernetes version, in the words a report
shows. The data is generated from each version's source (`conformance/gate_table.json`,
written by `python -m pvchaos.tools.feature_gates`); this module only reads it."""

from __future__ import annotations

import json
from pathlib import Path

TABLE_FILE = Path(__file__).with_name("gate_table.json")
_DATA = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
SOURCE: str = _DATA["source"]
DEPENDS: dict[str, str] = _DATA["depends"]  # gate -> the suites whose assertions depend on it
# version -> gate -> (stage, default, locked to default); None: the version has no such gate
STATES: dict[str, dict[str, tuple[str, bool, bool] | None]] = {
    version: {gate: tuple(state) if state else None for gate, state in gates.items()}
    for version, gates in _DATA["by version"].items()}


def state_text(state: tuple[str, bool, bool] | None) -> str:
    """("alpha", False, False) -> "alpha, off"; a locked GA gate -> "GA, on (locked)"."""
    if state is None:
        return "absent"
    stage, default, locked = state
    return f"{stage}, {'on' if default else 'off'}{' (locked)' if locked else ''}"


def by_version(gate: str) -> str:
    """`v1.34.4 absent; v1.35.4 alpha, off; ...`: one gate across every recorded version."""
    return "; ".join(f"{version} {state_text(gates.get(gate))}" for version, gates in STATES.items())


def environment() -> dict[str, str]:
    """Lines for the report's environment page, one per gate."""
    return {f"gate {gate}": by_version(gate) for gate in DEPENDS}


def markdown_table() -> str:
    """The table docs/findings.md shows: gate x version, and what depends on the gate."""
    versions = list(STATES)
    lines = [f"| gate | {' | '.join(versions)} | what depends on it |",
             f"|---|{'---|' * len(versions)}---|"]
    for gate, why in DEPENDS.items():
        cells = " | ".join(state_text(STATES[v].get(gate)) for v in versions)
        lines.append(f"| `{gate}` | {cells} | {why} |")
    return "\n".join([*lines, "", f"Read from {SOURCE}; \"absent\": the version has no such "
                      "gate (not added yet, or removed after it graduated and was locked on)."]) + "\n"

"""Each test's verdict on several backends side by side, and whether every difference
is explained.

A difference between backends is either a harness bug, a Kubernetes behaviour that
depends on the cluster's shape, or a test the backend cannot provide a cluster for.
The last two are written down here, with the reason, so that the report can say "no
unexplained difference" and mean it; anything else fails the comparison.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# test (suite file stem :: pytest name) -> why its verdict differs between local and kind.
EXPLAINED: dict[str, str] = {
    "test_pv_affinity_mutation::test_gate_off_rejects_affinity_change":
        "needs a cluster with MutablePVNodeAffinity off; the kind backend runs one cluster per run (gate on)",
    "test_pv_affinity_mutation::test_gate_off_allows_setting_affinity_where_none":
        "needs a cluster with MutablePVNodeAffinity off; the kind backend runs one cluster per run (gate on)",
    "test_pv_affinity_mutation::test_gate_off_allows_beta_to_ga_key_rename":
        "needs a cluster with MutablePVNodeAffinity off; the kind backend runs one cluster per run (gate on)",
    "test_zone_outage::test_partial_zone_disruption_stops_tainting":
        "needs a 2-zone x 4-node cluster of its own; the kind backend runs one 3 x 2 cluster per run",
    "test_zone_outage::test_all_zones_down_evicts_nothing":
        "kind's control-plane node is in no zone and stays up, so the node-lifecycle controller never sees "
        "every zone down (no master disruption mode); on local clusters every node is in a zone",
    "test_real_kubelet::test_local_volume_data_survives_node_crash_and_return":
        "needs real kubelets: KWOK nodes run no containers and mount nothing",
}


@dataclass(frozen=True)
class Row:
    """One test across backends."""

    test: str
    verdicts: dict[str, str]  # backend -> passed|failed|broken|skipped|absent

    @property
    def differs(self) -> bool:
        return len(set(self.verdicts.values())) > 1

    @property
    def explanation(self) -> str | None:
        return EXPLAINED.get(self.test)


def test_key(result: Mapping[str, Any]) -> str:
    """`test_zone_outage::test_all_zones_down_evicts_nothing` (with [params] when present)."""
    module = str(result.get("fullName") or "").split("#", 1)[0].rsplit(".", 1)[-1]
    return f"{module}::{result.get('name')}"


def verdicts(results: list[dict[str, Any]]) -> dict[str, str]:
    """Test -> status of its last attempt."""
    latest: dict[str, dict[str, Any]] = {}
    for res in results:
        key = test_key(res)
        if key not in latest or res.get("stop", 0) >= latest[key].get("stop", 0):
            latest[key] = res
    return {k: str(v.get("status", "unknown")) for k, v in latest.items()}


def compare(by_backend: Mapping[str, Mapping[str, str]]) -> list[Row]:
    tests = sorted({t for v in by_backend.values() for t in v})
    return [Row(t, {b: v.get(t, "absent") for b, v in by_backend.items()}) for t in tests]


def unexplained(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.differs and r.explanation is None]


def render_markdown(rows: list[Row], backends: list[str]) -> str:
    """The verdict table: every test, one column per backend, differences explained."""
    lines = ["# Verdicts by backend", "",
             f"| test | {' | '.join(backends)} | difference |", f"|---|{'---|' * len(backends)}---|"]
    for r in rows:
        note = "" if not r.differs else (r.explanation or "**UNEXPLAINED**")
        lines.append(f"| {r.test} | {' | '.join(r.verdicts[b] for b in backends)} | {note} |")
    bad = unexplained(rows)
    lines += ["", f"{sum(r.differs for r in rows)} of {len(rows)} tests differ; "
              f"{len(bad)} unexplained" + (f": {', '.join(r.test for r in bad)}" if bad else ".")]
    return "\n".join(lines) + "\n"


def tag_with_backend(result: dict[str, Any], backend: str) -> dict[str, Any]:
    """A result made distinct per backend, so one Allure report holds both runs: the
    backend parameter is shown, and history is tracked per test and backend."""
    params = [p for p in result.get("parameters") or [] if p.get("name") != "backend"]
    out = dict(result)
    out["parameters"] = [{"name": "backend", "value": repr(backend)}, *params]
    for key in ("historyId", "testCaseId"):
        if out.get(key):
            out[key] = hashlib.md5(f"{out[key]}:{backend}".encode()).hexdigest()  # noqa: S324 - an id, not a secret
    return out


def merge_into(target: Path, backend: str, source: Path) -> None:
    """Copy one backend's allure results into `target`, tagged with the backend."""
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.name.endswith("-result.json"):
            data = tag_with_backend(json.loads(path.read_text(encoding="utf-8")), backend)
            (target / f"{backend}-{path.name}").write_text(json.dumps(data), encoding="utf-8")
        elif path.is_file() and not path.name.endswith(("environment.properties", "categories.json")):
            (target / path.name).write_bytes(path.read_bytes())


def write_comparison_result(target: Path, rows: list[Row], backends: list[str]) -> Path:
    """An Allure result of its own: passed when every difference is explained, with the
    verdict table attached, so the HTML report carries the comparison."""
    table = render_markdown(rows, backends)
    ident = str(uuid.uuid4())
    attachment = f"{ident}-attachment.md"
    (target / attachment).write_text(table, encoding="utf-8")
    bad = unexplained(rows)
    now = int(time.time() * 1000)
    result = {
        "uuid": ident, "name": f"verdicts agree across {' and '.join(backends)}",
        "fullName": "pvchaos.compare_backends#verdicts", "historyId": hashlib.md5(
            f"compare:{','.join(backends)}".encode()).hexdigest(),  # noqa: S324 - an id
        "status": "failed" if bad else "passed", "stage": "finished", "start": now, "stop": now,
        "statusDetails": {"message": "unexplained differences: " + ", ".join(r.test for r in bad)} if bad else {},
        "labels": [{"name": "suite", "value": "backend comparison"}, {"name": "epic", "value": "Backends"}],
        "attachments": [{"name": "verdicts by backend", "source": attachment, "type": "text/markdown"}],
        "parameters": [],
    }
    path = target / f"{ident}-result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path

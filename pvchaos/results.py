"""Allure results keyed by test, shared by every comparison of runs (backends side by
side in one run, `pvchaos compare` of two report directories): one key per test, its
last attempt, and results copied into another report tagged with where they came from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pvchaos.report import parameter_text

TAG_DIMENSIONS = ("backend", "run", "kubernetes")  # what tag_with marks results with
SYNTHETIC_PREFIX = "pvchaos."  # fullName of results the harness writes itself (comparisons, certification)


def test_key(result: Mapping[str, Any]) -> str:
    """`test_zone_outage::test_all_zones_down_evicts_nothing` (with [params] when present),
    and `(backend=kind)` when the result was tagged by `tag_with`, so the tests of a
    merged report (`run --backend local,kind`, `run --k8s-version A,B`) stay apart."""
    module = str(result.get("fullName") or "").split("#", 1)[0].rsplit(".", 1)[-1]
    tags = [f"{p.get('name')}={parameter_text(p.get('value'))}" for p in result.get("parameters") or []
            if p.get("name") in TAG_DIMENSIONS and not p.get("excluded")]
    return f"{module}::{result.get('name')}" + (f" ({', '.join(tags)})" if tags else "")


def latest_by_test(results: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Test -> its last attempt (by stop time), leaving out results the harness wrote itself."""
    latest: dict[str, Mapping[str, Any]] = {}
    for res in results:
        if str(res.get("fullName") or "").startswith(SYNTHETIC_PREFIX):
            continue
        key = test_key(res)
        if key not in latest or res.get("stop", 0) >= latest[key].get("stop", 0):
            latest[key] = res
    return latest


def tag_with(result: dict[str, Any], dimension: str, value: str) -> dict[str, Any]:
    """A result made distinct per `dimension` value (a backend, a run), so one Allure report
    holds several runs: the value is shown as a parameter, and history is tracked per test
    and value."""
    params = [p for p in result.get("parameters") or [] if p.get("name") != dimension]
    out = dict(result)
    out["parameters"] = [{"name": dimension, "value": repr(value)}, *params]
    for key in ("historyId", "testCaseId"):
        if out.get(key):
            out[key] = hashlib.md5(f"{out[key]}:{value}".encode()).hexdigest()  # noqa: S324 - an id, not a secret
    return out


def merge_into(target: Path, value: str, source: Path, dimension: str = "backend") -> None:
    """Copy one run's allure results into `target`, each result tagged with `value`."""
    target.mkdir(parents=True, exist_ok=True)
    prefix = "".join(c if c.isalnum() else "-" for c in value)
    for path in source.iterdir():
        if path.name.endswith("-result.json"):
            data = tag_with(json.loads(path.read_text(encoding="utf-8")), dimension, value)
            (target / f"{prefix}-{path.name}").write_text(json.dumps(data), encoding="utf-8")
        elif path.is_file() and not path.name.endswith(("environment.properties", "categories.json")):
            (target / path.name).write_bytes(path.read_bytes())

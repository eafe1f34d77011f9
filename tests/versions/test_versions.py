"""Every served minor: the message table against each version's own source, and the
suites on all of them in one matrix run (`pvchaos run --k8s-version A,B,C,D`).

Tier `versions`, on request only (`bin/pvchaos selftest --tier versions`): it builds
three Kubernetes versions besides the default (about 5-7 minutes each, cold, on 2 cores)
and runs the suites four times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pvchaos.compare_runs import load_run
from pvchaos.tools import message_sources
from pvchaos.tools.build import ensure_binaries

REPO = Path(__file__).resolve().parents[2]
# the newest served patch of each supported minor (a pre-release where the minor has no release yet)
MATRIX = ("v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2", "v1.38.0-beta.0")


@pytest.fixture(scope="module")
def built() -> tuple[str, ...]:
    for version in MATRIX:
        ensure_binaries(version, only=["kubernetes"])  # also leaves the source in the module cache
    return MATRIX


def test_message_table_matches_each_versions_source(built: tuple[str, ...]) -> None:
    modcache = message_sources.default_modcache()
    missing = [(v, c.key, c.wording) for v in built for c in message_sources.check_version(v, modcache)
               if c.found is False]
    assert not missing, f"wordings of conformance/messages.py absent from the version's source: {missing}"


def test_matrix_run_reports_every_test_on_every_version(built: tuple[str, ...], tmp_path: Path) -> None:
    out = tmp_path / "matrix"
    proc = subprocess.run([str(REPO / "bin" / "pvchaos"), "run", "--k8s-version", ",".join(reversed(built)),
                           "--report-dir", str(out)], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ), timeout=60 * 60, check=False)
    sys.stderr.write(proc.stderr[-3000:])
    table = (out / "versions.md").read_text()
    assert proc.returncode == 0, f"matrix run exit {proc.returncode}: {proc.stdout[-1500:]}"
    header = next(line for line in table.splitlines() if line.startswith("| test |"))
    assert header == f"| test | {' | '.join(built)} |", "versions must be columns in ascending order"
    runs = [load_run(out / v, v) for v in built]
    every = {t for r in runs for t in r.results}
    for run in runs:
        assert set(run.results) == every, f"{run.label} lacks {sorted(every - set(run.results))}"
    skipped_34 = [r for t, r in runs[0].results.items()
                  if t.startswith("test_pv_affinity_mutation::") and "::test_gate_off" not in t]
    assert skipped_34 and all(r["status"] == "skipped" for r in skipped_34)
    assert all("has no MutablePVNodeAffinity gate" in r["statusDetails"]["message"] for r in skipped_34)
    merged = [json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json")]
    tagged = {p["value"] for r in merged for p in r.get("parameters", []) if p["name"] == "kubernetes"
              and not p.get("excluded")}
    assert tagged == {repr(v) for v in built}

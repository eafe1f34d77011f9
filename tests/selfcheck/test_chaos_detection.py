"""The chaos and mutation suites fail on clusters where the behaviour they check is
broken, with a message that names it; and gate-dependent tests skip, not fail, when
the gate is off (SPEC 1 and 4; issue: detection power)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITES = ROOT / "suites"


def run_suites(tmp_path: Path, files: list[str], *extra: str, env: dict[str, str] | None = None,
               timeout: float = 420) -> tuple[int, str]:
    argv = [sys.executable, "-m", "pytest", *(str(SUITES / f) for f in files), "-p", "no:cacheprovider",
            "-p", "tests.selfcheck.chaos_breakage", "-q", "-rfEs", "--tb=line", "--no-canaries", *extra]
    full_env = dict(os.environ, PVCHAOS_STATE_DIR=str(tmp_path / "state"), **(env or {}))
    done = subprocess.run(argv, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
    out = done.stdout + done.stderr
    assert "INTERNALERROR" not in out, out[-3000:]
    return done.returncode, out


def failed_tests(out: str) -> set[str]:
    return set(re.findall(r"^FAILED \S+::(\S+)", out, re.M))


@pytest.mark.slow
def test_node_failure_suite_fails_without_node_lifecycle_controller(tmp_path: Path) -> None:
    code, out = run_suites(tmp_path, ["test_node_failure.py"], "-k", "taints_and_evicts",
                           env={"PVCHAOS_CHAOS_BREAK": "node-lifecycle"})
    assert code == 1, out[-3000:]
    assert "test_node_failure_taints_and_evicts_on_schedule" in failed_tests(out), out[-3000:]
    assert "Ready=Unknown and taints node.kubernetes.io/unreachable:NoExecute and :NoSchedule" in out, out[-3000:]


@pytest.mark.slow
def test_eviction_checks_fail_without_taint_eviction_controller(tmp_path: Path) -> None:
    code, out = run_suites(tmp_path, ["test_node_failure.py", "test_zone_outage.py"], "-k",
                           "taints_and_evicts or single_zone", env={"PVCHAOS_CHAOS_BREAK": "taint-eviction"})
    assert code == 1, out[-3000:]
    assert {"test_node_failure_taints_and_evicts_on_schedule",
            "test_single_zone_outage_evicts_that_zone"} <= failed_tests(out), out[-3000:]
    assert "evicted at once (tolerationSeconds 0)" in out or "evicted from" in out, out[-3000:]


@pytest.mark.slow
def test_gate_off_makes_acceptance_tests_skip_and_gate_off_tests_pass(tmp_path: Path) -> None:
    code, out = run_suites(tmp_path, ["test_pv_affinity_mutation.py"], "--feature-gates=MutablePVNodeAffinity=false")
    assert code == 0, out[-3000:]
    assert re.search(r"\b3 passed\b", out), out[-2000:]
    # Every other test of the suite needs the gate, and each skip says so (the count follows the suite).
    skips = re.findall(r"SKIPPED \[(\d+)\] \S+: (.*)", out)
    total = re.search(r"\b(\d+) skipped\b", out)
    assert skips and total and sum(int(n) for n, _ in skips) == int(total.group(1)), out[-2000:]
    assert all("backend local: no mutable-pv-affinity" in why for _, why in skips), skips


@pytest.mark.slow
def test_wrong_expectation_table_is_reported_as_a_diff(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    code, out = run_suites(tmp_path, ["test_pv_affinity_mutation.py"], "-k", "refuting", f"--alluredir={results}",
                           env={"PVCHAOS_CHAOS_BREAK": "wrong-mutation-table"})
    assert code == 1, out[-3000:]
    assert "pv phase: expected 'Available', observed 'Bound'" in out, out[-3000:]
    assert "claimRef: expected 'cleared', observed 'unchanged'" in out, out[-3000:]
    # The failure carries evidence attachments; none may hold credentials.
    attachments = [p for p in results.iterdir() if "-attachment" in p.name]
    assert any("objects" in p.read_text(errors="replace") or p.stat().st_size for p in attachments)
    for path in results.iterdir():
        text = path.read_text(errors="replace")
        for secret in (r"\btoken:\s*\S+", r"[0-9a-f]{48}", "PRIVATE KEY", "client-key-data", "Bearer "):
            assert not re.search(secret, text), f"{path.name} contains credentials ({secret})"

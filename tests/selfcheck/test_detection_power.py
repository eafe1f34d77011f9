"""Detection power: the suites must fail on clusters that are broken on purpose (issue 3).

A suite that passes on a healthy cluster proves little until it is seen to fail where
Kubernetes misbehaves. Each case runs a few suite tests in a pytest subprocess whose
clusters `broken_cluster.py` breaks (PVCHAOS_BREAK), and checks that:
- the run fails (non-zero exit), within its time bound, without INTERNALERROR or a
  Python traceback outside the tests;
- each chosen test fails with one of the harness's expectation errors (ConditionNotReached,
  WaitFailed, ExpectationFailed, InvariantViolation: kube.errors.PRODUCT_ERRORS), whose message names the broken
  behaviour (the claim that never binds, the FailedScheduling that never comes...);
- one test that does not depend on the broken component still passes, so the failures
  are the breakage's and not a dead cluster's;
- every chosen test passes on a healthy cluster (the control run).
All runs start together: broken runs spend their time in the suites' 60 s waits.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import allure
import pytest

from pvchaos.clusters.local.registry import destroy, list_clusters
from pvchaos.kube.errors import PRODUCT_ERRORS
from tests.selfcheck.broken_cluster import BREAK_ENV, BREAKAGES

pytestmark = [allure.epic("Self-verification"), allure.feature("Detection power"), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 540.0  # one subprocess; a broken test waits 60-90 s, 2 tests per worker
WORKERS = 3  # xdist workers (one local cluster each) per broken run
# Product failures only: an infrastructure error (API unreachable) proves nothing.
EXPECTATION_ERRORS = tuple(f"{c.__module__}.{c.__qualname__}" for c in PRODUCT_ERRORS)

BM = "suites/test_binding_modes.py"
LV = "suites/test_local_volumes.py"
SB = "suites/test_static_binding.py"
RC = "suites/test_reclaim.py"
SP = "suites/test_spreading.py"


@dataclass(frozen=True)
class Case:
    """One breakage: tests that must fail (with the message that names why) and one
    that must still pass."""

    breakage: str
    must_fail: dict[str, str]  # node id -> regex the failure message must match
    must_pass: tuple[str, ...] = ()

    @property
    def node_ids(self) -> list[str]:
        return [*self.must_fail, *self.must_pass]


def _never_bound(claim: str) -> str:
    return rf"waiting for PersistentVolumeClaim .*/{re.escape(claim)}: phase Bound"


def _never_available() -> str:
    """The PV controller is what turns a new PV Available: without it, this is the first
    wait to time out in suites that let the controller see their PVs before the claim."""
    return r"waiting for PersistentVolume: \S+: phase Available"


def _no_event(key_text: str) -> str:
    """Either the scheduler wrongly placed the pod (the wait stops at once), or it never
    reported the expected FailedScheduling reason."""
    return (rf"the scheduler placed it on \S+; expected: .*Unschedulable"
            rf"|waiting for Event .*an event FailedScheduling containing .*{re.escape(key_text)}")


CASES = [
    Case("volumebinding", {
        f"{BM}::test_wait_for_first_consumer_provisions_in_pod_zone": _never_bound("data"),
        f"{BM}::test_immediate_binding_strands_pod_in_other_zone": _no_event("didn't match PersistentVolume's node affinity"),
        f"{BM}::test_pod_pinned_outside_allowed_topologies_fails": _no_event("didn't find available persistent volumes"),
        f"{BM}::test_unbound_immediate_claim_blocks_pod": _no_event("pod has unbound immediate PersistentVolumeClaims"),
        f"{LV}::test_statefulset_on_local_pvs": _never_bound("data-db-0"),
        f"{LV}::test_statefulset_on_dynamic_local_volumes": _never_bound("data-web-0"),
    }, must_pass=(f"{BM}::test_allowed_topologies_limit_immediate_provisioning",)),
    Case("pv-binder", {
        f"{SB}::test_static_binding[smallest-fit-wins]": f"{_never_available()}|{_never_bound('claim')}",
        f"{SB}::test_static_binding[100Gi-never-satisfies-120Gi]": f"{_never_available()}|"
            r"an event FailedBinding containing .*no persistent volumes available for this claim",
        f"{SB}::test_volume_name_binds_that_pv_not_the_smallest": f"{_never_available()}|{_never_bound('claim')}",
        f"{SB}::test_volume_name_mismatch_is_reported[too-small]":
            r"an event VolumeMismatch containing .*requested PV is too small",
        f"{RC}::test_retain_policy_released_until_claim_ref_cleared": _never_bound("first"),
        f"{RC}::test_delete_policy_removes_volume": _never_bound("data"),
    }, must_pass=(f"{BM}::test_unbound_immediate_claim_blocks_pod",)),
    Case("provisioner", {
        f"{BM}::test_wait_for_first_consumer_provisions_in_pod_zone": r"waiting for Pod .*/app: phase Running",
        f"{BM}::test_allowed_topologies_limit_immediate_provisioning": _never_bound("data-0"),
        f"{RC}::test_delete_policy_removes_volume": _never_bound("data"),
        f"{RC}::test_switch_to_retain_keeps_volume": _never_bound("data"),
        f"{SP}::test_topology_spread_puts_replicas_and_volumes_in_distinct_zones": r"ready replicas|phase Bound",
        f"{SP}::test_per_zone_classes_with_anti_affinity": r"waiting for Pod .*/db-0: phase Running",
    }, must_pass=(f"{RC}::test_retain_policy_released_until_claim_ref_cleared",)),
]
CONTROL = Case("", {}, must_pass=tuple(dict.fromkeys(n for c in CASES for n in c.node_ids)))


@dataclass
class Outcome:
    """One test's result in a run, from the run's JUnit XML."""

    node_id: str
    status: str  # passed | failed | error | skipped
    message: str = ""

    @property
    def error_type(self) -> str:
        return self.message.split(":", 1)[0].strip()


@dataclass
class Run:
    """A finished (or killed) suite subprocess."""

    case: Case
    returncode: int | None
    timed_out: bool
    seconds: float
    output: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def with_status(self, status: str) -> list[str]:
        return sorted(n for n, o in self.outcomes.items() if o.status == status)


def _command(case: Case, junit: Path) -> list[str]:
    workers = ["-n", str(WORKERS)] if case.breakage else []
    return [sys.executable, "-m", "pytest", *case.node_ids, "-p", "tests.selfcheck.broken_cluster",
            "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", "--no-canaries", *workers]


def _environment(case: Case, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (BREAK_ENV, "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["PVCHAOS_STATE_DIR"] = str(state)  # our clusters never mix with anyone else's
    if case.breakage:
        env[BREAK_ENV] = case.breakage
    return env


def _node_id(testcase: ET.Element) -> str:
    """`suites.test_reclaim` + `test_x[p]` -> `suites/test_reclaim.py::test_x[p]`."""
    module = (testcase.get("classname") or "").replace(".", "/")
    return f"{module}.py::{testcase.get('name')}"


def _outcomes(junit: Path) -> dict[str, Outcome]:
    if not junit.exists():
        return {}
    found: dict[str, Outcome] = {}
    for tc in ET.parse(junit).iter("testcase"):
        node_id = _node_id(tc)
        status, message = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = child.get("message") or ""
                if status != "skipped":
                    break
        found[node_id] = Outcome(node_id, status, message)
    return found


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM first: the pvchaos plugin turns it into an orderly teardown of its clusters."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the group id is its pid
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:  # ended meanwhile
        proc.wait()


def _sweep(state: Path) -> None:
    """Down any cluster a killed run left in our private state directory."""
    old = os.environ.get("PVCHAOS_STATE_DIR")
    os.environ["PVCHAOS_STATE_DIR"] = str(state)
    try:
        for cluster in list_clusters():
            destroy(cluster)
    finally:
        if old is None:
            os.environ.pop("PVCHAOS_STATE_DIR", None)
        else:
            os.environ["PVCHAOS_STATE_DIR"] = old


def run_cases(cases: tuple[Case, ...], command: Callable[[Case, Path], list[str]],
              tmp_path_factory: pytest.TempPathFactory, timeout: float) -> dict[str, Run]:
    """Start a pytest subprocess per case at once (private state directory each), gather
    them all within `timeout`, and down whatever a run left behind."""
    started: list[tuple[Case, subprocess.Popen[bytes], Path, Path, Path, float]] = []
    finished: dict[str, Run] = {}
    try:
        for case in cases:
            d = tmp_path_factory.mktemp(case.breakage or "control")
            junit, log = d / "junit.xml", d / "output.txt"
            with log.open("wb") as out:
                proc = subprocess.Popen(command(case, junit), cwd=REPO, env=_environment(case, d / "state"),
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            started.append((case, proc, junit, log, d / "state", time.monotonic()))
        deadline = time.monotonic() + timeout
        for case, proc, junit, log, _, t0 in started:
            timed_out = False
            try:
                proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                _stop(proc)
            finished[case.breakage] = Run(case, proc.returncode, timed_out, time.monotonic() - t0,
                                          log.read_text(errors="replace"), _outcomes(junit))
        return finished
    finally:
        for _, proc, _, _, state, _ in started:
            if proc.poll() is None:
                _stop(proc)
            _sweep(state)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> dict[str, Run]:
    """Start the control run and every broken run at once; gather them all."""
    finished = run_cases((CONTROL, *CASES), _command, tmp_path_factory, RUN_TIMEOUT)
    _show(pytestconfig, _table(finished))
    return finished


def _table(runs: dict[str, Run]) -> str:
    """Test x breakage -> outcome, then the first line of every failure."""
    columns = list(runs)
    heads = [c or "healthy" for c in columns]
    tests = sorted({n for run in runs.values() for n in run.case.node_ids})
    width = max(len(t) for t in tests)
    mark = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}
    lines = ["", "detection power: test x breakage (FAIL = the suite caught it; - = not run)",
             f"  {'':{width}}  " + "  ".join(f"{h:>13}" for h in heads)]
    for t in tests:
        cells = [mark.get(runs[c].outcomes[t].status, "?") if t in runs[c].outcomes else "-" for c in columns]
        lines.append(f"  {t:{width}}  " + "  ".join(f"{cell:>13}" for cell in cells))
    lines.append("  " + "  ".join(f"{h}: exit {r.returncode}{' TIMED OUT' if r.timed_out else ''}, {r.seconds:.0f}s"
                                  for h, r in zip(heads, runs.values(), strict=True)))
    for key, run in runs.items():
        for node_id in run.with_status("failed") + run.with_status("error"):
            lines.append(f"  [{key or 'healthy'}] {node_id}: {run.outcomes[node_id].message.splitlines()[0][:200]}")
    return "\n".join(lines)


def _show(config: pytest.Config, text: str) -> None:
    """Write past output capture, so the table is in every run's output."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(text)
    else:
        with capture.global_and_fixture_disabled():
            reporter.write_line(text)
    allure.attach(text, "detection-power.txt", allure.attachment_type.TEXT)


def _common_checks(run: Run) -> None:
    """Whatever the breakage: bounded, no crash, every chosen test reported."""
    tail = run.output[-3000:]
    assert not run.timed_out, f"run did not finish within {RUN_TIMEOUT:.0f}s:\n{tail}"
    assert "INTERNALERROR" not in run.output, f"pytest INTERNALERROR:\n{tail}"
    assert "Traceback (most recent call last)" not in run.output, f"a Python crash outside the tests:\n{tail}"
    missing = set(run.case.node_ids) - set(run.outcomes)
    assert not missing, f"tests not reported in the JUnit XML: {sorted(missing)}\n{tail}"
    skipped = run.with_status("skipped")
    assert not skipped, f"tests skipped instead of run: {skipped}:\n" + "\n".join(
        run.outcomes[n].message for n in skipped)


def test_control_run_passes_on_a_healthy_cluster(runs: dict[str, Run]) -> None:
    """The chosen tests pass when nothing is broken: failures below are the breakages'."""
    run = runs[""]
    _common_checks(run)
    not_passed = {n: o.message for n, o in run.outcomes.items() if o.status != "passed"}
    assert run.returncode == 0 and not not_passed, (
        f"healthy control run: exit {run.returncode}, not passed: {not_passed}\n{run.output[-3000:]}")


@pytest.mark.parametrize("case", CASES, ids=[c.breakage for c in CASES])
def test_suites_fail_on_broken_cluster(runs: dict[str, Run], case: Case) -> None:
    allure.dynamic.title(f"suites fail when: {BREAKAGES[case.breakage]}")
    run = runs[case.breakage]
    _common_checks(run)
    assert run.returncode not in (0, None), f"{case.breakage}: the suites passed on a broken cluster"
    problems = []
    for node_id, pattern in case.must_fail.items():
        outcome = run.outcomes[node_id]
        if outcome.status != "failed":
            problems.append(f"{node_id} {outcome.status} (must fail: {BREAKAGES[case.breakage]})")
        elif outcome.error_type not in EXPECTATION_ERRORS:
            problems.append(f"{node_id} failed with {outcome.error_type}, not an expectation error: "
                            f"{outcome.message[:400]}")
        elif not re.search(pattern, outcome.message):
            problems.append(f"{node_id} failed, but its message does not match {pattern!r}: {outcome.message[:400]}")
    for node_id in case.must_pass:
        if run.outcomes[node_id].status != "passed":
            problems.append(f"{node_id} must pass (independent of the breakage) but "
                            f"{run.outcomes[node_id].status}: {run.outcomes[node_id].message[:400]}")
    assert not problems, f"{case.breakage}:\n" + "\n".join(f"- {p}" for p in problems)

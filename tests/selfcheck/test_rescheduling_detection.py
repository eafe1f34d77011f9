"""Detection power of the rescheduling suite: it must fail where the claim is never
given back to the scheduler, and pass where it is.

Which component to break: in 1.35 the PV controller removes
`volume.kubernetes.io/selected-node` only for in-tree provisioners
(pkg/controller/volume/persistentvolume/pv_controller.go, provisionClaimOperation ->
rescheduleProvisioning); for an external provisioner, which every CSI driver and the
harness's test provisioners are, the provisioner removes it (sig-storage-lib-external-
provisioner's rescheduleProvisioning, inside upstream's external-provisioner). Disabling
the persistentvolume-binder controller would stop provisioning itself, so that cluster
would fail every dynamic test and prove nothing about rescheduling. The breakage made
here is the one that matters: a provisioner that fails as asked and leaves the annotation
in place. Upstream's external-provisioner has no switch for that, so the broken cluster
runs the old test double with `-reschedule=off` instead of CSI (broken_cluster
`no-reschedule`); the healthy control runs CSI, as every cluster does by default.

Expected: the WaitForFirstConsumer test fails at the wait for the annotation to be given
back (ConditionNotReached naming it), the Immediate test still passes (no selected node
is involved), and both pass on a healthy cluster run at the same time.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import allure
import pytest

from tests.selfcheck.test_detection_power import EXPECTATION_ERRORS, Case, Run, run_cases

pytestmark = [allure.epic("Self-verification"), allure.feature("Detection power"), pytest.mark.slow]

SUITE = "suites/test_rescheduling.py"
WFFC = f"{SUITE}::test_wait_for_first_consumer_failure_reschedules_the_same_pod_elsewhere"
IMMEDIATE = f"{SUITE}::test_immediate_failure_is_retried_without_a_selected_node"
# Matched in the run's output: JUnit's message attribute is cut short for long namespaces.
BROKEN = Case("no-reschedule", {WFFC: r"ConditionNotReached: timed out after 30s waiting for PersistentVolumeClaim "
                                      r"in namespace \S+: \S+/data: volume\.kubernetes\.io/selected-node removed or "
                                      r"changed from zone-\S+"},
              must_pass=(IMMEDIATE,))
CONTROL = Case("", {}, must_pass=(WFFC, IMMEDIATE))
RUN_TIMEOUT = 540.0  # about twice the longest run seen on a shared 2-CPU machine (docs/findings.md)


def _command(case: Case, junit: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", *case.node_ids, "-p", "tests.selfcheck.broken_cluster",
            "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", "-n", "0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The broken and the healthy run, started together, one cluster each."""
    return run_cases((CONTROL, BROKEN), _command, tmp_path_factory, RUN_TIMEOUT)


def test_rescheduling_suite_passes_on_a_healthy_cluster(runs: dict[str, Run]) -> None:
    run = runs[""]
    assert not run.timed_out, run.output[-3000:]
    not_passed = {n: o.status + ": " + o.message[:300] for n, o in run.outcomes.items() if o.status != "passed"}
    assert run.returncode == 0 and set(run.outcomes) == set(CONTROL.node_ids) and not not_passed, (
        f"healthy run: exit {run.returncode}, not passed: {not_passed}\n{run.output[-3000:]}")


def test_rescheduling_suite_fails_when_the_claim_is_never_given_back(runs: dict[str, Run]) -> None:
    run = runs["no-reschedule"]
    assert not run.timed_out, run.output[-3000:]
    assert "INTERNALERROR" not in run.output, run.output[-3000:]
    wffc, immediate = run.outcomes.get(WFFC), run.outcomes.get(IMMEDIATE)
    assert wffc is not None and immediate is not None, f"not reported: {run.output[-3000:]}"
    assert wffc.status == "failed", f"the WaitForFirstConsumer test {wffc.status} with no reschedule"
    assert wffc.error_type in EXPECTATION_ERRORS, wffc.message[:400]
    assert re.search(BROKEN.must_fail[WFFC], run.output), f"{BROKEN.must_fail[WFFC]!r} not in:\n{run.output[-3000:]}"
    assert immediate.status == "passed", f"Immediate involves no selected node, must pass: {immediate.message[:400]}"

"""The reschedule loop (bench/reschedule_loop.py) as a regression test: 50 claims, each
failing on its first selected node and given back to the scheduler by the provisioner's
guarded reschedule, must all be provisioned elsewhere; none may be left holding a
selected node the provisioner never acts on (the stale-store race of
sig-storage-lib-external-provisioner v13.1.0, docs/findings.md).

The cluster runs with NominatedNodeNameForExpectation and OpportunisticBatching off: with
1.35's defaults the scheduler sends a pod back to the node that just failed, often 5-8
times in a row (docs/findings.md), so about a third of the claims need more than 45 s
and the loop takes about 9 minutes instead of about 4.5 (262 s measured). Even with both gates off a few
claims (2 of 50 measured) are still being sent back to their first node when the batch
ends: those are "unresolved" (the provisioner gave them back; the scheduler has not
moved on yet), reported but not failed, since what is tested here is the provisioner.
"""

from __future__ import annotations

import allure
import pytest

from bench.reschedule_loop import run_mode

pytestmark = [allure.epic("Self-verification"), allure.feature("Reschedule race"), pytest.mark.slow]

ITERATIONS = 50
GATES = {"NominatedNodeNameForExpectation": False, "OpportunisticBatching": False}


def test_guarded_reschedule_leaves_no_claim_stuck() -> None:
    lines: list[str] = []
    result = run_mode("guarded", ITERATIONS, parallel=5, timeout=45.0, feature_gates=GATES, log=lines.append)
    summary = result.summary()
    allure.attach("\n".join([*lines, summary]), "reschedule-loop.txt", allure.attachment_type.TEXT)
    stuck = [i.evidence for i in result.stuck]
    assert len(result.iterations) == ITERATIONS, summary
    assert not stuck, f"{summary}\n" + "\n".join(stuck)
    assert all(i.failures >= 1 for i in result.iterations), f"every claim must have failed once first: {summary}"
    assert len(result.bound_times()) >= ITERATIONS // 2, f"most claims must end Bound: {summary}"

"""Which canaries a test relies on, which failure it reports, and what counts as a held lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pvchaos.kit.canaries import (
    BINDER,
    NODE_LIFECYCLE,
    PROVISIONER,
    SCHEDULER,
    VOLUME_BINDING,
    CanaryResult,
    first_failure,
    lease_problems,
    relied_on,
)


def test_every_storage_test_relies_on_binding_and_scheduling() -> None:
    assert relied_on(["static-pv"]) == (BINDER, SCHEDULER, VOLUME_BINDING)


def test_dynamic_and_node_failure_tests_rely_on_provisioner_and_leases() -> None:
    assert PROVISIONER in relied_on(["dynamic-zonal"]) and PROVISIONER in relied_on(["dynamic-local"])
    assert NODE_LIFECYCLE in relied_on(["node-failure"]) and NODE_LIFECYCLE not in relied_on(["zones"])


def test_a_declared_list_replaces_the_default() -> None:
    assert relied_on(["dynamic-zonal"], ["scheduler"]) == (SCHEDULER,)


def test_the_first_failed_relied_on_canary_is_reported() -> None:
    results = {SCHEDULER: CanaryResult(SCHEDULER, True, 0.1),
               PROVISIONER: CanaryResult(PROVISIONER, False, 10.0, "provisioner down"),
               BINDER: CanaryResult(BINDER, False, 10.0, "binder down")}
    assert first_failure(results, [SCHEDULER, PROVISIONER, BINDER]).diagnosis == "binder down"  # type: ignore[union-attr]
    assert first_failure(results, [SCHEDULER]) is None
    assert first_failure(results, [VOLUME_BINDING]) is None  # not run here: nothing to blame


NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def _node(name: str, ready: str = "True", control_plane: bool = False) -> dict:
    labels = {"node-role.kubernetes.io/control-plane": ""} if control_plane else {}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": ready, "message": "kubelet stopped posting"}]}}


def _lease(name: str, age: float, duration: int = 40) -> dict:
    renewed = (NOW - timedelta(seconds=age)).isoformat().replace("+00:00", "Z")
    return {"metadata": {"name": name}, "spec": {"renewTime": renewed, "leaseDurationSeconds": duration}}


def test_fresh_leases_on_ready_nodes_are_fine() -> None:
    assert lease_problems([_node("a"), _node("b")], [_lease("a", 3), _lease("b", 39)], NOW) == []


def test_stale_missing_and_unready_are_each_named() -> None:
    problems = lease_problems([_node("a"), _node("b"), _node("c", ready="Unknown")], [_lease("a", 41)], NOW)
    assert problems == ["node a's Lease was last renewed 41s ago (duration 40s)",
                        "node b has no Lease in kube-node-lease",
                        "node c is Ready=Unknown (kubelet stopped posting)"]


def test_a_control_plane_node_is_not_judged() -> None:
    assert lease_problems([_node("cp", ready="False", control_plane=True)], [], NOW) == []

"""A start that times out names the stuck condition or taint and who lifts it."""

from __future__ import annotations

from pvchaos.clusters.local.readiness import node_problem, nodes_problem


def _node(name: str, ready: str = "True", taints: list[dict[str, str]] | None = None,
          reason: str = "KubeletReady") -> dict:
    return {"metadata": {"name": name},
            "spec": {"taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": "m"}]}}


def test_a_ready_untainted_node_has_no_problem() -> None:
    assert node_problem(_node("n1"), "n1") is None


def test_a_kept_not_ready_taint_names_the_node_lifecycle_controller() -> None:
    node = _node("n1", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    problem = node_problem(node, "n1")
    assert problem is not None
    assert "node.kubernetes.io/not-ready:NoSchedule" in problem and "node-lifecycle controller" in problem


def test_a_node_that_is_not_ready_names_the_condition_and_its_reporter() -> None:
    problem = node_problem(_node("n1", ready="Unknown", reason="NodeStatusUnknown"), "n1")
    assert problem is not None and "Ready=Unknown (NodeStatusUnknown" in problem and "KWOK" in problem


def test_missing_and_conditionless_nodes_are_named() -> None:
    bare = {"metadata": {"name": "n2"}, "status": {}}
    line = nodes_problem([bare], ["n1", "n2"])
    assert "node n1 does not exist" in line and "node n2 has no Ready condition" in line


def test_unrelated_taints_are_not_blamed() -> None:
    node = _node("n1", taints=[{"key": "example.com/dedicated", "effect": "NoSchedule"}])
    assert node_problem(node, "n1") is None


def test_many_stuck_nodes_give_a_short_line() -> None:
    want = [f"n-{i}" for i in range(1000)]
    line = nodes_problem([], want)
    assert line.count("does not exist") == 5 and line.endswith("and 995 more nodes not usable")

"""The report of `pvchaos explain`: the JSON schema's fields, and text that stays short."""

from __future__ import annotations

import json

import pytest

from pvchaos.conformance.explain import explain
from pvchaos.explain import SCHEMA, ExplainInputError, explain_view, explanations_json, to_text
from pvchaos.kube.explain_read import ClusterView
from tests.unit.explain_scenes import NODES, ZONE, failed_scheduling, node, pod, pv, pvc, sc, scene, terms

INCIDENT = dict(claims=[pvc("data", "fast", volume="pv-a", phase="Bound")],
                pvs=[pv("pv-a", terms([(ZONE, "In", ["a"])]), claim="data", cls="fast")],
                classes=[sc("fast", mode="Immediate")])


def test_json_schema_fields() -> None:
    e = explain(scene(pod("data", selector={ZONE: "b"}), **INCIDENT, events=[failed_scheduling(
        "0/4 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, 3 node(s) didn't match "
        "Pod's node affinity/selector.")]))
    doc = json.loads(explanations_json([e]))
    assert doc["schema"] == SCHEMA == "pvchaos.explain/v2"
    one = doc["pods"][0]
    assert set(one) == {"pod", "schedulable", "cause", "fixes", "causes", "fitting_nodes", "pod_wide", "claims",
                        "nodes", "scheduler"}
    assert [c["code"] for c in one["causes"]] == ["IMMEDIATE_BINDING_WRONG_ZONE"]
    assert one["causes"][0]["fixes"] == one["fixes"]  # v1's "cause" and "fixes" are the first of "causes"
    assert {k: v for k, v in one["causes"][0].items() if k != "fixes"} == one["cause"]
    assert one["schedulable"] is False and one["cause"]["code"] == "IMMEDIATE_BINDING_WRONG_ZONE"
    b1 = next(n for n in one["nodes"] if n["node"] == "b1")
    assert b1["excluded_by"] == {"filter": "VolumeBinding", "reasons": ["NODE_AFFINITY_CONFLICT"],
                                 "detail": b1["excluded_by"]["detail"], "claim": "app/data", "pv": "pv-a",
                                 "term": 1, "label": ZONE}
    assert one["scheduler"]["agrees"] is True
    assert one["scheduler"]["reported"] == {"NODE_AFFINITY_CONFLICT": 1, "POD_AFFINITY_MISMATCH": 3}
    assert one["claims"][0] == {"key": "app/data", "status": "bound", "storage_class": "fast",
                                "binding_mode": "Immediate", "pv": "pv-a", "detail": ""}


def test_text_names_cause_nodes_scheduler_and_fixes() -> None:
    text = to_text(explain(scene(pod("data", selector={ZONE: "b"}), **INCIDENT)))
    assert "[IMMEDIATE_BINDING_WRONG_ZONE]" in text
    assert "nodes (0 of 4 fit):" in text and "scheduler: no FailedScheduling event yet" in text
    assert "fixes:\n  1. class fast binds Immediately, before the pod is scheduled: use a WaitForFirstConsumer" in text


def test_many_nodes_are_grouped_by_reason() -> None:
    nodes = [node(f"n{i:03d}", "abc"[i % 3]) for i in range(300)]
    text = to_text(explain(scene(pod("data", selector={ZONE: "b"}), **INCIDENT, nodes=nodes)))
    assert ("  100 node(s), e.g. n000, n003, n006: NodeAffinity: pod nodeSelector needs topology.kubernetes.io/zone=b;"
            " node has topology.kubernetes.io/zone=a") in text
    assert "  100 node(s), e.g. n001, n004, n007: VolumeBinding: claim app/data -> PV pv-a" in text
    assert len(text.splitlines()) < 25


def test_every_cause_is_named_and_each_has_its_fixes() -> None:
    """Two independent problems: the text leads with the first and names the second."""
    text = to_text(explain(scene(pod("gone", "data", selector={ZONE: "b"}), **INCIDENT)))
    assert text.splitlines()[1].endswith("[CLAIM_MISSING]")
    assert "also (1 more, fix after the first):" in text and "[IMMEDIATE_BINDING_WRONG_ZONE]" in text
    assert "fixes for [IMMEDIATE_BINDING_WRONG_ZONE]:" in text


def _view(the_pod: dict) -> ClusterView:
    return ClusterView(pods=[the_pod], claims={}, pvs=[], classes={}, nodes=list(NODES), events=[], minor=35)


def test_pending_pod_with_a_missing_node_name_is_explained_not_refused() -> None:
    the_pod = pod()
    the_pod["spec"]["nodeName"] = "gone-node"
    [e] = explain_view(_view(the_pod), "app", "app")
    assert e.cause.code == "NODE_NAME_MISSING" and not e.schedulable
    assert [x.cause.code for x in explain_view(_view(the_pod), None, "app")] == ["NODE_NAME_MISSING"]


def test_pending_pod_bound_to_an_existing_node_is_not_called_not_pending() -> None:
    the_pod = pod()
    the_pod["spec"]["nodeName"] = "a1"
    with pytest.raises(ExplainInputError, match="waits for that node's kubelet") as caught:
        explain_view(_view(the_pod), "app", "app")
    assert "is not Pending (phase Pending)" not in str(caught.value)

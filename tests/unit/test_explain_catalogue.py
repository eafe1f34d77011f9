"""A catalogue of Pending pods, one cause and combinations, built as object sets: each
expects its causes in order, never "fits" for a pod that cannot run, and fixes whose
commands are well formed (shlex parses them; a known kubectl verb and resource; no
empty or placeholder names; names of objects in the scene). A live subset runs in
tests/cluster/test_explain_catalogue.py with the same command check.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvchaos.conformance.explain import explain
from pvchaos.conformance.remedy import fixes
from pvchaos.conformance.verdicts import Scene
from tests.unit.explain_scenes import (
    HOST,
    NODES,
    NS,
    ZONE,
    command_problems,
    failed_scheduling,
    node,
    pod,
    pv,
    pvc,
    sc,
    scene,
    scene_names,
    terms,
)

IMM = sc("fast", mode="Immediate")
WFFC = sc("wffc")
LOCAL = sc("local", provisioner="kubernetes.io/no-provisioner")
ZONE_A = terms([(ZONE, "In", ["a"])])
DISK = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "20Gi", "pods": "110"}
BIG_NODES = [node(n["metadata"]["name"], n["metadata"]["labels"][ZONE], allocatable=DISK) for n in NODES]


def bound(name: str, pv_name: str, cls: str = "fast", affinity: dict | None = None, **pv_kw) -> tuple[dict, dict]:
    return (pvc(name, cls, volume=pv_name, phase="Bound"),
            pv(pv_name, affinity if affinity is not None else ZONE_A, claim=name, cls=cls, **pv_kw))


def with_spec(p: dict, **spec) -> dict:
    p["spec"].update(spec)
    return p


def resources(p: dict, **requests: str) -> dict:
    p["spec"]["containers"] = [{"name": "c", "image": "x", "resources": {"requests": requests}}]
    return p


def event(reason: str, claim: str, message: str, when: str = "2026-12-03T07:00:00Z") -> dict:
    return {"kind": "Event", "reason": reason, "message": message, "lastTimestamp": when,
            "involvedObject": {"kind": "PersistentVolumeClaim", "name": claim, "namespace": NS}}


def released(name: str, old: str = "old", cls: str = "", size: str = "1Gi") -> dict:
    out = pv(name, None, claim=old, cls=cls, size=size, phase="Released")
    out["spec"]["persistentVolumeReclaimPolicy"] = "Retain"
    return out


def msg(body: str, total: int = 4) -> dict:
    return failed_scheduling(f"0/{total} nodes are available: {body}. preemption: 0/{total} nodes are available: "
                             f"{total} Preemption is not helpful for scheduling.")


TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def s_wrong_zone() -> Scene:
    c, v = bound("data", "pv-a")
    return scene(pod("data", selector={ZONE: "b"}), [c], [v], [IMM])


def s_static_wrong_zone() -> Scene:
    c, v = bound("data", "pv-a", cls="")
    return scene(pod("data", selector={ZONE: "b"}), [c], [v])


def s_node_level_in_one_zone() -> Scene:
    c, v = bound("data", "pv-a2", affinity=terms([(HOST, "In", ["host-a2"])]))
    return scene(pod("data", selector={HOST: "host-a1"}), [c], [v], [IMM])


def s_node_gone() -> Scene:
    c, v = bound("data", "pv-l", cls="local", affinity=terms([(HOST, "In", ["host-gone"])]))
    return scene(pod("data"), [c], [v], [LOCAL])


def s_hostname_is_node_name() -> Scene:
    c, v = bound("data", "pv-l", cls="local", affinity=terms([(HOST, "In", ["a1"])]))
    return scene(pod("data"), [c], [v], [LOCAL])


def s_zone_gone() -> Scene:
    c, v = bound("data", "pv-q", cls="", affinity=terms([(ZONE, "In", ["q"])]))
    return scene(pod("data"), [c], [v])


def s_zone_gone_by_class() -> Scene:
    c, v = bound("data", "pv-q", cls="only-q", affinity=terms([(ZONE, "In", ["q"])]))
    return scene(pod("data"), [c], [v], [sc("only-q", mode="Immediate", zones=["q"])])


def s_pv_gone() -> Scene:
    return scene(pod("data"), [pvc("data", "fast", volume="pv-x", phase="Lost")], [], [IMM])


def s_class_typo() -> Scene:
    return scene(pod("data"), [pvc("data", "fas")], [], [IMM])


def s_class_unknown() -> Scene:
    return scene(pod("data"), [pvc("data", "zzzzzz-qqqq")], [], [IMM])


def s_claim_missing() -> Scene:
    return scene(pod("data"))


def s_claim_terminating() -> Scene:
    c = pvc("data", "fast")
    c["metadata"]["deletionTimestamp"] = "2026-12-03T07:00:00Z"
    return scene(pod("data"), [c], [], [IMM])


def s_volume_name_misfit() -> Scene:
    return scene(pod("data"), [pvc("data", "", size="120Gi", volume="small")], [pv("small", size="100Gi")])


def s_released_named() -> Scene:
    return scene(pod("data"), [pvc("data", "", volume="pv-r")], [released("pv-r")])


def s_released_found() -> Scene:
    return scene(pod("data"), [pvc("data", "")], [released("pv-r")])


def s_no_pv() -> Scene:
    return scene(pod("data"), [pvc("data", "", size="120Gi")], [pv("small", size="100Gi")])


def s_provisioning_pending() -> Scene:
    return scene(pod("data"), [pvc("data", "fast")], [], [IMM])


def s_provisioning_failed() -> Scene:
    return scene(pod("data"), [pvc("data", "fast")], [], [IMM],
                 events=[event("ProvisioningFailed", "data", "rpc error: code = ResourceExhausted desc = quota exceeded")])


def s_wffc_provisioning_failed() -> Scene:
    c = pvc("data", "wffc", annotations={"volume.kubernetes.io/selected-node": "a1"})
    return scene(pod("data"), [c], [], [WFFC], events=[event("ProvisioningFailed", "data", "invalid parameter 'tier'")])


def s_provisioner_silent() -> Scene:
    c = pvc("data", "wffc", annotations={"volume.kubernetes.io/selected-node": "a1"})
    return scene(pod("data"), [c], [], [WFFC])


def s_outside_topologies() -> Scene:
    return scene(pod("data", selector={ZONE: "c"}), [pvc("data", "ab")], [], [sc("ab", zones=["a", "b"])])


def s_class_topology_nowhere() -> Scene:
    return scene(pod("data"), [pvc("data", "q")], [], [sc("q", zones=["q"])])


def s_volumes_disjoint() -> Scene:
    c1, v1 = bound("one", "pv-a")
    c2, v2 = bound("two", "pv-b", affinity=terms([(ZONE, "In", ["b"])]))
    return scene(pod("one", "two"), [c1, c2], [v1, v2], [IMM])


def s_selector_nothing() -> Scene:
    return scene(pod(selector={"disk": "nvme"}))


def s_volume_node_tainted() -> Scene:
    c, v = bound("data", "pv-l", cls="local", affinity=terms([(HOST, "In", ["host-c1"])]))
    nodes = NODES[:3] + [node("c1", "c", taints=[TAINT])]
    return scene(pod("data"), [c], [v], [LOCAL], nodes=nodes)


def s_all_tainted() -> Scene:
    return scene(pod(), nodes=[node(n["metadata"]["name"], n["metadata"]["labels"][ZONE], taints=[TAINT]) for n in NODES])


def s_wrong_effect() -> Scene:
    tol = [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoExecute"}]
    return scene(pod(tolerations=tol),
                 nodes=[node(n["metadata"]["name"], n["metadata"]["labels"][ZONE], taints=[TAINT]) for n in NODES])


def s_cordoned_volume_node() -> Scene:
    c, v = bound("data", "pv-l", cls="local", affinity=terms([(HOST, "In", ["host-c1"])]))
    nodes = NODES[:3] + [node("c1", "c", taints=[CORDON], unschedulable=True)]
    return scene(pod("data"), [c], [v], [LOCAL], nodes=nodes)


def s_unreachable_volume_node() -> Scene:
    c, v = bound("data", "pv-l", cls="local", affinity=terms([(HOST, "In", ["host-c1"])]))
    nodes = NODES[:3] + [node("c1", "c", taints=[UNREACHABLE])]
    return scene(pod("data"), [c], [v], [LOCAL], nodes=nodes)


def s_no_nodes() -> Scene:
    return scene(pod(), nodes=[])


def s_pinned_away_wffc() -> Scene:
    c, v = bound("data", "pv-a", cls="wffc")
    return scene(pod("data", selector={ZONE: "b"}), [c], [v], [WFFC])


def s_ephemeral_too_big() -> Scene:
    return scene(resources(pod(), **{"ephemeral-storage": "500Gi"}), nodes=BIG_NODES)


def s_cpu_too_big() -> Scene:
    return scene(resources(pod(), cpu="64"), nodes=BIG_NODES)


def s_cpu_held_by_others() -> Scene:
    return scene(resources(pod(), cpu="2"), nodes=BIG_NODES, events=[msg("4 Insufficient cpu")])


def s_pod_affinity() -> Scene:
    return scene(pod(), events=[msg("4 node(s) didn't match pod affinity rules")])


def s_pod_anti_affinity() -> Scene:
    return scene(pod(), events=[msg("2 node(s) didn't match pod anti-affinity rules, 2 node(s) didn't satisfy "
                                    "existing pods anti-affinity rules")])


def s_spread() -> Scene:
    return scene(pod(), events=[msg("4 node(s) didn't match pod topology spread constraints")])


def s_volume_limit() -> Scene:
    return scene(pod(), events=[msg("4 node(s) exceed max volume count")])


def s_rwop_in_use() -> Scene:
    return scene(pod(), events=[msg("4 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                                    "access mode already in-use by another pod")])


def s_unknown_filter() -> Scene:
    return scene(pod(), events=[msg("4 node(s) did not satisfy the DynamicResources plugin")])


def s_pod_affinity_no_message() -> Scene:
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}]}}
    return scene(with_spec(pod(), affinity=affinity))


def s_no_scheduler() -> Scene:
    return scene(with_spec(pod(), schedulerName="my-scheduler"))


def s_node_name_missing() -> Scene:
    return scene(with_spec(pod(), nodeName="gone-node"))


def s_gated() -> Scene:
    return scene(with_spec(pod(), schedulingGates=[{"name": "example.com/wait"}]))


def s_missing_and_wrong_zone() -> Scene:
    c, v = bound("data", "pv-a")
    return scene(pod("gone", "data", selector={ZONE: "b"}), [c], [v], [IMM])


def s_typo_and_node_gone() -> Scene:
    c, v = bound("data", "pv-l", cls="local", affinity=terms([(HOST, "In", ["host-gone"])]))
    return scene(pod("data", "logs"), [c, pvc("logs", "fas")], [v], [LOCAL, IMM])


def s_selector_and_too_big() -> Scene:
    return scene(resources(pod(selector={"disk": "nvme"}), **{"ephemeral-storage": "500Gi"}), nodes=BIG_NODES)


def s_two_unreachable() -> Scene:
    c1, v1 = bound("one", "pv-l", cls="local", affinity=terms([(HOST, "In", ["host-gone"])]))
    c2, v2 = bound("two", "pv-q", cls="", affinity=terms([(ZONE, "In", ["q"])]))
    return scene(pod("one", "two"), [c1, c2], [v1, v2], [LOCAL])


def s_scheduler_and_wrong_zone() -> Scene:
    c, v = bound("data", "pv-a")
    return scene(with_spec(pod("data", selector={ZONE: "b"}), schedulerName="my-scheduler"), [c], [v], [IMM])


def s_released_and_failed() -> Scene:
    return scene(pod("old-data", "new"), [pvc("old-data", ""), pvc("new", "fast")], [released("pv-r")], [IMM],
                 events=[event("ProvisioningFailed", "new", "quota exceeded for tier gold")])


def s_node_name_and_missing_claim() -> Scene:
    return scene(with_spec(pod("gone"), nodeName="gone-node"))


def s_tainted_and_wrong_zone_message() -> Scene:
    c, v = bound("data", "pv-a")
    return scene(pod("data", selector={ZONE: "b"}), [c], [v], [IMM], events=[msg(
        "1 node(s) didn't match PersistentVolume's node affinity, 3 node(s) didn't match Pod's node affinity/selector")])


def s_pinned_and_spread() -> Scene:
    return scene(pod(selector={ZONE: "b"}), events=[msg(
        "3 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod topology spread constraints")])


def s_resource_claim_missing() -> Scene:
    """Every node fits the modelled filters; DynamicResources' PreFilter rejects the pod for
    a ResourceClaim explain does not read (issue #39: this was SCHEDULABLE, exit 0)."""
    return scene(pod(), events=[msg('resourceclaim.resource.k8s.io "gpu" not found')])


def s_taint_explain_does_not_see() -> Scene:
    """The scheduler names a modelled reason (a taint) the model does not predict (#39)."""
    return scene(pod(), events=[msg("4 node(s) had untolerated taint {dedicated: db}")])


def s_pod_affinity_and_older_pod_wide_message() -> Scene:
    """Required pod affinity; the only message is a pod-wide one from before the claim
    bound (#39: this was SCHEDULABLE)."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}]}}
    c, v = bound("data", "pv-any", affinity=terms([(ZONE, "In", ["a", "b", "c"])]))
    c["metadata"]["managedFields"] = [{"manager": "kube-controller-manager", "operation": "Update",
                                       "subresource": "status", "time": "2026-12-03T07:00:05Z"}]
    return scene(with_spec(pod("data"), affinity=affinity), [c], [v], [IMM],
                 events=[msg("pod has unbound immediate PersistentVolumeClaims")])


def s_fits() -> Scene:
    return scene(pod())


CATALOGUE: list[tuple[Callable[[], Scene], list[str]]] = [
    (s_wrong_zone, ["IMMEDIATE_BINDING_WRONG_ZONE"]),
    (s_static_wrong_zone, ["IMMEDIATE_BINDING_WRONG_ZONE"]),
    (s_node_level_in_one_zone, ["IMMEDIATE_BINDING_WRONG_ZONE"]),
    (s_node_gone, ["LOCAL_PV_NODE_GONE"]),
    (s_hostname_is_node_name, ["PV_HOSTNAME_IS_NODE_NAME"]),
    (s_zone_gone, ["ZONE_WITHOUT_NODES"]),
    (s_zone_gone_by_class, ["ZONE_WITHOUT_NODES"]),
    (s_pv_gone, ["PV_GONE"]),
    (s_class_typo, ["CLASS_MISSING"]),
    (s_class_unknown, ["CLASS_MISSING"]),
    (s_claim_missing, ["CLAIM_MISSING"]),
    (s_claim_terminating, ["CLAIM_TERMINATING"]),
    (s_volume_name_misfit, ["VOLUME_NAME_MISFIT"]),
    (s_released_named, ["PV_RELEASED"]),
    (s_released_found, ["PV_RELEASED"]),
    (s_no_pv, ["NO_PV_FOR_CLAIM"]),
    (s_provisioning_pending, ["PROVISIONING_PENDING"]),
    (s_provisioning_failed, ["PROVISIONING_FAILED"]),
    (s_wffc_provisioning_failed, ["PROVISIONING_FAILED"]),
    (s_provisioner_silent, ["PROVISIONER_SILENT"]),
    (s_outside_topologies, ["PINNED_OUTSIDE_ALLOWED_TOPOLOGIES"]),
    (s_class_topology_nowhere, ["CLASS_TOPOLOGY_MATCHES_NO_NODE"]),
    (s_volumes_disjoint, ["VOLUMES_DISJOINT"]),
    (s_selector_nothing, ["POD_SELECTOR_MATCHES_NO_NODE"]),
    (s_volume_node_tainted, ["VOLUME_NODES_UNAVAILABLE"]),
    (s_all_tainted, ["NODES_UNAVAILABLE"]),
    (s_wrong_effect, ["NODES_UNAVAILABLE"]),
    (s_cordoned_volume_node, ["VOLUME_NODES_UNAVAILABLE"]),
    (s_unreachable_volume_node, ["VOLUME_NODES_UNAVAILABLE"]),
    (s_no_nodes, ["NO_NODES"]),
    (s_pinned_away_wffc, ["POD_PINNED_AWAY_FROM_VOLUME"]),
    (s_ephemeral_too_big, ["INSUFFICIENT_RESOURCES"]),
    (s_cpu_too_big, ["INSUFFICIENT_RESOURCES"]),
    (s_cpu_held_by_others, ["INSUFFICIENT_RESOURCES"]),
    (s_pod_affinity, ["INTER_POD_AFFINITY"]),
    (s_pod_anti_affinity, ["INTER_POD_AFFINITY"]),
    (s_spread, ["TOPOLOGY_SPREAD"]),
    (s_volume_limit, ["VOLUME_LIMIT_EXCEEDED"]),
    (s_rwop_in_use, ["RWOP_CLAIM_IN_USE"]),
    (s_unknown_filter, ["UNMODELED_FILTER"]),
    (s_pod_affinity_no_message, ["UNMODELED_FILTER"]),
    (s_no_scheduler, ["NO_SCHEDULER"]),
    (s_node_name_missing, ["NODE_NAME_MISSING"]),
    (s_gated, ["SCHEDULING_GATED"]),
    (s_missing_and_wrong_zone, ["CLAIM_MISSING", "IMMEDIATE_BINDING_WRONG_ZONE"]),
    (s_typo_and_node_gone, ["CLASS_MISSING", "LOCAL_PV_NODE_GONE"]),
    (s_selector_and_too_big, ["POD_SELECTOR_MATCHES_NO_NODE", "INSUFFICIENT_RESOURCES"]),
    (s_two_unreachable, ["LOCAL_PV_NODE_GONE", "ZONE_WITHOUT_NODES"]),
    (s_scheduler_and_wrong_zone, ["NO_SCHEDULER", "IMMEDIATE_BINDING_WRONG_ZONE"]),
    (s_released_and_failed, ["PV_RELEASED", "PROVISIONING_FAILED"]),
    (s_node_name_and_missing_claim, ["NODE_NAME_MISSING", "CLAIM_MISSING"]),
    (s_tainted_and_wrong_zone_message, ["IMMEDIATE_BINDING_WRONG_ZONE"]),
    (s_pinned_and_spread, ["TOPOLOGY_SPREAD"]),
    (s_resource_claim_missing, ["UNMODELED_FILTER"]),
    (s_taint_explain_does_not_see, ["SCHEDULER_DISAGREES"]),
    (s_pod_affinity_and_older_pod_wide_message, ["SCHEDULER_MESSAGE_STALE", "UNMODELED_FILTER"]),
    (s_fits, ["SCHEDULABLE"]),
]


@pytest.mark.parametrize(("make", "codes"), CATALOGUE, ids=[m.__name__[2:] for m, _ in CATALOGUE])
def test_catalogue(make: Callable[[], Scene], codes: list[str]) -> None:
    s = make()
    e = explain(s)
    assert [c.code for c in e.causes] == codes, [c.summary for c in e.causes]
    assert e.schedulable == (codes == ["SCHEDULABLE"])  # the exit code: 0 only for a pod that can run
    for cause in e.causes:
        found = fixes(cause)
        assert found or cause.code in ("SCHEDULABLE", "NO_NODES", "VOLUMES_DISJOINT"), cause.code
        for fix in found:
            for command in fix.commands:
                assert not command_problems(command, scene_names(s), NS), (command, command_problems(
                    command, scene_names(s), NS))


def test_catalogue_size() -> None:
    assert len(CATALOGUE) >= 40
    assert sum(len(codes) > 1 for _, codes in CATALOGUE) >= 6


def test_the_command_check_rejects_bad_commands() -> None:
    names = scene_names(s_wrong_zone())
    assert command_problems("kubectl get storageclass  -o yaml", names, NS) == []  # a list: legal, if useless
    assert command_problems("kubectl get storageclass '' -o yaml", names, NS)
    assert command_problems("kubectl get pv pv-nope", names, NS)
    assert command_problems("kubectl frobnicate pod app -n app", names, NS)
    assert command_problems("kubectl get widgets", names, NS)
    assert command_problems("kubectl patch pv pv-a --type json -p '[{op'", names, NS)
    assert command_problems("kubectl delete pvc data -n other", names, NS)
    assert command_problems("kubectl edit pod <name> -n app", names, NS)
    assert command_problems("kubectl get pvc data -n app -o yaml > data.yaml   # edit", names, NS) == []


# ---- what each fix says, where the issue found it wrong ---------------------------------------

def _texts(s: Scene, code: str | None = None) -> str:
    e = explain(s)
    cause = next(c for c in e.causes if code is None or c.code == code)
    return "\n".join([cause.summary, *cause.details] + [f.text + "\n" + "\n".join(f.commands) for f in fixes(cause)])


def test_classless_claim_gets_no_empty_class_name() -> None:
    text = _texts(s_static_wrong_zone())
    assert "storageclass  " not in text and "the existing PV pv-a" in text
    assert "kubectl get pv pv-a" in text  # the fix points at the PV, the root


def test_node_level_conflict_is_said_at_node_level() -> None:
    e = explain(s_node_level_in_one_zone())
    assert "node a2" in e.cause.summary and "zone a" not in e.cause.summary
    assert any("(node a2)" in f.text for f in fixes(e.cause))


def test_hostname_label_not_node_name() -> None:
    text = _texts(s_hostname_is_node_name())
    assert "no longer in the cluster" not in text
    assert "node a1 has kubernetes.io/hostname=host-a1" in text
    assert '"values":["host-a1"]' in text


def test_taints_offer_remove_and_the_right_effect() -> None:
    text = _texts(s_wrong_effect())
    assert "kubectl taint nodes a1 dedicated=db:NoSchedule-" in text
    assert '"effect":"NoSchedule"' in text and '"effect":"NoExecute"' not in text.split("tolerate", 1)[1]
    assert "only with effect NoExecute; the taint has effect NoSchedule" in text


def test_cordoned_healthy_node_is_not_called_not_ready() -> None:
    text = _texts(s_cordoned_volume_node())
    assert "kubectl uncordon c1" in text and "not ready" not in text
    assert "not ready" in _texts(s_unreachable_volume_node())


def test_provisioner_failure_quotes_its_error() -> None:
    text = _texts(s_provisioning_failed())
    assert "quota exceeded" in text and "raise the quota" in text and "check that provisioner" not in text
    assert "reason=ProvisioningFailed" in text


def test_released_pv_shows_claimref_clearing() -> None:
    text = _texts(s_released_named())
    assert """kubectl patch pv pv-r --type json -p '[{"op":"remove","path":"/spec/claimRef"}]'""" in text


def test_zone_from_class_points_at_the_class() -> None:
    e = explain(s_zone_gone_by_class())
    assert "class only-q" in fixes(e.cause)[0].text
    assert not fixes(e.cause)[0].text.startswith("add nodes")


def test_unmodeled_filter_quotes_the_scheduler() -> None:
    e = explain(s_unknown_filter())
    assert e.cause.details[0].startswith("0/4 nodes are available: 4 node(s) did not satisfy the DynamicResources")
    assert not e.schedulable

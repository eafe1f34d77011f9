"""`pvchaos explain` on real Pending pods: a catalogue of causes, each reproduced on a
local cluster (real kube-scheduler, PV controller and provisioners).

Every case makes the situation, waits for the scheduler's verdict (PodScheduled=False,
reason Unschedulable, and its FailedScheduling message where one is due), then explains
the pod through the same list calls and engine as the command, and asserts the causes,
that the scheduler's message agrees with the per-node prediction (where explain models
the filter), and that every suggested command is well formed for the cluster's objects
(``tests.unit.explain_scenes.command_problems``). A few cases run the suggested fix
with kubectl and see the pod scheduled. The pure, larger catalogue (combinations
included) is tests/unit/test_explain_catalogue.py.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from pvchaos import cli
from pvchaos.chaos.labels import add_taint, set_node_labels
from pvchaos.conformance.explain import Explanation, explain
from pvchaos.conformance.remedy import fixes
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.explain_read import read_view
from pvchaos.kube.wait import wait_for, wait_for_event
from pvchaos.plugin import evidence
from tests.unit.explain_scenes import command_problems, scene_names

pytestmark = [pytest.mark.needs("zones", "static-pv")]
NO_PROVISIONER = "kubernetes.io/no-provisioner"


def explained(ws: Workspace, pod: str, key: str | None) -> Explanation:
    """Wait for the scheduler's verdict (with message ``key``, else any filter message),
    then explain the pod."""
    found = x.pod_unschedulable(ws, pod, key)
    if key is None:
        wait_for_event(ws.kube, found, "nodes are available", reason="FailedScheduling")
    return explained_now(ws, pod)


def explained_now(ws: Workspace, pod: str) -> Explanation:
    """Explain the pod as it is, and check every suggested command against the cluster."""
    view = read_view(ws.kube, ws.namespace, pod)
    scene = view.scene(view.pods[0])
    e = explain(scene)
    for cause in e.causes:
        for fix in fixes(cause):
            for command in fix.commands:
                assert not command_problems(command, scene_names(scene), ws.namespace), (
                    cause.code, command, command_problems(command, scene_names(scene), ws.namespace))
    return e


def exit_code(ws: Workspace, pod: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    """The command's exit code and JSON for one pod."""
    code = cli.main(["explain", pod, "-n", ws.namespace, "--kubeconfig", str(ws.cluster.kubeconfig), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)["pods"][0]


def run_fix(ws: Workspace, kubectl: Path, command: str) -> None:
    """Run one suggested command as a user would (kubectl against this cluster)."""
    argv = shlex.split(command, comments=True)
    assert argv[0] == "kubectl" and "&&" not in argv and ">" not in argv, command
    done = subprocess.run([str(kubectl), "--kubeconfig", str(ws.cluster.kubeconfig), *argv[1:]],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, (command, done.stderr)


def scheduled(ws: Workspace, pod: str, timeout: float = 60) -> None:
    wait_for(ws.kube, "Pod", pod, lambda p: bool((p.get("spec") or {}).get("nodeName")), "scheduled",
             ws.namespace, timeout)


def agrees(e: Explanation) -> None:
    assert e.scheduler.agrees is True, (e.scheduler.message, e.scheduler.differences, e.scheduler.predicted)


@pytest.mark.needs("dynamic-zonal")
def test_immediate_binding_across_zones(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's incident: an Immediate class binds in zone a, the pod may only run in zone b."""
    zone_a, zone_b = ws.zones()[0], ws.zones()[1]
    sc = ws.storage_class("imm", "Immediate", allowed_zones=[zone_a])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    x.claim_bound(ws, "data")
    ws.create(b.pod("app", ("data",), node_selector={o.ZONE_KEY: zone_b}))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "IMMEDIATE_BINDING_WRONG_ZONE"
    agrees(e)
    # the command itself: exit 1, the JSON schema, read-only
    code = cli.main(["explain", "app", "-n", ws.namespace, "--kubeconfig", str(ws.cluster.kubeconfig), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["schema"] == "pvchaos.explain/v2"
    assert out["pods"][0]["cause"]["code"] == "IMMEDIATE_BINDING_WRONG_ZONE"
    assert out["pods"][0]["scheduler"]["agrees"] is True


def test_local_pv_whose_node_is_gone(ws: Workspace) -> None:
    """A local PV pinned to a node that was replaced (its hostname no longer exists)."""
    x.bound_pair(ws, b.hostname_affinity("replaced-node-7"))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "LOCAL_PV_NODE_GONE"
    assert e.cause.facts["hosts"] == ["replaced-node-7"]
    agrees(e)


def test_zone_without_nodes(ws: Workspace) -> None:
    x.bound_pair(ws, b.zone_affinity("zone-gone"))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "ZONE_WITHOUT_NODES"
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_class_typo(ws: Workspace) -> None:
    sc = ws.storage_class("typo", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc[:-1]))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "CLASS_MISSING"
    assert e.cause.facts["suggestion"] == sc
    agrees(e)


def test_no_static_pv_big_enough(ws: Workspace) -> None:
    """100Gi never satisfies 120Gi: an unbound class-less claim blocks the pod everywhere."""
    ws.create(b.persistent_volume(ws.name("pv"), "100Gi", labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "120Gi", "", selector={"matchLabels": ws.case_labels}))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "NO_PV_FOR_CLAIM"
    assert "requested PV is too small" in e.cause.details[0]
    agrees(e)


def test_claim_that_does_not_exist(ws: Workspace) -> None:
    ws.create(b.pod("app", ("never-created",)))
    e = explained(ws, "app", None)
    assert e.cause.code == "CLAIM_MISSING"
    agrees(e)


def test_lost_claim_whose_pv_was_deleted(ws: Workspace) -> None:
    pv = x.bound_pair(ws, b.zone_affinity(ws.zones()[0]))
    name = o.name(pv)
    ws.delete("PersistentVolume", name, wait=False)
    ws.patch("PersistentVolume", name, {"metadata": {"finalizers": None}})  # pv-protection holds a bound PV
    wait_for(ws.kube, "PersistentVolumeClaim", "data", lambda c: o.phase(c) == "Lost", "phase Lost", ws.namespace)
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", None)  # 1.35.4: a PreFilter rejection, not the per-node PV_NOT_EXIST
    assert e.cause.code == "PV_GONE"
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_pod_pinned_outside_allowed_topologies(ws: Workspace) -> None:
    zone_a, zone_c = ws.zones()[0], ws.zones()[-1]
    sc = ws.storage_class("only-a", "WaitForFirstConsumer", allowed_zones=[zone_a])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",), node_selector={o.ZONE_KEY: zone_c}))
    e = explained(ws, "app", "NO_PV_TO_BIND")
    assert e.cause.code == "PINNED_OUTSIDE_ALLOWED_TOPOLOGIES"
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_class_topology_that_no_node_has(ws: Workspace) -> None:
    sc = ws.storage_class("nowhere", "WaitForFirstConsumer", allowed_topologies={o.ZONE_KEY: ["zone-q"]})
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NO_PV_TO_BIND")
    assert e.cause.code == "CLASS_TOPOLOGY_MATCHES_NO_NODE"
    agrees(e)


def test_local_class_without_a_fitting_pv(ws: Workspace) -> None:
    sc = ws.create(b.storage_class(ws.name("local"), NO_PROVISIONER))["metadata"]["name"]
    node = ws.node()
    ws.create(b.persistent_volume(ws.name("pv"), "5Gi", storage_class=sc, affinity=b.hostname_affinity(o.hostname(node)),
                                  local_path="/mnt/disk1"))
    ws.create(b.persistent_volume_claim("data", "10Gi", sc))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NO_PV_TO_BIND")
    assert e.cause.code == "NO_PV_FOR_CLAIM"
    agrees(e)


def test_provisioner_that_never_answers(ws: Workspace) -> None:
    """WaitForFirstConsumer with a provisioner nobody runs: the scheduler picks a node,
    annotates the claim and waits; explain names the silent provisioner."""
    sc = ws.create(b.storage_class(ws.name("silent"), "absent.csi.pvchaos.dev"))["metadata"]["name"]
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    selected = x.claim_annotation(ws, "data", o.SELECTED_NODE)
    view = read_view(ws.kube, ws.namespace, "app")
    e = explain(view.scene(view.pods[0]))
    assert e.cause.code == "PROVISIONER_SILENT"
    assert e.cause.facts["provisioner"] == "absent.csi.pvchaos.dev"
    assert e.fitting == (selected,)  # the scheduler's choice is the one node explain finds


def test_volume_name_naming_a_pv_too_small(ws: Workspace) -> None:
    pv = ws.create(b.persistent_volume(ws.name("pv"), "1Gi", labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "5Gi", "", volume_name=o.name(pv)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "VOLUME_NAME_MISFIT"
    assert "requested PV is too small" in e.cause.details[0]
    agrees(e)


def test_two_volumes_in_two_zones(ws: Workspace) -> None:
    x.bound_pair(ws, b.zone_affinity(ws.zones()[0]), claim="one")
    x.bound_pair(ws, b.zone_affinity(ws.zones()[1]), claim="two")
    ws.create(b.pod("app", ("one", "two")))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "VOLUMES_DISJOINT"
    agrees(e)


def test_node_selector_that_matches_nothing(ws: Workspace, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    ws.create(b.pod("app", node_selector={"disk": "nvme"}))
    ws.create(b.pod("other", node_selector={"disk": "nvme"}))
    e = explained(ws, "app", "POD_AFFINITY_MISMATCH")
    assert e.cause.code == "POD_SELECTOR_MATCHES_NO_NODE"
    agrees(e)
    # a failed suite test gets the report of each Pending pod attached
    attached: dict[str, str] = {}
    monkeypatch.setattr(evidence.allure, "attach", lambda body, name, *a, **k: attached.__setitem__(name, body))
    evidence.attach_explanations(ws)
    assert sorted(attached) == ["explain-app.txt", "explain-other.txt"]
    assert "[POD_SELECTOR_MATCHES_NO_NODE]" in attached["explain-app.txt"]
    # --all-pending: both pods, exit 1
    x.pod_unschedulable(ws, "other")
    assert cli.main(["explain", "--all-pending", "-n", ws.namespace, "--kubeconfig", str(ws.cluster.kubeconfig),
                     "-o", "json"]) == 1
    pods = json.loads(capsys.readouterr().out)["pods"]
    assert [p["pod"] for p in pods] == [f"{ws.namespace}/app", f"{ws.namespace}/other"]


@pytest.mark.disruptive
@pytest.mark.needs("node-labels")
def test_local_volume_on_a_tainted_node(ws: Workspace) -> None:
    """The only node that holds the volume does not take pods (a NoSchedule taint)."""
    node = ws.node()
    add_taint(ws, o.name(node), {"key": "pvchaos.dev/broken", "effect": "NoSchedule"})
    x.bound_pair(ws, b.hostname_affinity(o.hostname(node)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNTOLERATED_TAINT")
    assert e.cause.code == "VOLUME_NODES_UNAVAILABLE"
    assert e.cause.facts["nodes"] == [o.name(node)]
    agrees(e)


# ---- filters explain did not model, and pods the scheduler never judges (issue #30) -----------

@pytest.mark.needs("ephemeral-storage")
def test_ephemeral_storage_beyond_every_node(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """Was a false "fits" (exit 0); now a cause of its own, agreeing with the scheduler."""
    ws.create(b.pod("app", requests={"ephemeral-storage": "100Ti"}))
    e = explained(ws, "app", "INSUFFICIENT_EPHEMERAL")
    assert [c.code for c in e.causes] == ["INSUFFICIENT_RESOURCES"]
    agrees(e)
    code, doc = exit_code(ws, "app", capsys)
    assert code == 1 and doc["schedulable"] is False


def test_pod_affinity_that_matches_no_pod(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "no-such-db"}}, "topologyKey": o.ZONE_KEY}]}}
    ws.create(b.pod("app", extra_spec={"affinity": affinity}))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["INTER_POD_AFFINITY"]
    assert "pod affinity rules" in e.cause.details[0]  # the scheduler's own words are the evidence
    code, _ = exit_code(ws, "app", capsys)
    assert code == 1


def test_resource_claim_that_does_not_exist(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """Every node passes the filters explain models; the pod's ResourceClaim does not
    exist, which explain does not read. On 1.35.4 DynamicResources holds the pod before
    any filter (PreEnqueue: no event, no PodScheduled condition), so there is no scheduler
    verdict to wait for; with or without one, the answer is a cause and exit 1, never
    "fits" (issue #39: SCHEDULABLE, exit 0)."""
    pod = b.pod("app", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "no-such-claim"}]})
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    ws.create(pod)
    e = explained_now(ws, "app")
    assert e.fitting, "explain models no filter that rejects this pod"
    assert [c.code for c in e.causes] == ["UNMODELED_FILTER"], [c.summary for c in e.causes]
    assert "no-such-claim" in e.cause.summary
    code, doc = exit_code(ws, "app", capsys)
    assert code == 1 and doc["schedulable"] is False


def test_topology_spread_on_a_key_no_node_has(ws: Workspace) -> None:
    spread = [{"maxSkew": 1, "topologyKey": "pvchaos.dev/no-such-key", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "spread"}}}]
    ws.create(b.pod("app", labels={"app": "spread"}, extra_spec={"topologySpreadConstraints": spread}))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["TOPOLOGY_SPREAD"]


def test_scheduler_name_nobody_serves(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws.create(b.pod("app", extra_spec={"schedulerName": "nobody-scheduler"}))
    e = explained_now(ws, "app")
    assert [c.code for c in e.causes] == ["NO_SCHEDULER"]
    code, _ = exit_code(ws, "app", capsys)
    assert code == 1


def test_node_name_of_a_missing_node(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """Was exit 2 with "is not Pending (phase Pending)"."""
    ws.create(b.pod("app", node_name="no-such-node-42"))
    code, doc = exit_code(ws, "app", capsys)
    assert code == 1 and doc["cause"]["code"] == "NODE_NAME_MISSING"
    assert explained_now(ws, "app").cause.code == "NODE_NAME_MISSING"


# ---- every cause, node identity, granularity, fixes that work ----------------------------------

def test_missing_claim_and_claim_in_the_wrong_zone(ws: Workspace) -> None:
    """Two independent causes: the scheduler reports the first; explain names both."""
    zone_a, zone_b = ws.zones()[0], ws.zones()[1]
    x.bound_pair(ws, b.zone_affinity(zone_a))
    ws.create(b.pod("app", ("never-created", "data"), node_selector={o.ZONE_KEY: zone_b}))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["CLAIM_MISSING", "IMMEDIATE_BINDING_WRONG_ZONE"]
    agrees(e)


def test_pv_naming_the_node_by_name_not_hostname_label(ws: Workspace) -> None:
    node = next((n for n in ws.nodes() if o.hostname(n) != o.name(n)), None)
    if node is None:
        pytest.skip("every node's kubernetes.io/hostname label equals its name here")
    x.bound_pair(ws, b.hostname_affinity(o.name(node)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert [c.code for c in e.causes] == ["PV_HOSTNAME_IS_NODE_NAME"]
    assert o.hostname(node) in e.cause.summary and "no longer in the cluster" not in e.cause.summary
    agrees(e)


def test_node_level_conflict_inside_one_zone(ws: Workspace) -> None:
    zone = ws.zones()[0]
    if len(ws.nodes(zone)) < 2:
        pytest.skip(f"zone {zone} has one node")
    volume_node, pod_node = ws.node(zone, 0), ws.node(zone, 1)
    x.bound_pair(ws, b.hostname_affinity(o.hostname(volume_node)))
    ws.create(b.pod("app", ("data",), node_selector=ws.pin(pod_node)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "IMMEDIATE_BINDING_WRONG_ZONE"
    assert f"node {o.name(volume_node)}" in e.cause.summary and f"zone {zone}" not in e.cause.summary
    agrees(e)


def test_released_retain_pv_fix_clears_the_claim_ref(ws: Workspace, kubectl: Path) -> None:
    """The suggested `kubectl patch pv ... remove /spec/claimRef`, run as given, lets the pod schedule."""
    pv = x.bound_pair(ws, None, claim="old")
    name = o.name(pv)
    ws.delete("PersistentVolumeClaim", "old")
    wait_for(ws.kube, "PersistentVolume", name, lambda p: o.phase(p) == "Released", "phase Released")
    ws.create(b.persistent_volume_claim("data", "5Gi", "", volume_name=name))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "PV_RELEASED"
    agrees(e)
    command = fixes(e.cause)[0].commands[0]
    assert command == f"""kubectl patch pv {name} --type json -p '[{{"op":"remove","path":"/spec/claimRef"}}]'"""
    run_fix(ws, kubectl, command)
    scheduled(ws, "app")


@pytest.mark.disruptive
@pytest.mark.needs("node-labels")
def test_taint_with_a_toleration_of_the_wrong_effect(ws: Workspace, kubectl: Path) -> None:
    """The pod tolerates the key with NoExecute; the taint is NoSchedule. The suggested
    toleration (the taint's effect) and the suggested removal are both offered; the
    toleration patch, run as given, lets the pod schedule."""
    node = ws.node()
    add_taint(ws, o.name(node), {"key": "pvchaos.dev/dedicated", "value": "db", "effect": "NoSchedule"})
    x.bound_pair(ws, b.hostname_affinity(o.hostname(node)))
    wrong = [{"key": "pvchaos.dev/dedicated", "operator": "Equal", "value": "db", "effect": "NoExecute"}]
    ws.create(b.pod("app", ("data",), tolerations=wrong))
    e = explained(ws, "app", "UNTOLERATED_TAINT")
    assert e.cause.code == "VOLUME_NODES_UNAVAILABLE"
    agrees(e)
    commands = [c for f in fixes(e.cause) for c in f.commands]
    assert f"kubectl taint nodes {o.name(node)} pvchaos.dev/dedicated=db:NoSchedule-" in commands
    tolerate = next(c for c in commands if "/spec/tolerations" in c)
    assert '"effect":"NoSchedule"' in tolerate
    run_fix(ws, kubectl, tolerate)
    scheduled(ws, "app")


@pytest.mark.disruptive
@pytest.mark.needs("node-labels")
def test_pv_naming_a_relabelled_node_by_name(ws: Workspace) -> None:
    """The node's kubernetes.io/hostname label no longer equals its name (as on clouds
    where the two differ): a PV naming the node reports the label, not "node gone"."""
    node = ws.node()
    set_node_labels(ws, o.name(node), {o.HOSTNAME_KEY: f"{o.name(node)}-host"})
    x.bound_pair(ws, b.hostname_affinity(o.name(node)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert [c.code for c in e.causes] == ["PV_HOSTNAME_IS_NODE_NAME"]
    assert f"{o.name(node)}-host" in e.cause.summary
    agrees(e)


@pytest.mark.disruptive
@pytest.mark.needs("node-labels")
def test_cordoned_healthy_volume_node_fix_uncordons(ws: Workspace, kubectl: Path) -> None:
    node = ws.node()
    ws.cleanup.push(f"uncordon {o.name(node)}", lambda: ws.patch("Node", o.name(node), {"spec": {"unschedulable": None}}))
    ws.patch("Node", o.name(node), {"spec": {"unschedulable": True}})
    x.bound_pair(ws, b.hostname_affinity(o.hostname(node)))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_UNSCHEDULABLE")
    assert e.cause.code == "VOLUME_NODES_UNAVAILABLE"
    agrees(e)
    texts = " ".join(f.text for f in fixes(e.cause))
    assert "not ready" not in texts
    run_fix(ws, kubectl, fixes(e.cause)[0].commands[0])
    scheduled(ws, "app")


@pytest.mark.needs("dynamic-zonal", "provisioning-failures")
def test_provisioner_failure_is_quoted(ws: Workspace) -> None:
    sc = ws.storage_class("fail", "Immediate", parameters=b.provisioning_failures(reason="quota exceeded for tier gold"))
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data",)))
    wait_for_event(ws.kube, ws.get("PersistentVolumeClaim", "data") or {}, "quota exceeded for tier gold",
                   reason="ProvisioningFailed")
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "PROVISIONING_FAILED"
    assert "quota exceeded for tier gold" in e.cause.summary
    assert "raise the quota" in fixes(e.cause)[0].text
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_class_typo_and_local_pv_node_gone(ws: Workspace) -> None:
    sc = ws.storage_class("typo", "WaitForFirstConsumer")
    x.bound_pair(ws, b.hostname_affinity("replaced-node-9"))
    ws.create(b.persistent_volume_claim("logs", "1Gi", sc[:-1]))
    ws.create(b.pod("app", ("logs", "data")))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert [c.code for c in e.causes] == ["CLASS_MISSING", "LOCAL_PV_NODE_GONE"]
    agrees(e)


# ---- more single causes and combinations ---------------------------------------------------

@pytest.mark.needs("ephemeral-storage")
def test_selector_that_matches_nothing_and_a_request_too_big(ws: Workspace) -> None:
    ws.create(b.pod("app", node_selector={"disk": "nvme"}, requests={"ephemeral-storage": "100Ti"}))
    e = explained(ws, "app", "POD_AFFINITY_MISMATCH")
    assert [c.code for c in e.causes] == ["POD_SELECTOR_MATCHES_NO_NODE", "INSUFFICIENT_RESOURCES"]
    agrees(e)


def test_memory_beyond_every_node(ws: Workspace) -> None:
    ws.create(b.pod("app", requests={"memory": "100Ti"}))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["INSUFFICIENT_RESOURCES"]
    agrees(e)


def test_scheduler_name_and_volume_in_the_wrong_zone(ws: Workspace) -> None:
    zone_a, zone_b = ws.zones()[0], ws.zones()[1]
    x.bound_pair(ws, b.zone_affinity(zone_a))
    ws.create(b.pod("app", ("data",), node_selector={o.ZONE_KEY: zone_b}, extra_spec={"schedulerName": "nobody"}))
    e = explained_now(ws, "app")
    assert [c.code for c in e.causes] == ["NO_SCHEDULER", "IMMEDIATE_BINDING_WRONG_ZONE"]


def test_node_name_of_a_missing_node_and_a_missing_claim(ws: Workspace) -> None:
    ws.create(b.pod("app", ("never-created",), node_name="no-such-node-43"))
    e = explained_now(ws, "app")
    assert [c.code for c in e.causes] == ["NODE_NAME_MISSING", "CLAIM_MISSING"]


def test_scheduling_gates_fix_releases_the_pod(ws: Workspace, kubectl: Path) -> None:
    ws.create(b.pod("app", extra_spec={"schedulingGates": [{"name": "pvchaos.dev/hold"}]}))
    e = explained_now(ws, "app")
    assert [c.code for c in e.causes] == ["SCHEDULING_GATED"]
    run_fix(ws, kubectl, fixes(e.cause)[0].commands[0])
    scheduled(ws, "app")


def test_released_pv_found_for_a_claim_without_volume_name(ws: Workspace) -> None:
    x.bound_pair(ws, None, claim="old")
    pv = x.bound_volume(ws, "old")
    ws.delete("PersistentVolumeClaim", "old")
    wait_for(ws.kube, "PersistentVolume", o.name(pv), lambda p: o.phase(p) == "Released", "phase Released")
    ws.create(b.persistent_volume_claim("data", "5Gi", "", selector={"matchLabels": ws.case_labels}))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "UNBOUND_IMMEDIATE")
    assert e.cause.code == "PV_RELEASED" and e.cause.facts["pv"] == o.name(pv)
    agrees(e)


def test_claim_being_deleted(ws: Workspace) -> None:
    """pvc-protection keeps a deleted claim while a pod uses it; a second pod cannot start on it."""
    x.bound_pair(ws, None)
    ws.create(b.pod("first", ("data",)))
    wait_for(ws.kube, "Pod", "first", lambda p: bool((p.get("spec") or {}).get("nodeName")), "scheduled", ws.namespace)
    ws.delete("PersistentVolumeClaim", "data", wait=False)
    wait_for(ws.kube, "PersistentVolumeClaim", "data", lambda c: bool(c["metadata"].get("deletionTimestamp")),
             "deleting", ws.namespace)
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", None)
    assert e.cause.code == "CLAIM_TERMINATING"
    agrees(e)


def test_pv_affinity_on_a_label_no_node_has(ws: Workspace) -> None:
    x.bound_pair(ws, b.label_affinity("pvchaos.dev/disk", "nvme"))
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert e.cause.code == "PV_AFFINITY_MATCHES_NO_NODE"
    agrees(e)


def test_missing_claim_and_volume_name_too_small(ws: Workspace) -> None:
    pv = ws.create(b.persistent_volume(ws.name("pv"), "1Gi", labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "5Gi", "", volume_name=o.name(pv)))
    ws.create(b.pod("app", ("never-created", "data")))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["CLAIM_MISSING", "VOLUME_NAME_MISFIT"]
    agrees(e)


def test_zone_selector_and_pod_affinity(ws: Workspace) -> None:
    """Some nodes fail NodeAffinity (modelled), the rest InterPodAffinity (the scheduler's word)."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "no-such-db"}}, "topologyKey": o.ZONE_KEY}]}}
    ws.create(b.pod("app", node_selector={o.ZONE_KEY: ws.zones()[0]}, extra_spec={"affinity": affinity}))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["INTER_POD_AFFINITY"]


def test_two_volumes_neither_reachable(ws: Workspace) -> None:
    x.bound_pair(ws, b.hostname_affinity("replaced-node-8"), claim="one")
    x.bound_pair(ws, b.zone_affinity("zone-gone"), claim="two")
    ws.create(b.pod("app", ("one", "two")))
    e = explained(ws, "app", "NODE_AFFINITY_CONFLICT")
    assert [c.code for c in e.causes] == ["LOCAL_PV_NODE_GONE", "ZONE_WITHOUT_NODES"]
    agrees(e)


@pytest.mark.needs("dynamic-zonal")
def test_wffc_class_pinned_outside_and_missing_claim(ws: Workspace) -> None:
    zone_a, zone_c = ws.zones()[0], ws.zones()[-1]
    sc = ws.storage_class("only-a", "WaitForFirstConsumer", allowed_zones=[zone_a])
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    ws.create(b.pod("app", ("data", "never-created"), node_selector={o.ZONE_KEY: zone_c}))
    e = explained(ws, "app", None)
    assert [c.code for c in e.causes] == ["CLAIM_MISSING", "PINNED_OUTSIDE_ALLOWED_TOPOLOGIES"]
    agrees(e)


def test_read_write_once_pod_claim_held_by_another_pod(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws.create(b.persistent_volume(ws.name("rwop"), "1Gi", access_modes=("ReadWriteOncePod",), labels=ws.case_labels))
    ws.create(b.persistent_volume_claim("data", "1Gi", "", access_modes=("ReadWriteOncePod",),
                                        selector={"matchLabels": ws.case_labels}))
    ws.create(b.pod("holder", ("data",)))
    x.pod_runs(ws, "holder")
    ws.create(b.pod("app", ("data",)))
    e = explained(ws, "app", "RWOP_CONFLICT")
    assert [c.code for c in e.causes] == ["RWOP_CLAIM_IN_USE"]
    code, _ = exit_code(ws, "app", capsys)
    assert code == 1


@pytest.mark.needs("attach", "dynamic-zonal")
@pytest.mark.cluster(csi_max_volumes_per_node=1)
def test_node_at_its_csi_volume_limit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    node = ws.node()
    sc = ws.storage_class("limit", "WaitForFirstConsumer")
    ws.create(b.persistent_volume_claim("first", "1Gi", sc))
    ws.create(b.pod("first", ("first",), node_selector=ws.pin(node)))
    x.pod_runs(ws, "first")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    x.claim_stays_pending(ws, "data", "WAIT_FOR_CONSUMER")  # in the caches before its pod
    ws.create(b.pod("app", ("data",), node_selector=ws.pin(node)))
    e = explained(ws, "app", "MAX_VOLUME_COUNT")
    assert "VOLUME_LIMIT_EXCEEDED" in [c.code for c in e.causes], [c.code for c in e.causes]
    code, _ = exit_code(ws, "app", capsys)
    assert code == 1

"""`pvchaos explain` past scheduling and for CSI reasons (issue 25, item 7): each code
from the event words upstream writes, with the evidence and a fix whose commands name
objects of the scene. The live reproductions are in suites/test_csi_topology.py,
suites/test_capacity.py and suites/test_attach_detach.py (`x.explains`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pvchaos.conformance.explain import explain, explain_placed
from pvchaos.conformance.remedy import fixes
from pvchaos.conformance.verdicts import Scene
from pvchaos.explain import ExplainInputError, explain_view, to_text
from pvchaos.kube.explain_read import ClusterView
from tests.unit.explain_scenes import NODES, NS, command_problems, failed_scheduling, pod, pv, pvc, sc, scene, scene_names

Obj = dict[str, Any]
DRIVER = "csi.pvchaos.dev"
MULTI = ('Multi-Attach error for volume "pvc-1" Volume is already exclusively attached to one node and can\'t be '
         'attached to another')
NOT_REGISTERED = ('MountVolume.MountDevice failed for volume "pvc-1" : kubernetes.io/csi: attacher.MountDevice failed '
                  f'to create newCsiDriverClient: driver name {DRIVER} not found in the list of registered CSI drivers')
TIMED_OUT = ("Unable to attach or mount volumes: unmounted volumes=[v0], unattached volumes=[v0 kube-api-access-x]: "
             "timed out waiting for the condition")


def _event(reason: str, message: str, kind: str = "Pod", name: str = "app", when: str = "2026-12-04T07:00:00Z") -> Obj:
    return {"kind": "Event", "reason": reason, "type": "Warning", "message": message,
            "involvedObject": {"kind": kind, "name": name, "namespace": NS},
            "lastTimestamp": when, "metadata": {"name": f"{name}.{reason}", "namespace": NS}}


def _attachment(volume: str, node: str, error: str | None = None) -> Obj:
    out: Obj = {"kind": "VolumeAttachment", "metadata": {"name": f"csi-{volume}-{node}"},
                "spec": {"attacher": DRIVER, "nodeName": node, "source": {"persistentVolumeName": volume}},
                "status": {"attached": error is None}}
    if error:
        out["status"]["attachError"] = {"message": error, "time": "2026-12-04T07:00:00Z"}
    return out


def _csinode(node: str, drivers: dict[str, list[str]]) -> Obj:
    return {"kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": [{"name": d, "nodeID": node, "topologyKeys": keys} for d, keys in drivers.items()]}}


def _ready(name: str, status: str = "True") -> Obj:
    node = next(dict(n) for n in NODES if n["metadata"]["name"] == name)
    node["status"] = {"conditions": [{"type": "Ready", "status": status}]}
    return node


def _placed(events: list[Obj], attachments: list[Obj] = (), csinodes: list[Obj] = (),
            nodes: list[Obj] | None = None) -> Scene:
    the_pod = pod("data")
    the_pod["spec"]["nodeName"] = "a2"
    s = scene(the_pod, [pvc("data", "zonal", volume="pvc-1", phase="Bound")],
              [pv("pvc-1", claim="data", cls="zonal")], [sc("zonal", provisioner=DRIVER)], nodes=nodes, events=events)
    return replace(s, attachments=list(attachments), csinodes=list(csinodes))


def _commands_ok(s: Scene, code: str) -> None:
    e = explain_placed(s) if s.pod["spec"].get("nodeName") else explain(s)
    assert e is not None and e.cause.code == code, e and [c.code for c in e.causes]
    found = fixes(e.cause)
    assert found, code
    for fix in found:
        for command in fix.commands:
            assert not command_problems(command, scene_names(s), NS), (command, command_problems(
                command, scene_names(s), NS))


def test_multi_attach_names_the_node_that_holds_the_volume_and_the_out_of_service_fix() -> None:
    nodes = [n if n["metadata"]["name"] != "a1" else _ready("a1", "Unknown") for n in NODES]
    s = _placed([_event("FailedAttachVolume", MULTI)], [_attachment("pvc-1", "a1")], nodes=nodes)
    e = explain_placed(s)
    assert e is not None and e.cause.code == "MULTI_ATTACH"
    assert e.cause.facts["holders"] == ["a1"] and e.cause.facts["holders_down"] == ["a1"]
    assert "a1 (Ready Unknown)" in e.cause.summary
    assert any("node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in c for f in fixes(e.cause) for c in f.commands)
    _commands_ok(s, "MULTI_ATTACH")


def test_multi_attach_to_a_live_node_asks_to_remove_the_pod_there_not_to_taint() -> None:
    nodes = [n if n["metadata"]["name"] != "b1" else _ready("b1") for n in NODES]
    s = _placed([_event("FailedAttachVolume", MULTI)], [_attachment("pvc-1", "b1")], nodes=nodes)
    e = explain_placed(s)
    assert e is not None and e.cause.facts["holders_down"] == []
    assert not any("taint" in c for f in fixes(e.cause) for c in f.commands)


def test_attach_failed_carries_the_volume_attachments_error() -> None:
    error = "rpc error: code = NotFound desc = volume pvc-1 not found"
    s = _placed([_event("FailedAttachVolume", f'AttachVolume.Attach failed for volume "pvc-1" : {error}')],
                [_attachment("pvc-1", "a2", error)])
    e = explain_placed(s)
    assert e is not None and e.cause.code == "ATTACH_FAILED" and e.cause.facts["error"] == error
    _commands_ok(s, "ATTACH_FAILED")


def test_a_driver_missing_from_the_nodes_csinode_is_named_with_what_the_csinode_lists() -> None:
    s = _placed([_event("FailedMount", TIMED_OUT, when="2026-12-04T07:02:00Z"),
                 _event("FailedMount", NOT_REGISTERED)], csinodes=[_csinode("a2", {})])
    e = explain_placed(s)
    assert e is not None and e.cause.code == "CSI_DRIVER_NOT_REGISTERED"
    assert e.cause.facts["driver"] == DRIVER and "CSINode a2 lists no drivers" in e.cause.summary
    _commands_ok(s, "CSI_DRIVER_NOT_REGISTERED")


def test_mount_failed_quotes_the_kubelet() -> None:
    message = 'MountVolume.SetUp failed for volume "pvc-1" : rpc error: code = Internal desc = bind mount: permission denied'
    s = _placed([_event("FailedMount", message)])
    e = explain_placed(s)
    assert e is not None and e.cause.code == "MOUNT_FAILED" and message in e.cause.summary
    _commands_ok(s, "MOUNT_FAILED")


def test_the_kubelets_timeout_roll_up_alone_is_its_own_code_and_never_hides_a_step() -> None:
    e = explain_placed(_placed([_event("FailedMount", TIMED_OUT)]))
    assert e is not None and [c.code for c in e.causes] == ["VOLUME_SETUP_TIMEOUT"]
    e = explain_placed(_placed([_event("FailedMount", TIMED_OUT), _event("FailedAttachVolume", MULTI)],
                               [_attachment("pvc-1", "b1")]))
    assert e is not None and [c.code for c in e.causes] == ["MULTI_ATTACH"]


def test_a_placed_pod_with_no_failure_reported_is_not_explained() -> None:
    assert explain_placed(_placed([])) is None


def test_no_available_topology_lists_the_nodes_whose_csinode_lacks_the_driver() -> None:
    message = ('failed to provision volume with StorageClass "imm": error generating accessibility requirements: '
               "no available topology found")
    s = scene(pod("data"), [pvc("data", "imm")], classes=[sc("imm", "Immediate", provisioner=DRIVER)],
              events=[_event("ProvisioningFailed", message, "PersistentVolumeClaim", "data")])
    s = replace(s, csinodes=[_csinode("a1", {DRIVER: []}), _csinode("a2", {"other.csi": ["zone"]})])
    e = explain(s)
    assert e.cause.code == "NO_AVAILABLE_TOPOLOGY", [c.code for c in e.causes]
    gaps = e.cause.facts["gaps"]
    assert gaps["a1"] == f"driver {DRIVER} reports no any topology key"
    assert gaps["a2"] == f"CSINode lists no driver {DRIVER}" and gaps["b1"] == "no CSINode"
    _commands_ok(s, "NO_AVAILABLE_TOPOLOGY")


def test_insufficient_capacity_from_the_schedulers_words_never_fits() -> None:
    message = ("0/4 nodes are available: 4 node(s) did not have enough free storage. preemption: 0/4 nodes are "
               "available: 4 Preemption is not helpful for scheduling.")
    s = scene(pod("data"), [pvc("data", "zonal")], classes=[sc("zonal", provisioner=DRIVER)],
              events=[failed_scheduling(message)])
    e = explain(s)
    assert e.cause.code == "INSUFFICIENT_CAPACITY" and not e.schedulable, [c.code for c in e.causes]
    _commands_ok(s, "INSUFFICIENT_CAPACITY")


def _view(s: Scene) -> ClusterView:
    return ClusterView(pods=[s.pod], claims=dict(s.claims), pvs=list(s.pvs), classes=dict(s.classes),
                       nodes=list(s.nodes), events=list(s.events), minor=35, attachments=list(s.attachments),
                       csinodes=list(s.csinodes))


def test_the_command_explains_a_placed_pod_and_refuses_one_with_no_failure() -> None:
    s = _placed([_event("FailedAttachVolume", MULTI)], [_attachment("pvc-1", "b1")])
    (e,) = explain_view(_view(s), "app", NS)
    text = to_text(e)
    assert "[MULTI_ATTACH]" in text and "placed the pod on node a2" in text and "nodes (" not in text
    assert [x.cause.code for x in explain_view(_view(s), None, NS)] == ["MULTI_ATTACH"]  # --all-pending
    with pytest.raises(ExplainInputError, match="scheduled, not waiting for the scheduler"):
        explain_view(_view(_placed([])), "app", NS)

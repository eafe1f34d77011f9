"""The CSI call fault (chaos/csi_calls.py): one rule per fault in the proxy's rules file,
in the shape the proxy reads (proxy/rules.go refuses unknown fields), removed exactly by
its restore, other faults' rules kept; bad input refused before anything is written."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pvchaos.chaos import csi_calls
from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.kube.cleanup import Cleanup


@dataclass
class Target:
    cluster: ClusterHandle
    cleanup: Cleanup = field(default_factory=Cleanup)
    kube: Any = None


def _target(tmp_path: Path) -> Target:
    csi.paths_for(tmp_path).root.mkdir(parents=True)
    return Target(ClusterHandle(name="c", backend="local", kubeconfig=tmp_path / "kubeconfig", context=None,
                                k8s_version="v1.35.4", capabilities=frozenset(), directory=tmp_path))


def _rules(tmp_path: Path) -> list[dict]:
    return json.loads(csi.paths_for(tmp_path).proxy_rules.read_text())["rules"]


def test_each_fault_is_one_rule_and_its_restore_removes_only_it(tmp_path: Path) -> None:
    ws = _target(tmp_path)
    a = csi_calls.csi_call_fault(ws, "ControllerPublishVolume", code="Internal", node_id="n2", rule_id="a")
    csi_calls.csi_call_fault(ws, "CreateVolume", code="ResourceExhausted", segment={"zone": "z1"}, rule_id="b")
    assert _rules(tmp_path) == [
        {"id": "a", "method": "ControllerPublishVolume", "action": "error", "code": "Internal",
         "message": "pvchaos fault: error Internal", "node_id": "n2"},
        {"id": "b", "method": "CreateVolume", "action": "error", "code": "ResourceExhausted",
         "message": "pvchaos fault: error ResourceExhausted", "segment": {"zone": "z1"}}]
    a.restore()
    assert [r["id"] for r in _rules(tmp_path)] == ["b"]
    ws.cleanup.run()  # the unrestored one goes at teardown
    assert _rules(tmp_path) == []


def test_calls_reads_the_proxy_log_by_rule(tmp_path: Path) -> None:
    ws = _target(tmp_path)
    csi.paths_for(tmp_path).proxy_log.write_text(
        '{"method": "/csi.v1.Controller/CreateVolume", "code": "OK"}\n{"event": "rules loaded"}\n'
        '{"method": "/csi.v1.Controller/CreateVolume", "code": "Internal", "rule": "x"}\nnot json\n')
    assert len(csi_calls.calls(ws.cluster)) == 2
    assert [r["code"] for r in csi_calls.calls(ws.cluster, rule="x")] == ["Internal"]


@pytest.mark.parametrize("kwargs", [
    {"method": ""}, {"method": "M", "action": "explode"}, {"method": "M", "code": "NoSuch"},
    {"method": "M", "action": "delay"}, {"method": "M", "action": "hang", "probability": 1.5},
])
def test_bad_rules_are_refused_before_anything_is_written(tmp_path: Path, kwargs: dict) -> None:
    ws = _target(tmp_path)
    method = kwargs.pop("method")
    with pytest.raises(ValueError):
        csi_calls.csi_call_fault(ws, method, **kwargs)
    assert not csi.paths_for(tmp_path).proxy_rules.exists()


def test_a_cluster_without_the_stack_or_node_plugins_is_refused(tmp_path: Path) -> None:
    ws = Target(ClusterHandle(name="c", backend="existing", kubeconfig=tmp_path / "k", context=None,
                              k8s_version="v1.35.4", capabilities=frozenset()))
    with pytest.raises(ClusterError, match="no host-side CSI stack"):
        csi_calls.csi_call_fault(ws, "CreateVolume", code="Internal")
    with pytest.raises(ClusterError, match="no node-side CSI proxy"):
        csi_calls.csi_call_fault(ws, "NodeStageVolume", code="Internal", where="n1")

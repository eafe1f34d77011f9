"""Every fault one shape (chaos/fault.py): the undo is registered before the injection,
`restore()` runs it once and takes it off the cleanup stack, and an unrestored fault is
undone at teardown. Optional faults are found by capability and type, not by getattr."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pvchaos.chaos import components, nodes
from pvchaos.clusters.backend import Capability, ClusterHandle
from pvchaos.kube.cleanup import Cleanup


@dataclass
class FakeFaults:
    log: list[str] = field(default_factory=list)
    stopped: set[str] = field(default_factory=set)
    broken: bool = False  # start_node fails

    def stop_node(self, node: str) -> None:
        self.log.append(f"stop {node}")
        self.stopped.add(node)

    def stop_nodes(self, names: list[str]) -> None:
        for n in names:
            self.stop_node(n)

    def start_node(self, node: str) -> None:
        if self.broken:
            raise RuntimeError("boom")
        self.log.append(f"start {node}")
        self.stopped.discard(node)

    def node_stopped(self, node: str) -> bool:
        return node in self.stopped

    def stop_component(self, component: str) -> None:
        self.log.append(f"stop {component}")

    def start_component(self, component: str) -> None:
        self.log.append(f"start {component}")


@dataclass
class Target:
    cluster: ClusterHandle
    cleanup: Cleanup = field(default_factory=Cleanup)
    kube: Any = None


def target(faults: Any, *caps: str) -> Target:
    return Target(ClusterHandle(name="c", backend="fake", kubeconfig=Path("/x"), context=None, k8s_version="v1.35.4",
                                capabilities=frozenset(caps), faults=faults))


def test_restore_runs_the_undo_once_and_takes_it_off_the_stack() -> None:
    faults = FakeFaults()
    ws = target(faults)
    fault = nodes.fail_node(ws, "n1")
    assert faults.log == ["stop n1"] and len(ws.cleanup) == 1 and fault.touched == ("n1",)
    fault.restore()
    fault.restore()
    assert faults.log == ["stop n1", "start n1"] and len(ws.cleanup) == 0 and fault.restored
    ws.cleanup.run()
    assert faults.log == ["stop n1", "start n1"]  # the teardown does not restore it again


def test_an_unrestored_fault_is_undone_at_teardown() -> None:
    faults = FakeFaults()
    ws = target(faults)
    stopped = components.stop_component(ws, "kube-scheduler")
    ws.cleanup.run()
    assert faults.log == ["stop kube-scheduler", "start kube-scheduler"] and stopped.restored
    stopped.restore()
    assert faults.log == ["stop kube-scheduler", "start kube-scheduler"]


def test_a_fault_on_several_nodes_has_a_part_per_node() -> None:
    faults = FakeFaults()
    ws = target(faults)
    outage = nodes.fail_nodes(ws, ["a", "b"], "zone z")  # type: ignore[list-item]
    assert outage.touched == ("a", "b") and len(ws.cleanup) == 2
    outage.parts[0].restore()
    assert len(ws.cleanup) == 1 and faults.stopped == {"b"}
    outage.restore()
    assert len(ws.cleanup) == 0 and faults.stopped == set()
    assert faults.log == ["stop a", "stop b", "start a", "start b"]


def test_a_failed_undo_stays_on_the_stack() -> None:
    faults = FakeFaults()
    ws = target(faults)
    fault = nodes.fail_node(ws, "n1")
    faults.broken = True
    with pytest.raises(RuntimeError):
        fault.restore()
    assert len(ws.cleanup) == 1 and not fault.restored


def test_container_faults_are_a_capability() -> None:
    with pytest.raises(RuntimeError, match="backend fake: no container-faults"):
        nodes.crash_node(target(FakeFaults(), Capability.CONTAINER_FAULTS), "n1")  # has the word, not the type
    with pytest.raises(RuntimeError, match="no container-faults"):
        nodes.partition_node(target(FakeFaults()), "n1")

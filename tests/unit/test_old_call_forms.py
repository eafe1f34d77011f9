"""Every public fault injector whose signature changed in 0.2 (the workspace first,
a `Fault` back) is called the way 0.1 documented it (docs/writing-suites.md's API
reference before the change: the cleanup stack and a client or cluster handle first,
a plain value back). Each call must still work until 0.3: a DeprecationWarning that
points at the calling line, 0.1's return value, the fault in place, and its undo on the
cleanup stack that was passed, run by that stack. No cluster: a fake client and fake
node faults (issue #39)."""

from __future__ import annotations

import inspect
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import pvchaos
from pvchaos import api
from pvchaos.chaos import components, csi_capacity, labels, nodes
from pvchaos.chaos.old_forms import REMOVED_IN
from pvchaos.clusters import csi
from pvchaos.clusters.backend import Capability, ClusterHandle
from pvchaos.clusters.topology import ZONE_KEY
from pvchaos.kube.cleanup import Cleanup

ROOT = Path(__file__).resolve().parents[2]

# name -> its 0.1 parameters, as the 0.1 API reference printed them (before 8a6143a, 9414e6f, 236207e)
DOCUMENTED_0_1 = {
    "pvchaos.chaos.nodes.fail_node": "cleanup, cluster, node",
    "pvchaos.chaos.nodes.crash_node": "cleanup, cluster, node",
    "pvchaos.chaos.nodes.partition_node": "cleanup, cluster, node",
    "pvchaos.chaos.nodes.fail_nodes": "cleanup, cluster, nodes, what",
    "pvchaos.chaos.nodes.zone_outage": "cleanup, cluster, kube, zone",
    "pvchaos.chaos.nodes.cluster_outage": "cleanup, cluster, kube",
    "pvchaos.chaos.labels.set_node_labels": "cleanup, kube, node, changes",
    "pvchaos.chaos.labels.add_taint": "cleanup, kube, node, taint",
    "pvchaos.chaos.labels.cordon": "cleanup, kube, node",
    "pvchaos.chaos.components.stop_component": "cleanup, cluster, component",
    "pvchaos.chaos.csi_capacity.set_zone_capacity": "cleanup, cluster, zone, quantity",
}


# ---- stubs: a client of three nodes, node faults that log ------------------------------------

@dataclass
class FakeKube:
    nodes: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        n: {"metadata": {"name": n, "labels": {ZONE_KEY: z, "disk": "ssd"}},
            "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}}
        for n, z in (("a1", "zone-a"), ("a2", "zone-a"), ("b1", "zone-b"))})


def _merge(into: dict[str, Any], body: dict[str, Any]) -> None:
    for k, v in body.items():
        if v is None:
            into.pop(k, None)
        elif isinstance(v, dict):
            _merge(into.setdefault(k, {}), v)
        else:
            into[k] = v


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()

    def get(k: FakeKube, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return k.nodes.get(name)

    def patch(k: FakeKube, kind: str, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        _merge(k.nodes[name], body)
        return k.nodes[name]

    def list_objects(k: FakeKube, kind: str, namespace: str | None = None, label_selector: str = "",
                     **kw: Any) -> tuple[list[dict[str, Any]], str]:
        items = list(k.nodes.values())
        if label_selector:
            key, value = label_selector.split("=")
            items = [n for n in items if n["metadata"]["labels"].get(key) == value]
        return items, "1"

    for module in (labels, nodes):
        monkeypatch.setattr(module.kinds, "get", get)
        monkeypatch.setattr(module.kinds, "patch", patch)
        monkeypatch.setattr(module.kinds, "list_objects", list_objects)
    return fake


@dataclass
class FakeFaults:
    log: list[str] = field(default_factory=list)
    stopped: set[str] = field(default_factory=set)

    def stop_node(self, node: str) -> None:
        self.log.append(f"stop {node}")
        self.stopped.add(node)

    def stop_nodes(self, names: list[str]) -> None:
        for n in names:
            self.stop_node(n)

    def start_node(self, node: str) -> None:
        self.log.append(f"start {node}")
        self.stopped.discard(node)

    def node_stopped(self, node: str) -> bool:
        return node in self.stopped

    def crash_node(self, node: str) -> None:
        self.log.append(f"crash {node}")

    def partition_node(self, node: str) -> None:
        self.log.append(f"partition {node}")

    def stop_component(self, component: str) -> None:
        self.log.append(f"stop {component}")

    def start_component(self, component: str) -> None:
        self.log.append(f"start {component}")


@pytest.fixture
def cluster(tmp_path: Path) -> ClusterHandle:
    csi.paths_for(tmp_path).root.mkdir(parents=True)  # the harness driver's control directory exists
    return ClusterHandle(name="c", backend="fake", kubeconfig=tmp_path / "kubeconfig", context=None,
                         k8s_version="v1.35.4", capabilities=frozenset({Capability.CONTAINER_FAULTS}),
                         faults=FakeFaults(), directory=tmp_path)


def called_the_old_way(call: Callable[[], Any]) -> tuple[Any, warnings.WarningMessage]:
    """The call's result and its one warning; the warning must name this file and the
    line of ``call``'s body (the caller's line, not pvchaos's)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = call()
    deprecations = [w for w in seen if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in seen]
    warning = deprecations[0]
    lines, first = inspect.getsourcelines(call)
    assert warning.filename == __file__
    assert first <= warning.lineno < first + len(lines), (warning.lineno, first)
    assert f"goes away in pvchaos {REMOVED_IN}" in str(warning.message) and "(ws, ...)" in str(warning.message)
    return result, warning


# ---- each function, as 0.1 documented it -----------------------------------------------------

def test_set_node_labels(kube: FakeKube) -> None:
    cleanup = Cleanup()
    previous, _ = called_the_old_way(lambda: labels.set_node_labels(cleanup, kube, "a1", {"disk": "nvme", "new": "x"}))
    assert previous == {"disk": "ssd", "new": None}
    assert kube.nodes["a1"]["metadata"]["labels"]["disk"] == "nvme"
    cleanup.run()
    assert kube.nodes["a1"]["metadata"]["labels"] == {ZONE_KEY: "zone-a", "disk": "ssd"}


def test_set_node_labels_by_keyword(kube: FakeKube) -> None:
    cleanup = Cleanup()
    previous, _ = called_the_old_way(lambda: labels.set_node_labels(cleanup=cleanup, kube=kube, node="a1",
                                                                    changes={"disk": None}))
    assert previous == {"disk": "ssd"} and "disk" not in kube.nodes["a1"]["metadata"]["labels"]


def test_add_taint(kube: FakeKube) -> None:
    cleanup = Cleanup()
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    others, _ = called_the_old_way(lambda: labels.add_taint(cleanup, kube, "b1", taint))
    assert others == [{"key": "other", "effect": "NoSchedule"}]
    assert taint in kube.nodes["b1"]["spec"]["taints"]
    cleanup.run()
    assert kube.nodes["b1"]["spec"]["taints"] == [{"key": "other", "effect": "NoSchedule"}]


def test_cordon(kube: FakeKube) -> None:
    cleanup = Cleanup()
    result, _ = called_the_old_way(lambda: labels.cordon(cleanup, kube, "a2"))
    assert result is None and kube.nodes["a2"]["spec"]["unschedulable"] is True
    cleanup.run()
    assert "unschedulable" not in kube.nodes["a2"]["spec"]


@pytest.mark.parametrize(("name", "verb"), [("fail_node", "stop"), ("crash_node", "crash"),
                                            ("partition_node", "partition")])
def test_one_node_faults(cluster: ClusterHandle, name: str, verb: str) -> None:
    cleanup = Cleanup()
    inject = getattr(nodes, name)
    node, _ = called_the_old_way(lambda: inject(cleanup, cluster, "a1"))
    assert node == "a1" and cluster.faults.log == [f"{verb} a1"]  # type: ignore[union-attr]
    cleanup.run()
    assert cluster.faults.log[-1] == "start a1"  # type: ignore[union-attr]


def test_fail_nodes(cluster: ClusterHandle) -> None:
    cleanup = Cleanup()
    failed, _ = called_the_old_way(lambda: nodes.fail_nodes(cleanup, cluster, ["a1", "b1"], "two"))
    assert failed == ["a1", "b1"] and cluster.faults.stopped == {"a1", "b1"}  # type: ignore[union-attr]
    cleanup.run()
    assert cluster.faults.stopped == set()  # type: ignore[union-attr]


def test_zone_outage(cluster: ClusterHandle, kube: FakeKube) -> None:
    cleanup = Cleanup()
    failed, _ = called_the_old_way(lambda: nodes.zone_outage(cleanup, cluster, kube, "zone-a"))
    assert failed == ["a1", "a2"] and cluster.faults.stopped == {"a1", "a2"}  # type: ignore[union-attr]
    cleanup.run()
    assert cluster.faults.stopped == set()  # type: ignore[union-attr]


def test_cluster_outage(cluster: ClusterHandle, kube: FakeKube) -> None:
    cleanup = Cleanup()
    failed, _ = called_the_old_way(lambda: nodes.cluster_outage(cleanup, cluster, kube))
    assert failed == ["a1", "a2", "b1"] and len(cluster.faults.stopped) == 3  # type: ignore[union-attr]
    cleanup.run()
    assert cluster.faults.stopped == set()  # type: ignore[union-attr]


def test_stop_component(cluster: ClusterHandle) -> None:
    cleanup = Cleanup()
    name, _ = called_the_old_way(lambda: components.stop_component(cleanup, cluster, "kube-scheduler"))
    assert name == "kube-scheduler" and cluster.faults.log == ["stop kube-scheduler"]  # type: ignore[union-attr]
    cleanup.run()
    assert cluster.faults.log[-1] == "start kube-scheduler"  # type: ignore[union-attr]


def test_set_zone_capacity(cluster: ClusterHandle) -> None:
    cleanup = Cleanup()
    path = csi.paths_for(cluster.directory).control_dir / csi_capacity.CAPACITY_FILE  # type: ignore[arg-type]
    in_force, _ = called_the_old_way(lambda: csi_capacity.set_zone_capacity(cleanup, cluster, "zone-a", "5Gi"))
    assert in_force == {"zone-a": "5Gi"} and '"zone-a": "5Gi"' in path.read_text()
    cleanup.run()
    assert path.read_text() == "{}"


# ---- the new form does not warn; the table is complete; the version is one --------------------

def test_the_new_form_does_not_warn(kube: FakeKube) -> None:
    @dataclass
    class Ws:
        kube: Any
        cluster: Any = None
        cleanup: Cleanup = field(default_factory=Cleanup)

    ws = Ws(kube)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fault = labels.set_node_labels(ws, "a1", {"disk": "nvme"})
    fault.restore()
    assert kube.nodes["a1"]["metadata"]["labels"]["disk"] == "ssd" and len(ws.cleanup) == 0


# injectors that did not exist in 0.1, so have no old form
NEW_IN_0_2 = {"pvchaos.chaos.csi_calls.csi_call_fault", "pvchaos.chaos.nodes.stop_kubelet"}


def test_every_injector_that_takes_the_workspace_has_its_0_1_form_tested() -> None:
    """A public fault injector whose first parameter is the workspace: each had a 0.1 form
    (the table above, from the old API reference), and each is called here."""
    taking_ws = set()
    for module_name in (m for m in api.PUBLIC_MODULES if m.startswith("pvchaos.chaos.")):
        module = __import__(module_name, fromlist=["_"])
        for name, obj in vars(module).items():
            if inspect.isfunction(obj) and not name.startswith("_") and obj.__module__ == module_name:
                if list(inspect.signature(obj).parameters)[:1] == ["ws"]:
                    taking_ws.add(f"{module_name}.{name}")
    assert taking_ws - NEW_IN_0_2 == set(DOCUMENTED_0_1)
    tested = inspect.getsource(__import__(__name__, fromlist=["_"]))
    for qualified in DOCUMENTED_0_1:
        assert qualified.rsplit(".", 1)[1] in tested


def test_the_package_version_is_the_one_the_docs_speak_of() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == pvchaos.__version__ == "0.2.0"
    docs = (ROOT / "docs" / "writing-suites.md").read_text()
    minor = ".".join(pvchaos.__version__.split(".")[:2])
    assert f"in {minor}" in docs and f"until {REMOVED_IN}" in docs and f"({pvchaos.__version__})" in docs

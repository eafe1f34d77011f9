"""A test's corner of a cluster: its namespace, the objects it created, their cleanup,
and the driver and topology it runs with.

Every object is labelled as the harness's (so a sweeper finds leftovers) and its
deletion is registered the moment it exists. Reads return Kubernetes JSON dicts.

Thread safety: `create`, `create_all`, `delete`, `delete_all`, `get`, `list` and `patch`
may be called from several threads at once (a stress suite's arrivals): the client is
thread-safe and the cleanup stack takes a lock. Deleting through the workspace drops the
object's undo, so nothing is deleted twice at teardown.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from pvchaos.clusters.backend import HOSTPATH_VOLUME_ROOT, Capability, ClusterHandle
from pvchaos.conformance import topology_class as tc
from pvchaos.drivers.driver import Driver, HarnessDriver
from pvchaos.kube import builders, kinds, naming
from pvchaos.kube import objects as o
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import wait_gone

# deleting these ends what a test did with the driver's volumes (Workspace.before_delete)
_VOLUME_USERS = frozenset({"PersistentVolumeClaim", "Pod", "StatefulSet", "Deployment"})


@dataclass(frozen=True)
class DriverTopology:
    """The driver's topology as the cluster shows it (pvchaos/conformance/topology_class.py):
    its keys, its class, and its domains (key value -> node names)."""

    keys: tuple[str, ...]
    cls: tc.TopologyClass
    key: str | None  # the key whose values name the domains (None: class none)
    domains: dict[str, frozenset[str]]

    def domain_of(self, node: str) -> str:
        """The domain value a node is in."""
        return next(v for v, names in self.domains.items() if node in names)


class Workspace:
    """Creates objects for one test and guarantees they are deleted afterwards."""

    def __init__(self, kube: Kube, cluster: ClusterHandle, test_name: str, cleanup: Cleanup,
                 driver: Driver | None = None):
        self.kube = kube
        self.cluster = cluster
        self.driver: Driver = driver or HarnessDriver(cluster)
        self.test_name = test_name
        self.cleanup = cleanup
        self.labels = naming.owned_labels(test_name)
        self.namespace = naming.unique(test_name)
        self.cluster_scoped: list[tuple[str, str]] = []
        self.exempt_pods: set[str] = set()  # "ns/name" of pods that knowingly break invariants
        self._topology: DriverTopology | None = None  # the driver's, read on first use (topology())
        # called with the kind before the test deletes its claims or pods: the plugin reads
        # the driver's volumes there, since a test that deletes its own leaves no evidence
        self.before_delete: list[Callable[[str], None]] = []
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})

    @property
    def case_labels(self) -> dict[str, str]:
        """A label unique to this test, to keep class-less PVs of parallel tests apart."""
        return {"pvchaos.dev/case": self.namespace[-20:].strip("-.")}

    def name(self, hint: str) -> str:
        """A cluster-unique name for a cluster-scoped object (PV, StorageClass)."""
        return naming.unique(hint)

    def _ns(self, kind: str) -> str | None:
        return self.namespace if kinds.kind(kind).namespaced else None

    # ---- objects ---------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        meta["labels"] = {**self.labels, **(meta.get("labels") or {})}
        namespace = self._ns(kind)
        if kind == "PersistentVolume" and self.cluster.mountable_volumes:
            obj = builders.mountable(obj, HOSTPATH_VOLUME_ROOT)
        created = kinds.create(self.kube, obj, namespace)
        name = created["metadata"]["name"]
        self.cleanup.push(f"delete {kind} {name}", lambda: kinds.delete(self.kube, kind, name, namespace),
                          key=(kind, namespace, name))
        if namespace is None and kind != "Namespace":
            self.cluster_scoped.append((kind, name))
        return created

    def create_all(self, objs: Iterable[Obj], parallel: int = 1) -> list[Obj]:
        """Create many objects (a stress scenario's N claims and pods), each with its
        cleanup, in order; `parallel` > 1 sends that many requests at once (results keep
        the input's order; the first error is raised after the others finished)."""
        if parallel <= 1:
            return [self.create(obj) for obj in objs]
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="ws-create") as pool:
            return list(pool.map(self.create, list(objs)))

    def get(self, kind: str, name: str) -> Obj | None:
        return kinds.get(self.kube, kind, name, self._ns(kind))

    def list(self, kind: str, **selectors: Any) -> builtins.list[Obj]:
        """Objects of a kind in this test's namespace (cluster-wide for a cluster-scoped kind)."""
        return kinds.list_objects(self.kube, kind, self._ns(kind), **selectors)[0]

    def delete(self, kind: str, name: str, wait: bool = True, timeout: float = 60, graceful: bool = False) -> None:
        """Delete an object of this test (and drop its undo: teardown will not delete it again).
        A pod goes at once (grace 0) unless `graceful`: then with its own
        terminationGracePeriodSeconds, and the kubelet removes it only once its containers
        stopped and its volumes were torn down."""
        self._observe(kind)
        self._delete(kind, name, wait, timeout, None if graceful else 0)

    def _observe(self, kind: str) -> None:
        if kind in _VOLUME_USERS:
            for hook in self.before_delete:
                hook(kind)

    def _delete(self, kind: str, name: str, wait: bool, timeout: float, grace: int | None = 0) -> None:
        namespace = self._ns(kind)
        kinds.delete(self.kube, kind, name, namespace, grace)
        self.cleanup.discard((kind, namespace, name))
        if wait:
            wait_gone(self.kube, kind, name, namespace, timeout)

    def delete_all(self, kind: str, names: Iterable[str], wait: bool = True, timeout: float = 120,
                   parallel: int = 8) -> None:
        """Delete many objects of one kind (a round of a round-based suite), `parallel` at a
        time, dropping each undo; with `wait`, return once all are gone."""
        listed = list(names)
        self._observe(kind)
        with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="ws-delete") as pool:
            list(pool.map(lambda n: self._delete(kind, n, False, timeout), listed))
        if wait:
            for n in listed:
                wait_gone(self.kube, kind, n, self._ns(kind), timeout)

    def patch(self, kind: str, name: str, body: Obj, dry_run: bool = False) -> Obj:
        """A merge patch, exactly what `kubectl patch --type merge` sends."""
        return kinds.patch(self.kube, kind, name, body, self._ns(kind), dry_run)

    def replace(self, obj: Obj) -> Obj:
        """A full update (PUT), for changes a merge patch cannot express."""
        return kinds.replace(self.kube, obj, self._ns(obj["kind"]))

    def exempt(self, *pods: str) -> None:
        """Pods that knowingly break an invariant (placed before an IgnoredDuringExecution change)."""
        self.exempt_pods.update(f"{self.namespace}/{p}" for p in pods)

    # ---- the driver ------------------------------------------------------------------

    def storage_class(self, hint: str = "dynamic", binding_mode: str = "WaitForFirstConsumer",
                      allowed_zones: Sequence[str] | None = None, reclaim: str | None = None,
                      allowed_topologies: Mapping[str, Sequence[str]] | None = None,
                      parameters: Mapping[str, str] | None = None, name: str | None = None) -> str:
        """Create the driver's dynamic-provisioning class for this test; returns its name.
        `parameters` are added to the driver's own (e.g. `b.provisioning_failures(...)`).
        `name`: exactly this name, for a class a claim named before it existed (take it
        from `ws.name(hint)` so parallel tests cannot collide). An Immediate class of a driver
        that provisions only for scheduled pods skips the test as not applicable."""
        if binding_mode == "Immediate" and self.cluster.has(Capability.WFFC_ONLY):
            pytest.skip(f"driver {self.driver.name}: not applicable: it provisions only for the node a pod was "
                        "scheduled to (per-node external-provisioner with --node-deployment-immediate-binding=false), "
                        "and the test needs an Immediate claim of its class")
        body = self.driver.storage_class(name or self.name(hint), binding_mode, allowed_zones, reclaim,
                                         allowed_topologies)
        if parameters:
            body["parameters"] = {**body.get("parameters", {}), **parameters}
        return str(self.create(body)["metadata"]["name"])

    def local_class(self, hint: str = "local-dyn", reclaim: str | None = None) -> str:
        """Create the driver's node-local class (volumes pinned to one node); returns its name."""
        return str(self.create(self.driver.local_class(self.name(hint), reclaim))["metadata"]["name"])

    def snapshot_class(self, hint: str = "snaps") -> str:
        """Create the driver's VolumeSnapshotClass for this test; returns its name."""
        return str(self.create(self.driver.snapshot_class(self.name(hint)))["metadata"]["name"])

    def volume_attributes_class(self, hint: str = "vac") -> str:
        """Create the driver's VolumeAttributesClass for this test; returns its name."""
        return str(self.create(self.driver.volume_attributes_class(self.name(hint)))["metadata"]["name"])

    def no_provisioner_class(self, hint: str = "static", binding_mode: str = "WaitForFirstConsumer",
                             name: str | None = None) -> str:
        """Create a class with no provisioner (`kubernetes.io/no-provisioner`), as local PVs
        and other static volumes use; returns its name."""
        body = builders.storage_class(name or self.name(hint), builders.NO_PROVISIONER, binding_mode)
        return str(self.create(body)["metadata"]["name"])

    # ---- topology, read from the cluster (never hard-coded node names) ------------------

    def nodes(self, zone: str | None = None) -> builtins.list[Obj]:
        """The nodes workloads run on, sorted by name, optionally of one zone. A
        control-plane Node (kind's; tainted, in no zone) is left out."""
        nodes = sorted((n for n in self.list("Node") if not o.is_control_plane(n)), key=o.name)
        return [n for n in nodes if zone is None or o.zone(n) == zone]

    def zones(self) -> builtins.list[str]:
        """The zones the nodes are in, sorted."""
        return sorted({z for n in self.nodes() if (z := o.zone(n))})

    def node(self, zone: str | None = None, index: int = 0) -> Obj:
        """The `index`-th node (by name) of `zone`, or of the cluster."""
        nodes = self.nodes(zone)
        if len(nodes) <= index:
            raise LookupError(f"no node #{index} {'in ' + zone if zone else ''}: nodes {[o.name(n) for n in nodes]}")
        return nodes[index]

    def topology(self) -> DriverTopology:
        """The run's driver's topology keys (from the workers' CSINodes; a driver that
        registers nowhere, as the old test double, falls back to its profile's keys or the
        zone key), its class and its domains."""
        if self._topology is not None:  # read once per test: a suite asks for it per claim
            return self._topology
        nodes = self.nodes()
        csinodes = self.list("CSINode")
        keys = tc.driver_keys(csinodes, self.driver.name)
        if not keys and not any(self.driver.name == d.get("name") for c in csinodes
                                for d in (c.get("spec") or {}).get("drivers") or []):
            keys = tuple(getattr(getattr(self.driver, "profile", None), "topology_keys", ()) or (o.ZONE_KEY,))
        cls = tc.topology_class(keys, nodes)
        self._topology = DriverTopology(keys, cls, tc.domain_key(cls, keys, nodes), tc.domains(cls, keys, nodes))
        return self._topology

    def pin(self, node: Obj) -> dict[str, str]:
        """A nodeSelector that puts a pod on this node (by its hostname label, which may
        differ from the node's name)."""
        return {o.HOSTNAME_KEY: o.hostname(node)}

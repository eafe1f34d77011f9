"""A cluster someone else runs: reach it, discover what it can do, never disturb it uninvited.

Platform teams run the suites on clusters they already have. Such a cluster is not ours,
so nothing is assumed: zones come from node labels, storage classes from the API, and the
MutablePVNodeAffinity gate from a server-side dry-run update of a harness-owned probe PV
(the only way to learn an apiserver flag from outside; the dry run changes nothing and the
probe is deleted at once). Disruptive suites need an explicit allow-list (see
`disruption_refusal`), and node labels are only declared changeable when it allows them.
"""

from __future__ import annotations

import argparse
import secrets
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from pvchaos.clusters.backend import Capability, ClusterError, ClusterHandle
from pvchaos.clusters.common.gates import MUTABLE_PV_GATE
from pvchaos.clusters.common.provisioners import LOCAL_PROVISIONER, ZONAL_PROVISIONER
from pvchaos.clusters.csi import DRIVER_NAME
from pvchaos.clusters.provider import Feature, Teardown
from pvchaos.clusters.topology import KWOK_ANNOTATION, OWNER_LABEL, ZONE_KEY
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, as_dict, connect
from pvchaos.kube.errors import ApiError, ConditionNotReached
from pvchaos.kube.wait import wait_gone

CONNECT_TIMEOUT = 5.0
PROBE_PREFIX = "pvchaos-probe-"
NAMESPACE_PREFIX = "pvchaos-"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
DISRUPTIVE_SUITES = ("node faults", "zone outages", "node label changes", "component restarts")
# Provisioners known to write zonal or hostname PV affinity; anything else needs a driver profile.
KNOWN_PROVISIONERS = {
    DRIVER_NAME: Capability.DYNAMIC_ZONAL,  # and node-local too, by class parameter (below)
    ZONAL_PROVISIONER: Capability.DYNAMIC_ZONAL,
    LOCAL_PROVISIONER: Capability.DYNAMIC_LOCAL,
    "rancher.io/local-path": Capability.DYNAMIC_LOCAL,
}


# ---- reaching the cluster ------------------------------------------------------------

def _read_kubeconfig(kubeconfig: Path, context: str | None) -> tuple[str, str]:
    """(context name, server URL), or a one-line ClusterError; reads no credentials out."""
    if not kubeconfig.is_file():
        raise ClusterError(f"kubeconfig {kubeconfig} does not exist")
    try:
        data = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"kubeconfig {kubeconfig}: not readable YAML ({type(exc).__name__})") from None
    contexts = {c.get("name"): c.get("context") or {} for c in data.get("contexts") or [] if isinstance(c, dict)}
    known = ", ".join(sorted(map(str, contexts))) or "none"
    name = context or data.get("current-context")
    if not name:
        raise ClusterError(f"kubeconfig {kubeconfig}: no current-context; pass --context (contexts: {known})")
    if name not in contexts:
        raise ClusterError(f"kubeconfig {kubeconfig}: no context {name!r} (contexts: {known})")
    clusters = {c.get("name"): c.get("cluster") or {} for c in data.get("clusters") or [] if isinstance(c, dict)}
    server = clusters.get(contexts[name].get("cluster"), {}).get("server")
    if not server:
        raise ClusterError(f"kubeconfig {kubeconfig}: context {name!r} names no cluster with a server")
    return name, str(server)


def _reachable(context: str, server: str, timeout: float) -> None:
    """A TCP connect first, so an unreachable server fails in `timeout`, not after retries."""
    url = urlsplit(server)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(f"context {context!r}: API server {server} unreachable: {reason}") from None


def _api_error(exc: ApiError) -> str:
    """Status and reason only: an ApiError's text carries headers, never put it in a report."""
    return f"{exc.status} {exc.reason}"


def open_cluster(kubeconfig: Path, context: str | None, timeout: float = CONNECT_TIMEOUT) -> tuple[Kube, str, str, str]:
    """(client, context, server, version) after checking each step with a one-line error."""
    name, server = _read_kubeconfig(kubeconfig, context)
    _reachable(name, server, timeout)
    try:
        kube = connect(kubeconfig, name, timeout=timeout)
        version = kube.version.get_code(_request_timeout=timeout).git_version
    except ApiError as exc:
        raise ClusterError(f"context {name!r}: API server {server} answered {_api_error(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - config and transport errors, reported in one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ClusterError(f"context {name!r}: cannot talk to {server}: {type(exc).__name__}: {first[:200]}") from None
    return kube, name, server, version


# ---- discovery -----------------------------------------------------------------------

def _probe_body(name: str, zone: str) -> dict[str, Any]:
    """An inert PV: no class or claim can bind it, its CSI driver does not exist."""
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {OWNER_LABEL: "true", "pvchaos.dev/probe": "mutable-pv-affinity"}},
        "spec": {
            "capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": name,
            "csi": {"driver": "probe.pvchaos.dev", "volumeHandle": name},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone]}]}]}},
        },
    }


def _delete_probe(kube: Kube, name: str, timeout: float = 10.0) -> None:
    """Delete and wait until gone; the pv-protection finalizer guards bound PVs, and this
    one never bound, so it is dropped if no controller removes it in time."""
    kinds.delete(kube, "PersistentVolume", name)
    try:
        wait_gone(kube, "PersistentVolume", name, timeout=timeout)
    except ConditionNotReached:
        try:
            kinds.patch(kube, "PersistentVolume", name, {"metadata": {"finalizers": None}})
        except ApiError as exc:
            if exc.status != 404:
                raise


def probe_mutable_affinity(kube: Kube) -> tuple[bool | None, bool, str]:
    """(gate on?, could create PVs?, what was seen). Gate off: the dry-run update is
    rejected 422 "field is immutable"; gate on: it is accepted. None when unknown."""
    name = PROBE_PREFIX + secrets.token_hex(4)
    try:
        kube.core.create_persistent_volume(_probe_body(name, "pvchaos-probe-a"))
    except ApiError as exc:
        return None, False, f"probe PV not created: {_api_error(exc)}"
    moved = _probe_body(name, "pvchaos-probe-b")["spec"]["nodeAffinity"]
    try:
        for _ in range(5):  # the PV controller sets status.phase right after create: 409s
            current = as_dict(kube.core.read_persistent_volume(name))
            body = dict(current, spec=dict(current["spec"], nodeAffinity=moved))
            try:
                kube.core.replace_persistent_volume(name, body, dry_run="All")
            except ApiError as exc:
                if exc.status == 409:
                    continue
                if exc.status == 422 and "field is immutable" in (exc.body or ""):
                    return False, True, "dry-run nodeAffinity update rejected: field is immutable"
                return None, True, f"dry-run nodeAffinity update failed: {_api_error(exc)}"
            return True, True, "dry-run nodeAffinity update accepted"
        return None, True, "dry-run nodeAffinity update kept conflicting (409)"
    finally:
        _delete_probe(kube, name)


def _describe_classes(classes: Iterable[dict[str, Any]]) -> tuple[str, str, set[str]]:
    rows, default, provisioners = [], "none", set()
    for sc in sorted(classes, key=lambda c: c["metadata"]["name"]):
        name = sc["metadata"]["name"]
        mode = sc.get("volumeBindingMode") or "Immediate"
        rows.append(f"{name} ({sc.get('provisioner')}, {mode})")
        provisioners.add(str(sc.get("provisioner")))
        if (sc["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
            default = name
    return "; ".join(rows) or "none", default, provisioners


def inline_drivers(csidrivers: Iterable[dict[str, Any]]) -> list[str]:
    """The drivers whose CSIDriver lists the Ephemeral lifecycle mode: the kubelet takes
    their inline volumes (a CSIDriver without volumeLifecycleModes is Persistent only)."""
    return sorted(str(d["metadata"]["name"]) for d in csidrivers
                  if "Ephemeral" in ((d.get("spec") or {}).get("volumeLifecycleModes") or ()))


def real_kubelets(nodes: Iterable[dict[str, Any]]) -> bool:
    """Whether every node runs a real kubelet (none is a KWOK node): there a pod on a
    static PV with the stand-in CSI source would wait in ContainerCreating for a driver
    that does not exist, so such PVs become hostPath directories, as on kind."""
    nodes = list(nodes)
    return bool(nodes) and not any(KWOK_ANNOTATION in ((n.get("metadata") or {}).get("annotations") or {})
                                   for n in nodes)


class ExistingBackend:
    """A cluster the harness did not create; `down` removes nothing."""

    name = "existing"

    def __init__(self, kubeconfig: Path | str, context: str | None = None, allow_disruptive: bool = False,
                 allow_contexts: Iterable[str] = ()):
        self.kubeconfig = Path(kubeconfig)
        self.context = context
        self.allow_disruptive = allow_disruptive
        self.allow_contexts = tuple(allow_contexts)

    def up(self) -> ClusterHandle:
        kube, context, server, version = open_cluster(self.kubeconfig, self.context)
        try:
            return self._discover(kube, context, server, version)
        finally:
            kube.api.close()

    def _discover(self, kube: Kube, context: str, server: str, version: str) -> ClusterHandle:
        nodes = [as_dict(n) for n in kube.core.list_node().items]
        zones: list[str] = sorted({z for n in nodes if (z := (n["metadata"].get("labels") or {}).get(ZONE_KEY)) is not None})
        classes, default, provisioners = _describe_classes(as_dict(c) for c in kube.storage.list_storage_class().items)
        caps: set[str] = set()
        if len(zones) >= 2:
            caps.add(Capability.ZONES)
        if nodes and all("ephemeral-storage" in ((n.get("status") or {}).get("allocatable") or {}) for n in nodes):
            caps.add(Capability.EPHEMERAL_STORAGE)
        zonal = next((p for p in sorted(provisioners) if KNOWN_PROVISIONERS.get(p) == Capability.DYNAMIC_ZONAL), None)
        local = next((p for p in sorted(provisioners) if KNOWN_PROVISIONERS.get(p) == Capability.DYNAMIC_LOCAL), None)
        caps |= {KNOWN_PROVISIONERS[p] for p in (zonal, local) if p}
        if zonal == DRIVER_NAME:  # pvchaos-csi writes hostname affinity for pvchaos.dev/topology: node
            local = DRIVER_NAME
            caps.add(Capability.DYNAMIC_LOCAL)
        gate, can_create_pv, probe = probe_mutable_affinity(kube)
        if can_create_pv:
            caps.add(Capability.STATIC_PV)
        if gate:
            caps.add(Capability.MUTABLE_PV_AFFINITY)
        if self.allow_disruptive and context in self.allow_contexts:
            caps.add(Capability.NODE_LABELS)
        try:
            inline = inline_drivers(as_dict(d) for d in kube.storage.list_csi_driver().items)
        except ApiError as exc:  # a reader without that right: no inline-ephemeral, and why
            inline, inline_text = [], f"not read ({_api_error(exc)})"
        else:
            inline_text = ", ".join(inline) or "none"
        if inline:
            caps.add(Capability.INLINE_EPHEMERAL)
        return ClusterHandle(
            name=context, backend="existing", kubeconfig=self.kubeconfig, context=context, k8s_version=version,
            capabilities=frozenset(caps), feature_gates={} if gate is None else {MUTABLE_PV_GATE: gate},
            zonal_class_provisioner=zonal, local_class_provisioner=local,
            mountable_volumes=real_kubelets(nodes),
            description={
                "server": server, "nodes": str(len(nodes)), "zones": ", ".join(zones) or "none",
                "storage classes": classes, "default storage class": default,
                MUTABLE_PV_GATE: {True: "on", False: "off", None: "unknown"}[gate], "gate probe": probe,
                "drivers with the Ephemeral lifecycle mode": inline_text,
            },
        )

    def down(self, handle: ClusterHandle) -> None:
        """Not ours to tear down: suites clean up after themselves and `sweep` finds leftovers."""


# ---- safety and leftovers ------------------------------------------------------------

def disruption_refusal(handle: ClusterHandle, allow_disruptive: bool, allow_contexts: Iterable[str],
                       suites: Iterable[str] = DISRUPTIVE_SUITES) -> str | None:
    """Why disruptive suites may not run here, in one line naming the context; None if they may."""
    if handle.has(Capability.OWNED):
        return None
    context = handle.context or handle.name
    skipped = "disruptive suites skipped: " + ", ".join(suites)
    if not allow_disruptive:
        return (f"context {context!r} is a cluster pvchaos did not create and --allow-disruptive "
                f"was not given; {skipped}")
    if context not in set(allow_contexts):
        return f"context {context!r} is not on the allow-list (--allow-context); {skipped}"
    return None


def sweep(kube: Kube, selector: str = f"{OWNER_LABEL}=true") -> list[str]:
    """Delete harness-owned cluster-scoped leftovers (PVs, StorageClasses) and `pvchaos-`
    namespaces carrying the label; returns what was deleted, raises all failures together."""
    removed: list[str] = []
    errors: list[Exception] = []
    for kind in ("PersistentVolume", "StorageClass", "Namespace"):
        for obj in kinds.list_objects(kube, kind, label_selector=selector)[0]:
            name = o.name(obj)
            if kind == "Namespace" and not name.startswith(NAMESPACE_PREFIX):
                continue
            try:
                kinds.delete(kube, kind, name, grace=None)  # already gone counts as deleted
                removed.append(f"{kind.lower()}/{name}")
            except ApiError as exc:
                errors.append(RuntimeError(f"delete {kind.lower()}/{name}: {_api_error(exc)}"))
    if errors:
        raise ExceptionGroup(f"sweep: {len(errors)} deletions failed", errors)
    return removed


class ExistingProvider:
    """The existing backend as a `Provider` (clusters/provider.py): a cluster the harness
    did not create, reached through --kubeconfig; nothing to prepare, nothing to remove."""

    name = "existing"
    features: frozenset[Feature] = frozenset()

    def problem(self, options: Any) -> str | None:
        return None if options.kubeconfig else "--backend existing needs --kubeconfig"

    def prepare(self, options: Any) -> Teardown | None:
        return None

    def connect(self, options: Any, defaults: Any = None, hooks: Any = None) -> tuple[ClusterHandle, Teardown | None]:
        """The cluster --kubeconfig names (its storage is what is installed there)."""
        if not options.kubeconfig:
            raise ClusterError("backend existing: --kubeconfig is required")
        return ExistingBackend(options.kubeconfig, options.context, options.allow_disruptive,
                               options.allow_contexts).up(), None

    def cluster_up(self, args: argparse.Namespace) -> ClusterHandle:
        raise ClusterError("backend existing: pvchaos does not start existing clusters")

    def cluster_down(self, name: str | None) -> list[str]:
        if name is not None:
            raise ClusterError("backend existing: pvchaos does not remove clusters it did not create")
        return []

    def cluster_list(self) -> list[str]:
        return []


PROVIDER = ExistingProvider()

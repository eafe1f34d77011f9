"""A driver's topology class, and where its volumes may be used, from what the cluster shows.

A CSI driver reports topology keys in every node's CSINode (NodeGetInfo's accessible
topology); external-provisioner builds each volume's accessibility requirements from
them, and the PV's nodeAffinity pins the volume to a domain of nodes. Which domain is a
property of the driver, not a failure: per node (its own key, or the hostname), per zone,
per region, or none at all (the volume is usable from every node). Suites ask this module
what applies to the driver under test and which nodes a volume allows, instead of
assuming the zone key (issue 35: a per-node driver was failed for pinning its volumes
to one node).

Pure: Kubernetes JSON in, answers out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.conformance.types import KubeObject

ZONE_KEY = "topology.kubernetes.io/zone"
REGION_KEY = "topology.kubernetes.io/region"
HOSTNAME_KEY = "kubernetes.io/hostname"
WELL_KNOWN = {ZONE_KEY: "zone", REGION_KEY: "region", HOSTNAME_KEY: "node"}

__all__ = ["TopologyClass", "allowed_nodes", "domains", "driver_keys", "key_class", "not_applicable", "topology_class"]


class TopologyClass(StrEnum):
    """How finely a driver pins its volumes: the coarsest grouping its keys make."""

    NONE = "none"  # no keys: volumes are usable from every node
    NODE = "node"  # each node is its own domain (its own key, or the hostname)
    ZONE = "zone"  # the nodes of one zone
    REGION = "region"  # the nodes of one region
    GROUP = "group"  # groups of nodes that are neither zones nor regions (racks, pools)


_COARSENESS = {TopologyClass.NODE: 1, TopologyClass.GROUP: 2, TopologyClass.ZONE: 3, TopologyClass.REGION: 4}


def _labels(node: KubeObject) -> Mapping[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def _name(node: KubeObject) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def driver_keys(csinodes: Iterable[KubeObject], driver: str) -> tuple[str, ...]:
    """The topology keys the driver reports on every node that registers it (a key some
    registered node lacks is no key: a volume pinned with it could not be placed there)."""
    seen: list[set[str]] = []
    for csinode in csinodes:
        for entry in (csinode.get("spec") or {}).get("drivers") or []:
            if isinstance(entry, Mapping) and entry.get("name") == driver:
                seen.append({str(k) for k in entry.get("topologyKeys") or []})
    if not seen:
        return ()
    return tuple(sorted(set.intersection(*seen)))


def _partition(key: str, nodes: Sequence[KubeObject]) -> frozenset[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for node in nodes:
        value = _labels(node).get(key)
        if value is not None:
            groups.setdefault(str(value), set()).add(_name(node))
    return frozenset(frozenset(g) for g in groups.values())


def key_class(key: str, nodes: Sequence[KubeObject]) -> TopologyClass:
    """What one key groups the nodes into: the well-known keys are what they say (with one
    node per zone the zone and the hostname group the nodes alike, and a zonal driver's
    zone key must still read as zone); any other key is judged by its grouping: a vendor's
    own per-node key is NODE like the hostname, one that groups as the zones do is ZONE."""
    if key in WELL_KNOWN:
        return TopologyClass(WELL_KNOWN[key])
    groups = _partition(key, nodes)
    if not groups:
        return TopologyClass.GROUP
    if all(len(g) == 1 for g in groups) and len(groups) == len(nodes):
        return TopologyClass.NODE
    if groups == _partition(ZONE_KEY, nodes):
        return TopologyClass.ZONE
    if groups == _partition(REGION_KEY, nodes):
        return TopologyClass.REGION
    return TopologyClass.GROUP


def topology_class(keys: Sequence[str], nodes: Sequence[KubeObject]) -> TopologyClass:
    """The driver's class: NONE without keys, else the coarsest class of its keys (a driver
    with zone and hostname keys pins its zonal volumes to zones)."""
    if not keys:
        return TopologyClass.NONE
    return max((key_class(k, nodes) for k in keys), key=lambda c: _COARSENESS[c])


def domains(cls: TopologyClass, keys: Sequence[str], nodes: Sequence[KubeObject]) -> dict[str, frozenset[str]]:
    """The driver's domains: label value of its class's key -> node names. NONE has one
    domain, every node (under the key "")."""
    if cls == TopologyClass.NONE:
        return {"": frozenset(_name(n) for n in nodes)}
    key = next(k for k in keys if key_class(k, nodes) == cls)
    out: dict[str, set[str]] = {}
    for node in nodes:
        value = _labels(node).get(key)
        if value is not None:
            out.setdefault(str(value), set()).add(_name(node))
    return {v: frozenset(names) for v, names in sorted(out.items())}


def domain_key(cls: TopologyClass, keys: Sequence[str], nodes: Sequence[KubeObject]) -> str | None:
    """The key whose values name the driver's domains (None for NONE)."""
    return next((k for k in keys if key_class(k, nodes) == cls), None) if cls != TopologyClass.NONE else None


def allowed_nodes(pv: KubeObject, nodes: Sequence[KubeObject]) -> frozenset[str]:
    """The nodes a PV's nodeAffinity allows (every node when it has none)."""
    return frozenset(_name(n) for n in nodes if node_matches_pv_affinity(n, pv))


def not_applicable(cls: TopologyClass, wanted: Sequence[TopologyClass], keys: Sequence[str]) -> str | None:
    """Why a test about drivers of the `wanted` classes does not apply to this driver, or None."""
    if cls in wanted:
        return None
    shown = ", ".join(keys) or "none"
    return (f"not applicable: the driver's topology class is {cls.value} (keys: {shown}); the test is about "
            f"{' or '.join(c.value for c in wanted)}-class drivers")

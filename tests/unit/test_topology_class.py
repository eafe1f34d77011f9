"""Expectations follow the driver's topology class (issue 35): the class comes from what
its keys do to the nodes, per node, zone, region, a group, or none, never from a key's name."""

from __future__ import annotations

from typing import Any

from pvchaos.conformance import topology_class as tc
from pvchaos.conformance.topology_class import TopologyClass

ZONE, REGION, HOST = "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "kubernetes.io/hostname"
OWN = "vendor.example.com/node"


def node(name: str, zone: str, **extra: str) -> dict[str, Any]:
    labels = {ZONE: zone, REGION: "r1", HOST: name, OWN: f"id-{name}", "rack": "r-" + name[-1], **extra}
    return {"metadata": {"name": name, "labels": labels}}


NODES = [node("a-1", "a"), node("a-2", "a"), node("b-1", "b"), node("c-1", "c")]


def csinode(name: str, *entries: tuple[str, list[str]]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"drivers": [{"name": d, "topologyKeys": k} for d, k in entries]}}


def pv(**match: list[str]) -> dict[str, Any]:
    exprs = [{"key": k, "operator": "In", "values": v} for k, v in match.items()]
    return {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}}}


def test_each_class_is_what_its_keys_do_to_the_nodes() -> None:
    assert tc.topology_class((), NODES) == TopologyClass.NONE
    assert tc.topology_class((OWN,), NODES) == TopologyClass.NODE  # a vendor's own per-node key
    assert tc.topology_class((HOST,), NODES) == TopologyClass.NODE
    assert tc.topology_class((ZONE,), NODES) == TopologyClass.ZONE
    assert tc.topology_class((ZONE, HOST), NODES) == TopologyClass.ZONE  # the coarsest key decides (pvchaos-csi)
    assert tc.topology_class((REGION,), NODES) == TopologyClass.REGION
    racks = [node("a-1", "a", pool="p1"), node("a-2", "a", pool="p2"), node("b-1", "b", pool="p1"),
             node("c-1", "c", pool="p2")]
    assert tc.topology_class(("pool",), racks) == TopologyClass.GROUP
    same_as_zones = [node("a-1", "a", dc="x"), node("a-2", "a", dc="x"), node("b-1", "b", dc="y"),
                     node("c-1", "c", dc="z")]
    assert tc.topology_class(("dc",), same_as_zones) == TopologyClass.ZONE  # a zone by another name


def test_one_node_per_zone_keeps_the_zone_key_a_zone() -> None:
    """With one node per zone the zone and the hostname group the nodes alike; the zone key
    still names a zonal driver's domains (else its classes would be written on the hostname,
    which it cannot provision for: seen on certify's 3 x 1 cluster)."""
    single = [node("a-1", "a"), node("b-1", "b"), node("c-1", "c")]
    assert tc.topology_class((ZONE, HOST), single) == TopologyClass.ZONE
    assert tc.domain_key(TopologyClass.ZONE, (HOST, ZONE), single) == ZONE
    assert tc.topology_class((OWN,), single) == TopologyClass.NODE  # another key with a value per node: per node


def test_keys_are_those_every_registered_node_reports() -> None:
    nodes = [csinode("a-1", ("d", [ZONE, HOST])), csinode("b-1", ("d", [ZONE]), ("other", [OWN])),
             csinode("c-1", ("other", [OWN]))]
    assert tc.driver_keys(nodes, "d") == (ZONE,)
    assert tc.driver_keys(nodes, "other") == (OWN,)
    assert tc.driver_keys(nodes, "absent") == ()


def test_domains_and_the_nodes_a_volume_allows() -> None:
    assert tc.domains(TopologyClass.ZONE, (ZONE, HOST), NODES) == {
        "a": frozenset({"a-1", "a-2"}), "b": frozenset({"b-1"}), "c": frozenset({"c-1"})}
    assert tc.domains(TopologyClass.NODE, (OWN,), NODES)["id-a-2"] == frozenset({"a-2"})
    assert tc.domains(TopologyClass.NONE, (), NODES) == {"": frozenset({"a-1", "a-2", "b-1", "c-1"})}
    assert tc.domain_key(TopologyClass.NODE, (OWN,), NODES) == OWN
    assert tc.allowed_nodes(pv(**{ZONE: ["a"]}), NODES) == frozenset({"a-1", "a-2"})
    assert tc.allowed_nodes(pv(**{OWN: ["id-b-1"]}), NODES) == frozenset({"b-1"})
    assert tc.allowed_nodes({"spec": {}}, NODES) == frozenset({"a-1", "a-2", "b-1", "c-1"})


def test_a_test_for_other_classes_is_not_applicable_and_says_why() -> None:
    assert tc.not_applicable(TopologyClass.ZONE, (TopologyClass.ZONE, TopologyClass.NODE), (ZONE,)) is None
    why = tc.not_applicable(TopologyClass.NODE, (TopologyClass.ZONE,), (OWN,))
    assert why is not None and why.startswith("not applicable") and OWN in why and "zone-class" in why
    assert "keys: none" in (tc.not_applicable(TopologyClass.NONE, (TopologyClass.ZONE,), ()) or "")

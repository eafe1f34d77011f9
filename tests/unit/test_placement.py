"""Feasible nodes for a pending pod: node filters plus volume topology (SPEC section 3)."""

import pytest

from pvchaos.conformance.placement import feasible_nodes, pod_claim_keys, pv_violations

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def node(name, zone=None, taints=None, unschedulable=False, **labels):
    if zone is not None:
        labels[ZONE] = zone
    labels.setdefault(HOST, f"host-{name}")  # hostname label differs from the node name
    spec = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")]


def pod(*claims, name="web-0", ns="app", **spec):
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"volumes": volumes, **spec}}


def affinity(key, *values):
    return {
        "required": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]
        }
    }


def pv(name, node_affinity=None, claim=None, cls="", size="10Gi", labels=None):
    spec = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls}
    if node_affinity is not None:
        spec["nodeAffinity"] = node_affinity
    if claim is not None:
        spec["claimRef"] = {"namespace": "app", "name": claim}
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": {"phase": "Available"}}


def pvc(name, cls, size="10Gi", annotations=None):
    return {
        "metadata": {"name": name, "namespace": "app", "annotations": annotations or {}},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


def storage_class(name, mode="WaitForFirstConsumer", provisioner="csi.example.com", zones=None):
    out = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if zones is not None:
        out["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return out


# --- node-only filters -------------------------------------------------------------------------------


def test_pod_without_volumes_fits_every_plain_node():
    assert feasible_nodes(pod(), NODES, {}) == {"a1", "a2", "b1", "c1"}


def test_node_selector_and_required_affinity():
    assert feasible_nodes(pod(nodeSelector={ZONE: "a"}), NODES, {}) == {"a1", "a2"}
    required = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity(ZONE, "b", "c")["required"]}
    }
    assert feasible_nodes(pod(affinity=required), NODES, {}) == {"b1", "c1"}


def test_hostname_label_is_not_the_node_name():
    assert feasible_nodes(pod(nodeSelector={HOST: "a1"}), NODES, {}) == set()
    assert feasible_nodes(pod(nodeSelector={HOST: "host-a1"}), NODES, {}) == {"a1"}


def test_hard_taints_need_tolerations_soft_ones_do_not():
    nodes = [
        node("ns", taints=[{"key": "k", "effect": "NoSchedule"}]),
        node("ne", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
        node("soft", taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
    ]
    assert feasible_nodes(pod(), nodes, {}) == {"soft"}
    tolerations = [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ]
    assert feasible_nodes(pod(tolerations=tolerations), nodes, {}) == {"ne", "soft"}


def test_unschedulable_node_acts_as_a_noschedule_taint():
    nodes = [node("cordoned", unschedulable=True), node("ok")]
    assert feasible_nodes(pod(), nodes, {}) == {"ok"}
    tolerate = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert feasible_nodes(pod(tolerations=tolerate), nodes, {}) == {"cordoned", "ok"}


def test_pod_with_node_name_fits_only_that_node():
    assert feasible_nodes(pod(nodeName="b1"), NODES, {}) == {"b1"}


# --- bound claims -------------------------------------------------------------------------------------


def test_bound_pv_affinity_limits_nodes():
    bound = {"app/data": pv("pv-a", affinity(ZONE, "a"))}
    assert feasible_nodes(pod("data"), NODES, bound) == {"a1", "a2"}


def test_local_pv_pins_to_its_host_and_taint_there_leaves_nothing():
    bound = {"app/data": pv("local-a1", affinity(HOST, "host-a1"))}
    assert feasible_nodes(pod("data"), NODES, bound) == {"a1"}
    lost = [node("a1", "a", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]), *NODES[1:]]
    assert feasible_nodes(pod("data"), lost, bound) == set()


def test_pod_and_pv_in_different_zones_is_the_classic_incident():
    bound = {"app/data": pv("pv-a", affinity(ZONE, "a"))}
    assert feasible_nodes(pod("data", nodeSelector={ZONE: "b"}), NODES, bound) == set()


def test_volume_zone_labels_on_bound_pvs():
    bound = {"app/data": pv("legacy", labels={BETA_ZONE: "a__b"})}
    assert feasible_nodes(pod("data"), NODES, bound) == {"a1", "a2", "b1"}
    unlabelled = {"metadata": {"name": "bare", "labels": {}}, "spec": {}}
    assert feasible_nodes(pod("data"), [unlabelled], bound) == {"bare"}  # single-zone clusters pass


# --- unbound claims -------------------------------------------------------------------------------------


def test_unbound_immediate_claim_is_unschedulable_everywhere():
    claims = {"app/data": pvc("data", "std")}
    classes = {"std": storage_class("std", mode="Immediate")}
    assert feasible_nodes(pod("data"), NODES, {}, classes, claims=claims) == set()


@pytest.mark.parametrize("cls", ["", "missing"])
def test_unbound_claim_without_a_known_class_counts_as_immediate(cls):
    claims = {"app/data": pvc("data", cls)}
    assert feasible_nodes(pod("data"), NODES, {}, {}, claims=claims) == set()


def test_wffc_allowed_topologies_limit_provisioning():
    claims = {"app/data": pvc("data", "zonal")}
    classes = {"zonal": storage_class("zonal", zones=["a", "c"])}
    assert feasible_nodes(pod("data"), NODES, {}, classes, claims=claims) == {"a1", "a2", "c1"}
    pinned = pod("data", nodeSelector={ZONE: "b"})
    assert feasible_nodes(pinned, NODES, {}, classes, claims=claims) == set()


def test_wffc_without_allowed_topologies_fits_everywhere():
    claims = {"app/data": pvc("data", "any")}
    assert feasible_nodes(pod("data"), NODES, {}, {"any": storage_class("any")}, claims=claims) == {
        "a1",
        "a2",
        "b1",
        "c1",
    }


def test_no_provisioner_class_needs_a_static_pv_on_the_node():
    claims = {"app/data": pvc("data", "local")}
    classes = {"local": storage_class("local", provisioner="kubernetes.io/no-provisioner")}
    assert feasible_nodes(pod("data"), NODES, {}, classes, claims=claims) == set()
    local_pvs = [
        pv("lp-b1", affinity(HOST, "host-b1"), cls="local"),
        pv("lp-c1", affinity(HOST, "host-c1"), cls="local", size="1Gi"),
    ]
    assert feasible_nodes(pod("data"), NODES, {}, classes, claims=claims, unbound_pvs=local_pvs) == {"b1"}


def test_two_claims_cannot_share_one_static_pv():
    claims = {"app/one": pvc("one", "local"), "app/two": pvc("two", "local")}
    classes = {"local": storage_class("local", provisioner="kubernetes.io/no-provisioner")}
    one_pv = [pv("lp-a1", affinity(HOST, "host-a1"), cls="local")]
    assert feasible_nodes(pod("one", "two"), NODES, {}, classes, claims=claims, unbound_pvs=one_pv) == set()
    two_pvs = [*one_pv, pv("lp-a1-2", affinity(HOST, "host-a1"), cls="local")]
    assert feasible_nodes(pod("one", "two"), NODES, {}, classes, claims=claims, unbound_pvs=two_pvs) == {"a1"}


def test_selected_node_annotation_pins_the_claim():
    claims = {"app/data": pvc("data", "any", annotations={"volume.kubernetes.io/selected-node": "b1"})}
    assert feasible_nodes(pod("data"), NODES, {}, {"any": storage_class("any")}, claims=claims) == {"b1"}


def test_missing_or_deleting_claim_is_unschedulable():
    classes = {"any": storage_class("any")}
    assert feasible_nodes(pod("data"), NODES, {}, classes, claims={}) == set()
    deleting = pvc("data", "any")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert feasible_nodes(pod("data"), NODES, {}, classes, claims={"app/data": deleting}) == set()


def test_unbound_claim_without_claim_data_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="app/data"):
        feasible_nodes(pod("data"), NODES, {})
    with pytest.raises(ValueError):
        feasible_nodes(pod("data"), NODES, {}, claims={"app/data": pvc("data", "any")})


def test_bound_and_unbound_claims_combine():
    bound = {"app/logs": pv("pv-a", affinity(ZONE, "a", "b"))}
    claims = {"app/data": pvc("data", "zonal")}
    classes = {"zonal": storage_class("zonal", zones=["b", "c"])}
    assert feasible_nodes(pod("logs", "data"), NODES, bound, classes, claims=claims) == {"b1"}


# --- helpers --------------------------------------------------------------------------------------------


def test_claim_keys_include_generic_ephemeral_volumes():
    p = pod("data")
    p["spec"]["volumes"].append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}})
    p["spec"]["volumes"].append({"name": "cfg", "configMap": {"name": "x"}})
    assert pod_claim_keys(p) == ["app/data", "app/web-0-scratch"]


def test_pv_violations_lists_only_the_pods_pvs_that_exclude_the_node():
    pvs = [
        pv("mine-a", affinity(ZONE, "a"), claim="data"),
        pv("mine-any", claim="logs"),
        pv("other-b", affinity(ZONE, "b"), claim="someone-else"),
    ]
    p = pod("data", "logs")
    assert pv_violations(p, NODES[2], pvs) == ["mine-a"]
    assert pv_violations(p, NODES[0], pvs) == []
    assert pv_violations(p, NODES[2], {"app/data": pvs[0], "app/logs": None}) == ["mine-a"]

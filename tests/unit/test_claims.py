"""Claim-to-volume matching: SPEC section 2 and upstream FindMatchingVolume's rules."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvchaos.conformance.claims import (
    claim_class,
    claim_key,
    explain_mismatch,
    find_matching_volume,
    is_bound_to_claim,
    volume_class,
)
from pvchaos.conformance.quantity import parse_quantity

ZONE = "topology.kubernetes.io/zone"


def pvc(size="10Gi", modes=("ReadWriteOnce",), cls="", name="data", ns="app", **spec):
    body = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, "storageClassName": cls}
    body.update(spec)
    return {"metadata": {"name": name, "namespace": ns, "uid": "uid-1"}, "spec": body}


def pv(name, size="10Gi", modes=("ReadWriteOnce",), cls="", phase="Available", labels=None, **spec):
    body = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls}
    body.update(spec)
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": body, "status": {"phase": phase}}


def zoned(name, zone, **kwargs):
    affinity = {
        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}
    }
    return pv(name, nodeAffinity=affinity, **kwargs)


def node(zone):
    return {"metadata": {"name": f"node-{zone}", "labels": {ZONE: zone}}}


def chosen(claim, volumes, **kwargs):
    found = find_matching_volume(claim, volumes, **kwargs)
    return None if found is None else found["metadata"]["name"]


# --- SPEC section 2 ---------------------------------------------------------------------------


def test_100gi_pv_never_satisfies_120gi_claim():
    assert chosen(pvc("120Gi"), [pv("small", "100Gi")]) is None
    assert chosen(pvc("120Gi"), [pv("small", "100Gi")], node=node("a")) is None
    assert explain_mismatch(pvc("120Gi"), pv("small", "100Gi")) == ["requested PV is too small"]


def test_1ti_satisfies_100gi_claim():
    assert chosen(pvc("100Gi"), [pv("big", "1Ti")]) == "big"
    assert explain_mismatch(pvc("100Gi"), pv("big", "1Ti")) == []


def test_smallest_fit_wins_and_ties_keep_input_order():
    volumes = [pv("huge", "1Ti"), pv("tight", "100Gi"), pv("mid", "200Gi"), pv("too-small", "50Gi")]
    assert chosen(pvc("100Gi"), volumes) == "tight"
    assert chosen(pvc("100Gi"), [pv("first", "100Gi"), pv("second", "100Gi")]) == "first"
    assert chosen(pvc("100Gi"), [pv("dec", "107374182400"), pv("bin", "100Gi")]) == "dec"  # equal bytes


def test_exact_capacity_comparison_across_suffixes():
    assert chosen(pvc("1Gi"), [pv("decimal", "1G")]) is None  # 10^9 < 2^30
    assert chosen(pvc("1G"), [pv("binary", "1Gi")]) == "binary"


# --- class ---------------------------------------------------------------------------------------


def test_empty_class_matches_only_empty_class():
    assert chosen(pvc(cls=""), [pv("fast", cls="fast"), pv("plain")]) == "plain"
    assert chosen(pvc(cls=""), [pv("fast", cls="fast")]) is None
    assert chosen(pvc(cls="fast"), [pv("plain"), pv("fast", cls="fast")]) == "fast"


def test_none_class_is_read_as_empty():
    claim = pvc(storageClassName=None)
    assert claim_class(claim) == ""
    assert chosen(claim, [pv("fast", cls="fast"), pv("plain")]) == "plain"
    unset = pv("unset")
    del unset["spec"]["storageClassName"]
    assert chosen(claim, [unset]) == "unset"


def test_beta_class_annotation_wins_over_the_field():
    claim = pvc(cls="fast")
    claim["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "slow"}
    volume = pv("v", cls="fast")
    volume["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "slow"}
    assert claim_class(claim) == "slow" and volume_class(volume) == "slow"
    assert chosen(claim, [pv("fast-only", cls="fast"), volume]) == "v"


# --- access modes and volume mode -----------------------------------------------------------


def test_every_requested_access_mode_is_needed():
    claim = pvc(modes=("ReadWriteOnce", "ReadOnlyMany"))
    assert chosen(claim, [pv("rwo", modes=("ReadWriteOnce",))]) is None
    assert chosen(claim, [pv("both", modes=("ReadOnlyMany", "ReadWriteOnce"))]) == "both"
    assert chosen(claim, [pv("rwo", modes=("ReadWriteOnce",))], node=node("a")) is None


def test_controller_prefers_exact_access_modes_over_smaller_size():
    # index.go searches access-mode groups fewest-modes-first; the scheduler does not.
    volumes = [
        pv("exact-big", "20Gi", modes=("ReadWriteOnce",)),
        pv("wider-small", "10Gi", modes=("ReadWriteOnce", "ReadOnlyMany")),
    ]
    assert chosen(pvc("5Gi"), volumes) == "exact-big"
    assert chosen(pvc("5Gi"), volumes, node=node("a")) == "wider-small"


def test_volume_mode_unset_means_filesystem():
    assert chosen(pvc(), [pv("fs", volumeMode="Filesystem")]) == "fs"
    assert chosen(pvc(volumeMode="Filesystem"), [pv("unset")]) == "unset"
    assert chosen(pvc(volumeMode="Block"), [pv("fs")]) is None
    assert chosen(pvc(), [pv("block", volumeMode="Block")]) is None


# --- claimRef, deletion, phase, selector, VAC -----------------------------------------------------


def ref(name="data", ns="app", uid=None):
    out = {"kind": "PersistentVolumeClaim", "name": name, "namespace": ns}
    if uid is not None:
        out["uid"] = uid
    return out


def test_pv_claimed_by_another_claim_is_skipped():
    assert chosen(pvc(), [pv("taken", claimRef=ref("other"))]) is None
    assert chosen(pvc(), [pv("taken", claimRef=ref(ns="elsewhere"))]) is None
    assert chosen(pvc(), [pv("taken", claimRef=ref(uid="uid-2"))]) is None


def test_prebound_pv_is_chosen_over_a_smaller_fit():
    volumes = [pv("small", "10Gi"), pv("mine", "50Gi", claimRef=ref(uid="uid-1"))]
    assert chosen(pvc(), volumes) == "mine"
    assert is_bound_to_claim(volumes[1], pvc())
    assert chosen(pvc(), [pv("small", "10Gi"), pv("mine", "50Gi", claimRef=ref())]) == "mine"  # no uid yet


def test_prebound_pv_skips_phase_selector_and_class_checks():
    volume = pv("mine", cls="other", phase="Pending", claimRef=ref(), labels={"tier": "bronze"})
    claim = pvc(selector={"matchLabels": {"tier": "gold"}})
    assert chosen(claim, [volume]) == "mine"


def test_prebound_pv_still_needs_size_and_mode():
    assert chosen(pvc("20Gi"), [pv("mine", "10Gi", claimRef=ref())]) is None
    assert chosen(pvc(volumeMode="Block"), [pv("mine", claimRef=ref())]) is None


def test_prebound_pv_excluded_by_node_means_no_match_at_all():
    volumes = [zoned("mine", "b", claimRef=ref()), zoned("other", "a")]
    assert chosen(pvc(), volumes, node=node("a")) is None
    assert chosen(pvc(), volumes) == "mine"


def test_pv_being_deleted_is_skipped():
    deleting = pv("gone")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert chosen(pvc(), [deleting]) is None
    assert chosen(pvc(), [deleting, pv("ok", "1Ti")]) == "ok"


@pytest.mark.parametrize("phase", ["Pending", "Released", "Bound", "Failed"])
def test_only_available_pvs_bind(phase):
    assert chosen(pvc(), [pv("v", phase=phase)]) is None


def test_pv_without_status_is_treated_as_available():
    volume = pv("fresh")
    del volume["status"]
    assert chosen(pvc(), [volume]) == "fresh"


def test_claim_selector():
    volumes = [
        pv("bronze", "10Gi", labels={"tier": "bronze"}),
        pv("gold", "20Gi", labels={"tier": "gold", "zone": "a"}),
    ]
    assert chosen(pvc(selector={"matchLabels": {"tier": "gold"}}), volumes) == "gold"
    expressions = {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}
    assert chosen(pvc(selector=expressions), volumes) == "bronze"
    assert chosen(pvc(selector={"matchExpressions": [{"key": "zone", "operator": "Exists"}]}), volumes) == "gold"
    assert chosen(pvc(selector={"matchLabels": {"tier": "platinum"}}), volumes) is None


def test_volume_attributes_class_must_match_and_none_is_empty():
    assert (
        chosen(pvc(volumeAttributesClassName="gold"), [pv("plain"), pv("gold", volumeAttributesClassName="gold")])
        == "gold"
    )
    assert chosen(pvc(), [pv("gold", volumeAttributesClassName="gold")]) is None
    assert chosen(pvc(volumeAttributesClassName=None), [pv("empty", volumeAttributesClassName="")]) == "empty"


# --- node affinity: Immediate vs WaitForFirstConsumer ----------------------------------------------


def test_immediate_binding_ignores_node_affinity():
    assert chosen(pvc(), [zoned("b-only", "b")]) == "b-only"


def test_scheduler_path_skips_pvs_excluding_the_node():
    volumes = [zoned("in-b", "b", size="10Gi"), zoned("in-a", "a", size="20Gi")]
    assert chosen(pvc(), volumes, node=node("a")) == "in-a"
    assert chosen(pvc(), volumes, node=node("c")) is None


def test_scheduler_path_considers_only_the_claims_class():
    assert chosen(pvc(cls="local"), [pv("mine", cls="other", claimRef=ref())], node=node("a")) is None
    assert chosen(pvc(cls="local"), [pv("mine", cls="other", claimRef=ref())]) == "mine"


def test_delayed_binding_without_node_returns_only_prebound():
    assert chosen(pvc(), [pv("free")], delay_binding=True) is None
    assert chosen(pvc(), [pv("free"), pv("mine", "1Ti", claimRef=ref())], delay_binding=True) == "mine"


def test_excluded_pvs_are_skipped():
    volumes = [pv("a", "10Gi"), pv("b", "20Gi")]
    assert chosen(pvc(), volumes, excluded={"a"}) == "b"
    assert chosen(pvc(), volumes, node=node("z"), excluded={"a", "b"}) is None


def test_claim_key():
    assert claim_key(pvc(name="c", ns="n")) == "n/c"


# --- explain_mismatch ------------------------------------------------------------------------------


def test_explain_each_mismatch_with_upstream_wording():
    assert explain_mismatch(pvc(cls="fast"), pv("v")) == ["storageClassName does not match"]
    assert explain_mismatch(pvc(volumeMode="Block"), pv("v")) == ["incompatible volumeMode"]
    assert explain_mismatch(pvc(modes=("ReadWriteMany",)), pv("v")) == ["incompatible accessMode"]


def test_explain_lists_all_reasons_in_controller_order():
    claim = pvc("1Ti", modes=("ReadWriteMany",), cls="fast", volumeMode="Block")
    assert explain_mismatch(claim, pv("v", "1Gi")) == [
        "requested PV is too small",
        "storageClassName does not match",
        "incompatible volumeMode",
        "incompatible accessMode",
    ]


def test_explain_deletion_and_claim_elsewhere_come_first():
    volume = pv("v", claimRef=ref("other"))
    volume["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert explain_mismatch(pvc(), volume) == [
        'volume "v" already bound to a different claim.',
        'the volume is marked for deletion "v"',
    ]


def test_explain_compares_whole_bytes_like_value():
    assert explain_mismatch(pvc("1500m"), pv("v", "2")) == []
    assert explain_mismatch(pvc("2001m"), pv("v", "2")) == ["requested PV is too small"]


# --- properties ------------------------------------------------------------------------------------

SIZES = ["1Gi", "5Gi", "10Gi", "50Gi", "100Gi", "120Gi", "1Ti", "100G"]
volume_st = st.builds(
    lambda i, size, cls, phase, modes: pv(f"pv{i}", size, modes=modes, cls=cls, phase=phase),
    st.integers(0, 10**6),
    st.sampled_from(SIZES),
    st.sampled_from(["", "fast"]),
    st.sampled_from(["Available", "Available", "Released"]),
    st.sampled_from([("ReadWriteOnce",), ("ReadWriteOnce", "ReadOnlyMany"), ("ReadWriteMany",)]),
)
claim_st = st.builds(
    lambda size, cls, modes: pvc(size, modes=modes, cls=cls),
    st.sampled_from(SIZES),
    st.sampled_from(["", "fast"]),
    st.sampled_from([("ReadWriteOnce",), ("ReadWriteMany",), ()]),
)


def fits(claim, volume):
    return (
        volume["status"]["phase"] == "Available"
        and explain_mismatch(claim, volume) == []
        and parse_quantity(volume["spec"]["capacity"]["storage"])
        >= parse_quantity(claim["spec"]["resources"]["requests"]["storage"])
    )


@given(claim_st, st.lists(volume_st, max_size=6))
def test_scheduler_choice_is_the_smallest_fitting_volume(claim, volumes):
    found = find_matching_volume(claim, volumes, node=node("a"))
    candidates = [v for v in volumes if fits(claim, v)]
    if not candidates:
        assert found is None
        return
    smallest = min(parse_quantity(v["spec"]["capacity"]["storage"]) for v in candidates)
    assert found is not None and fits(claim, found)
    assert parse_quantity(found["spec"]["capacity"]["storage"]) == smallest


@given(claim_st, st.lists(volume_st, max_size=6))
def test_controller_finds_a_fit_exactly_when_one_exists(claim, volumes):
    found = find_matching_volume(claim, volumes)
    assert (found is None) == (not any(fits(claim, v) for v in volumes))
    if found is not None:
        assert fits(claim, found)

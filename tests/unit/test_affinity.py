"""Node selector and toleration matching, checked against upstream's rules and algebra."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvchaos.conformance.affinity import (
    label_selector_matches,
    node_matches_pv_affinity,
    node_matches_selector,
    node_matches_topology_terms,
    pod_node_affinity_matches,
    tolerates,
    toleration_tolerates_taint,
    untolerated_taints,
    valid_label_key,
    valid_label_value,
)

ZONE = "topology.kubernetes.io/zone"


def node(name="n1", **labels):
    return {"metadata": {"name": name, "labels": labels}}


def expr(key, operator, *values):
    return {"key": key, "operator": operator, "values": list(values)} if values else {"key": key, "operator": operator}


def term(*exprs, fields=()):
    out = {}
    if exprs:
        out["matchExpressions"] = list(exprs)
    if fields:
        out["matchFields"] = list(fields)
    return out


def selector(*terms):
    return {"nodeSelectorTerms": list(terms)}


def matches(n, *exprs):
    return node_matches_selector(n, selector(term(*exprs)))


# --- operators -----------------------------------------------------------------------


def test_in_and_notin():
    n = node(zone="a")
    assert matches(n, expr("zone", "In", "a", "b"))
    assert not matches(n, expr("zone", "In", "b"))
    assert matches(n, expr("zone", "NotIn", "b"))
    assert not matches(n, expr("zone", "NotIn", "a"))


def test_notin_and_doesnotexist_match_when_key_absent():
    n = node()
    assert matches(n, expr("zone", "NotIn", "a"))
    assert matches(n, expr("zone", "DoesNotExist"))
    assert not matches(n, expr("zone", "In", "a"))
    assert not matches(n, expr("zone", "Exists"))


def test_gt_lt_compare_as_integers():
    n = node(cores="10")
    assert matches(n, expr("cores", "Gt", "9"))
    assert not matches(n, expr("cores", "Gt", "10"))
    assert matches(n, expr("cores", "Lt", "11"))
    assert not matches(n, expr("cores", "Lt", "2"))  # 10 < 2 is false although "10" < "2" as text


@pytest.mark.parametrize(
    "requirement",
    [
        expr("cores", "Gt", "1", "2"),  # exactly one value
        expr("cores", "Gt"),
        expr("cores", "Gt", "abc"),
        expr("cores", "Gt", "9223372036854775808"),  # past int64
        expr("cores", "Gt", "-1"),  # parses as int but "-1" is no valid label value upstream
        expr("cores", "Lt", "1.5"),
    ],
)
def test_malformed_gt_lt_never_matches(requirement):
    assert not matches(node(cores="10"), requirement)


def test_gt_fails_when_label_is_not_an_integer_or_absent():
    assert not matches(node(cores="ten"), expr("cores", "Gt", "1"))
    assert not matches(node(), expr("cores", "Gt", "1"))


@pytest.mark.parametrize(
    "requirement",
    [
        expr("zone", "In"),  # In needs values
        expr("zone", "NotIn"),
        expr("zone", "Exists", "a"),  # Exists takes none
        expr("zone", "DoesNotExist", "a"),
        expr("zone", "Equals", "a"),  # not a node selector operator
        expr("bad key!", "Exists"),
        expr("zone", "In", "has space"),  # invalid label value
        {"operator": "Exists"},  # no key
    ],
)
def test_invalid_requirement_voids_its_term_only(requirement):
    n = node(zone="a")
    assert not node_matches_selector(n, selector(term(requirement)))
    assert not node_matches_selector(n, selector(term(expr("zone", "In", "a"), requirement)))
    assert node_matches_selector(n, selector(term(requirement), term(expr("zone", "In", "a"))))


def test_empty_term_and_empty_selector_match_nothing():
    n = node(zone="a")
    assert not node_matches_selector(n, selector(term()))
    assert not node_matches_selector(n, selector())
    assert not node_matches_selector(n, None)
    assert not node_matches_selector(n, selector({"matchExpressions": [], "matchFields": []}))
    assert node_matches_selector(n, selector(term(), term(expr("zone", "Exists"))))
    assert not node_matches_selector(None, selector(term(expr("zone", "Exists"))))


def test_terms_or_and_expressions_and():
    n = node(zone="a", disk="ssd")
    assert node_matches_selector(n, selector(term(expr("zone", "In", "b")), term(expr("disk", "In", "ssd"))))
    assert not matches(n, expr("zone", "In", "a"), expr("disk", "In", "hdd"))


# --- matchFields --------------------------------------------------------------------


def name_field(operator, *values):
    return {"key": "metadata.name", "operator": operator, "values": list(values)}


def test_match_fields_on_node_name():
    assert node_matches_selector(node("n1"), selector(term(fields=[name_field("In", "n1")])))
    assert not node_matches_selector(node("n2"), selector(term(fields=[name_field("In", "n1")])))
    assert node_matches_selector(node("n2"), selector(term(fields=[name_field("NotIn", "n1")])))


def test_match_fields_and_expressions_are_anded():
    both = term(expr("zone", "In", "a"), fields=[name_field("In", "n1")])
    assert node_matches_selector(node("n1", zone="a"), selector(both))
    assert not node_matches_selector(node("n1", zone="b"), selector(both))
    assert not node_matches_selector(node("n2", zone="a"), selector(both))


@pytest.mark.parametrize(
    "field",
    [name_field("In", "n1", "n2"), name_field("In"), name_field("Exists"), name_field("Gt", "1")],
)
def test_malformed_match_fields_void_the_term(field):
    assert not node_matches_selector(node("n1"), selector(term(fields=[field])))


def test_other_field_keys_compare_as_empty_like_upstream():
    other_in = {"key": "metadata.uid", "operator": "In", "values": ["x"]}
    other_notin = {"key": "metadata.uid", "operator": "NotIn", "values": ["x"]}
    assert not node_matches_selector(node("n1"), selector(term(fields=[other_in])))
    assert node_matches_selector(node("n1"), selector(term(fields=[other_notin])))


def test_unnamed_node_skips_match_fields_like_upstream():
    nameless = {"metadata": {"labels": {}}}
    assert node_matches_selector(nameless, selector(term(fields=[name_field("In", "elsewhere")])))


# --- PV and pod entry points -----------------------------------------------------------


def pv(node_affinity=None):
    spec = {} if node_affinity is None else {"nodeAffinity": node_affinity}
    return {"metadata": {"name": "pv1"}, "spec": spec}


def test_pv_without_required_affinity_fits_every_node():
    assert node_matches_pv_affinity(node(zone="a"), pv())
    assert node_matches_pv_affinity(node(zone="a"), pv({}))
    assert node_matches_pv_affinity(node(zone="a"), {"spec": None})


def test_pv_affinity_by_zone():
    zoned = pv({"required": selector(term(expr(ZONE, "In", "a")))})
    assert node_matches_pv_affinity(node(**{ZONE: "a"}), zoned)
    assert not node_matches_pv_affinity(node(**{ZONE: "b"}), zoned)
    assert not node_matches_pv_affinity(node(), zoned)


def test_pv_required_without_terms_fits_no_node():
    assert not node_matches_pv_affinity(node(zone="a"), pv({"required": {"nodeSelectorTerms": []}}))


def test_pv_match_fields_constrain_nothing_like_upstream():
    # CheckNodeAffinity evaluates a label-only node (kubernetes issue #81725).
    pinned = pv({"required": selector(term(fields=[name_field("In", "n1")]))})
    assert node_matches_pv_affinity(node("n2"), pinned)


def pod(node_selector=None, required=None):
    spec = {}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if required is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return {"spec": spec}


def test_pod_node_selector_and_affinity_are_anded():
    p = pod({"disk": "ssd"}, selector(term(expr("zone", "In", "a"))))
    assert pod_node_affinity_matches(node(zone="a", disk="ssd"), p)
    assert not pod_node_affinity_matches(node(zone="a", disk="hdd"), p)
    assert not pod_node_affinity_matches(node(zone="b", disk="ssd"), p)
    assert not pod_node_affinity_matches(node(zone="a"), p)


def test_pod_without_constraints_fits_and_empty_terms_do_not():
    assert pod_node_affinity_matches(node(), pod())
    assert pod_node_affinity_matches(node(), {})
    assert not pod_node_affinity_matches(node(), pod(required={"nodeSelectorTerms": []}))


def test_pod_match_fields_use_the_node_name():
    p = pod(required=selector(term(fields=[name_field("In", "n1")])))
    assert pod_node_affinity_matches(node("n1"), p)
    assert not pod_node_affinity_matches(node("n2"), p)


# --- label selectors, topology terms, label syntax ----------------------------------


def test_label_selector():
    labels = {"tier": "gold", "zone": "a"}
    assert label_selector_matches(labels, {})
    assert not label_selector_matches(labels, None)
    assert label_selector_matches(labels, {"matchLabels": {"tier": "gold"}})
    assert not label_selector_matches(labels, {"matchLabels": {"tier": "silver"}})
    assert label_selector_matches(labels, {"matchExpressions": [expr("zone", "NotIn", "b"), expr("x", "DoesNotExist")]})
    assert not label_selector_matches(
        labels, {"matchLabels": {"tier": "gold"}, "matchExpressions": [expr("zone", "In", "b")]}
    )
    assert not label_selector_matches(
        {"n": "5"}, {"matchExpressions": [expr("n", "Gt", "1")]}
    )  # not a LabelSelector op
    assert not label_selector_matches(None, {"matchLabels": {"tier": "gold"}})


def test_topology_terms():
    n = node(**{ZONE: "a", "region": "r1"})
    both = {"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}, {"key": "region", "values": ["r1"]}]}
    other = {"matchLabelExpressions": [{"key": ZONE, "values": ["b"]}]}
    assert node_matches_topology_terms(n, [])
    assert node_matches_topology_terms(n, None)
    assert node_matches_topology_terms(n, [both])
    assert node_matches_topology_terms(n, [other, both])
    assert not node_matches_topology_terms(n, [other])
    assert not node_matches_topology_terms(n, [{"matchLabelExpressions": []}])
    assert not node_matches_topology_terms(n, [{"matchLabelExpressions": [{"key": ZONE, "values": []}]}])


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("zone", True),
        ("topology.kubernetes.io/zone", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("/zone", False),
        ("a/b/c", False),
        ("Example.com/zone", False),
        ("-zone", False),
        ("", False),
        (None, False),
    ],
)
def test_label_key_syntax(key, ok):
    assert valid_label_key(key) is ok


@pytest.mark.parametrize(("value", "ok"), [("", True), ("a-b.c_d", True), ("-a", False), ("a" * 64, False), (3, False)])
def test_label_value_syntax(value, ok):
    assert valid_label_value(value) is ok


# --- tolerations ------------------------------------------------------------------------


def taint(key, effect="NoSchedule", value=None):
    out = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    return out


def test_exists_with_empty_key_tolerates_everything():
    taints = [taint("a"), taint("b", "NoExecute", "x")]
    assert tolerates(taints, [{"operator": "Exists"}])
    assert not tolerates(taints, [])


def test_equal_needs_the_value_and_empty_operator_means_equal():
    t = taint("dedicated", value="gpu")
    assert toleration_tolerates_taint({"key": "dedicated", "operator": "Equal", "value": "gpu"}, t)
    assert toleration_tolerates_taint({"key": "dedicated", "value": "gpu"}, t)
    assert not toleration_tolerates_taint({"key": "dedicated", "value": "cpu"}, t)
    assert not toleration_tolerates_taint({"key": "other", "operator": "Exists"}, t)


def test_empty_effect_matches_all_effects_and_set_effect_must_equal():
    t = taint("k", "NoExecute")
    assert toleration_tolerates_taint({"key": "k", "operator": "Exists"}, t)
    assert not toleration_tolerates_taint({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, t)


def test_prefer_no_schedule_is_ignored_by_default_effects():
    taints = [taint("soft", "PreferNoSchedule")]
    assert tolerates(taints, [])
    assert not tolerates(taints, [], effects=("PreferNoSchedule",))


def test_numeric_toleration_operators():
    t = taint("level", value="5")
    assert toleration_tolerates_taint({"key": "level", "operator": "Gt", "value": "4"}, t)
    assert not toleration_tolerates_taint({"key": "level", "operator": "Gt", "value": "5"}, t)
    assert toleration_tolerates_taint({"key": "level", "operator": "Lt", "value": "6"}, t)
    assert not toleration_tolerates_taint({"key": "level", "operator": "Lt", "value": "x"}, t)
    assert not toleration_tolerates_taint({"key": "level", "operator": "Bogus"}, t)


def test_untolerated_taints_lists_only_the_untolerated_in_order():
    taints = [taint("a"), taint("b"), taint("c", "NoExecute")]
    assert untolerated_taints(taints, [{"key": "b", "operator": "Exists"}]) == [taints[0], taints[2]]
    assert untolerated_taints(None, None) == []


# --- properties -----------------------------------------------------------------------------

KEYS = ["zone", "region", "example.com/tier", "kubernetes.io/hostname"]
VALUES = ["a", "b", "c", "1", "2", "10"]
labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES))
values_st = st.lists(st.sampled_from(VALUES), min_size=1, max_size=3)


@st.composite
def requirement_st(draw):
    key = draw(st.sampled_from(KEYS))
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if operator in ("In", "NotIn"):
        return expr(key, operator, *draw(values_st))
    if operator in ("Gt", "Lt"):
        return expr(key, operator, str(draw(st.integers(min_value=0, max_value=20))))
    return expr(key, operator)


term_st = st.lists(requirement_st(), min_size=0, max_size=3).map(lambda exprs: term(*exprs))


@given(labels_st, st.lists(term_st, max_size=4))
def test_selector_is_the_or_of_its_terms(labels, terms):
    n = {"metadata": {"name": "n", "labels": labels}}
    whole = node_matches_selector(n, selector(*terms))
    assert whole == any(node_matches_selector(n, selector(t)) for t in terms)


@given(labels_st, st.lists(requirement_st(), min_size=1, max_size=4))
def test_term_is_the_and_of_its_expressions(labels, exprs):
    n = {"metadata": {"name": "n", "labels": labels}}
    assert matches(n, *exprs) == all(matches(n, e) for e in exprs)


@given(labels_st, st.sampled_from(KEYS), values_st)
def test_notin_is_not_in_when_key_present(labels, key, values):
    n = {"metadata": {"name": "n", "labels": labels}}
    if key in labels:
        assert matches(n, expr(key, "NotIn", *values)) == (not matches(n, expr(key, "In", *values)))
    else:
        assert matches(n, expr(key, "NotIn", *values)) and not matches(n, expr(key, "In", *values))


@given(labels_st, st.sampled_from(KEYS))
def test_exists_and_doesnotexist_are_complementary(labels, key):
    n = {"metadata": {"name": "n", "labels": labels}}
    assert matches(n, expr(key, "Exists")) != matches(n, expr(key, "DoesNotExist"))
    assert matches(n, expr(key, "Exists")) == (key in labels)


@given(st.integers(min_value=0, max_value=2**62), st.integers(min_value=0, max_value=2**62))
def test_gt_lt_agree_with_integer_comparison(have, limit):
    n = node(n=str(have))
    assert matches(n, expr("n", "Gt", str(limit))) == (have > limit)
    assert matches(n, expr("n", "Lt", str(limit))) == (have < limit)


@given(labels_st, st.lists(requirement_st(), max_size=3))
def test_an_invalid_requirement_voids_any_term(labels, exprs):
    n = {"metadata": {"name": "n", "labels": labels}}
    assert not matches(n, *exprs, expr("zone", "In"))


taint_st = st.builds(
    lambda key, effect, value: {"key": key, "effect": effect, "value": value},
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
    st.sampled_from(["", "x", "y"]),
)
toleration_st = st.builds(
    lambda key, operator, effect, value: {"key": key, "operator": operator, "effect": effect, "value": value},
    st.sampled_from(["", "a", "b"]),
    st.sampled_from(["Exists", "Equal"]),
    st.sampled_from(["", "NoSchedule", "NoExecute"]),
    st.sampled_from(["", "x"]),
)


@given(st.lists(taint_st, max_size=4), st.lists(toleration_st, max_size=3), toleration_st)
def test_more_tolerations_never_tolerate_less(taints, tolerations, extra):
    if tolerates(taints, tolerations):
        assert tolerates(taints, [*tolerations, extra])


@given(st.lists(taint_st, max_size=4), st.lists(toleration_st, max_size=3))
def test_tolerates_iff_no_untolerated_hard_taint(taints, tolerations):
    left = untolerated_taints(taints, tolerations)
    assert tolerates(taints, tolerations) == (left == [])
    assert all(t["effect"] in ("NoSchedule", "NoExecute") for t in left)

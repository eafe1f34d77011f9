"""Node selector, label selector and toleration matching, as upstream evaluates them.

Mirrors k8s.io/component-helpers scheduling/corev1/nodeaffinity/nodeaffinity.go
(LazyErrorNodeSelector), apimachinery pkg/labels/selector.go (Requirement.Matches),
pkg/fields/selector.go and k8s.io/api core/v1/toleration.go (ToleratesTaint):

- terms are ORed; inside a term matchExpressions and matchFields are ANDed; a term with
  neither matches nothing;
- a requirement that fails upstream parsing (bad label key or value, In/NotIn without
  values, Exists/DoesNotExist with values, Gt/Lt without exactly one int64, unknown
  operator) makes its whole term match nothing, while the other terms still count;
- matchFields knows only the node's ``metadata.name``; only In/NotIn with exactly one
  value parse. Upstream compares a field missing from the node's field set as "", so
  another key with In matches nothing (unless its value is "") and with NotIn matches
  everything; the API server rejects such keys anyway;
- when the node has no name, upstream skips matchFields entirely. PV affinity is always
  checked that way (``CheckNodeAffinity`` builds a node from labels only), so matchFields
  in a PV's affinity constrain nothing (kubernetes issue #81725).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pvchaos.conformance.types import KubeObject, dig

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_INT64 = re.compile(r"[+-]?[0-9]+", re.ASCII)
_SET_OPS = ("In", "NotIn")
_UNARY_OPS = ("Exists", "DoesNotExist")
_ORDER_OPS = ("Gt", "Lt")
DEFAULT_EFFECTS = ("NoSchedule", "NoExecute")


def valid_label_key(key: object) -> bool:
    """A qualified name: optional DNS-subdomain prefix and "/", then a 1-63 char name."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or "/" in prefix or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME.fullmatch(name) is not None


def valid_label_value(value: object) -> bool:
    """Empty, or up to 63 alphanumerics, '-', '_', '.' beginning and ending alphanumeric."""
    return isinstance(value, str) and (value == "" or (len(value) <= 63 and _NAME.fullmatch(value) is not None))


def parse_int64(text: object) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: optional sign and ASCII digits, in int64 range."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True)
class _Requirement:
    """One parsed label requirement (``labels.Requirement``)."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, Any]) -> bool:
        """``Requirement.Matches``: NotIn and DoesNotExist hold when the key is absent."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        have = parse_int64(labels.get(self.key)) if present else None
        want = parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if self.operator == "Gt" else have < want


def _parse_requirement(expr: object, operators: Sequence[str]) -> _Requirement | None:
    """``labels.NewRequirement`` validation; None where upstream reports a parse error."""
    key, operator = dig(expr, "key", default=""), dig(expr, "operator", default="")
    values = dig(expr, "values", default=[])
    if operator not in operators or not isinstance(values, list) or not valid_label_key(key):
        return None
    if not all(valid_label_value(value) for value in values):
        return None
    if operator in _SET_OPS and not values:
        return None
    if operator in _UNARY_OPS and values:
        return None
    if operator in _ORDER_OPS and (len(values) != 1 or parse_int64(values[0]) is None):
        return None
    return _Requirement(key, operator, tuple(values))


def _requirements(exprs: Iterable[Any] | None, operators: Sequence[str]) -> list[_Requirement] | None:
    """Parse a list of expressions; None when any of them is invalid (the term errs)."""
    parsed = []
    for expr in exprs or []:
        requirement = _parse_requirement(expr, operators)
        if requirement is None:
            return None
        parsed.append(requirement)
    return parsed


def _field_requirements_match(exprs: list[Any], fields: Mapping[str, str]) -> bool | None:
    """``nodeSelectorRequirementsAsFieldSelector`` then Matches; None on a parse error."""
    results = []
    for expr in exprs:
        operator, values = dig(expr, "operator"), dig(expr, "values", default=[])
        if operator not in _SET_OPS or not isinstance(values, list) or len(values) != 1:
            return None
        equal = fields.get(dig(expr, "key", default=""), "") == values[0]
        results.append(equal if operator == "In" else not equal)
    return all(results)


def _term_matches(term: object, labels: Mapping[str, Any], fields: Mapping[str, str]) -> bool:
    """One NodeSelectorTerm: expressions AND fields; empty or unparsable terms match nothing."""
    exprs = dig(term, "matchExpressions", default=[])
    field_exprs = dig(term, "matchFields", default=[])
    if not exprs and not field_exprs:
        return False
    requirements = _requirements(exprs, _SET_OPS + _UNARY_OPS + _ORDER_OPS)
    if requirements is None:
        return False
    fields_ok = _field_requirements_match(field_exprs, fields) if field_exprs else True
    if fields_ok is None:
        return False
    if not all(req.matches(labels) for req in requirements):
        return False
    return fields_ok or not fields


def _node_labels(node: KubeObject | None) -> Mapping[str, Any]:
    labels: Mapping[str, Any] = dig(node, "metadata", "labels", default={})
    return labels


def _node_fields(node: KubeObject | None, match_fields: bool) -> dict[str, str]:
    name = dig(node, "metadata", "name", default="")
    return {"metadata.name": name} if match_fields and name else {}


def node_matches_selector(
    node: KubeObject | None, node_selector: KubeObject | None, *, match_fields: bool = True
) -> bool:
    """Does ``node`` satisfy a v1.NodeSelector? Terms ORed; no terms matches nothing.

    ``match_fields=False`` evaluates the node as upstream's label-only node, which is
    how PV affinity is checked.
    """
    if node is None:
        return False
    labels, fields = _node_labels(node), _node_fields(node, match_fields)
    terms = dig(node_selector, "nodeSelectorTerms", default=[])
    return any(_term_matches(term, labels, fields) for term in terms)


def node_matches_pv_affinity(node: KubeObject | None, pv: KubeObject) -> bool:
    """``CheckNodeAffinity``: PVs without ``spec.nodeAffinity.required`` fit every node."""
    required = dig(pv, "spec", "nodeAffinity", "required")
    if required is None:
        return True
    return node_matches_selector(node, required, match_fields=False)


def pod_node_affinity_matches(node: KubeObject, pod: KubeObject) -> bool:
    """``GetRequiredNodeAffinity(pod).Match``: spec.nodeSelector AND required node affinity."""
    labels = _node_labels(node)
    for key, value in dig(pod, "spec", "nodeSelector", default={}).items():
        if key not in labels or labels[key] != value:
            return False
    required = dig(pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    return required is None or node_matches_selector(node, required)


def label_selector_matches(labels: Mapping[str, Any] | None, selector: KubeObject | None) -> bool:
    """A metav1.LabelSelector (``LabelSelectorAsSelector``); an empty selector matches all.

    matchLabels become validated equality requirements; matchExpressions allow In, NotIn,
    Exists and DoesNotExist. An invalid selector matches nothing.
    """
    if selector is None:
        return False
    labels = labels or {}
    equals = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in dig(selector, "matchLabels", default={}).items()
    ]
    exprs = dig(selector, "matchExpressions", default=[])
    requirements = _requirements(equals + list(exprs), _SET_OPS + _UNARY_OPS)
    return requirements is not None and all(req.matches(labels) for req in requirements)


def node_matches_topology_terms(node: KubeObject, terms: Sequence[KubeObject] | None) -> bool:
    """``MatchTopologySelectorTerms`` (StorageClass allowedTopologies): no terms allows all.

    Each term's matchLabelExpressions are ANDed "key In values"; an empty or invalid
    term selects nothing.
    """
    if not terms:
        return True
    labels = _node_labels(node)
    for term in terms:
        exprs = [
            {"key": dig(expr, "key", default=""), "operator": "In", "values": dig(expr, "values", default=[])}
            for expr in dig(term, "matchLabelExpressions", default=[])
        ]
        requirements = _requirements(exprs, _SET_OPS)
        if exprs and requirements is not None and all(req.matches(labels) for req in requirements):
            return True
    return False


def toleration_tolerates_taint(toleration: KubeObject, taint: KubeObject) -> bool:
    """``Toleration.ToleratesTaint``: empty effect/key are wildcards; "" operator is Equal.

    Gt/Lt compare the taint's value with the toleration's as int64 (alpha since 1.35).
    """
    effect, key = dig(toleration, "effect", default=""), dig(toleration, "key", default="")
    if effect and effect != dig(taint, "effect", default=""):
        return False
    if key and key != dig(taint, "key", default=""):
        return False
    operator = dig(toleration, "operator", default="")
    want, have = dig(toleration, "value", default=""), dig(taint, "value", default="")
    if operator in ("", "Equal"):
        return bool(want == have)
    if operator == "Exists":
        return True
    if operator in ("Gt", "Lt"):
        limit, actual = parse_int64(want), parse_int64(have)
        if limit is None or actual is None:
            return False
        return actual > limit if operator == "Gt" else actual < limit
    return False


def untolerated_taints(
    node_taints: Iterable[KubeObject] | None,
    pod_tolerations: Iterable[KubeObject] | None,
    effects: Sequence[str] = DEFAULT_EFFECTS,
) -> list[KubeObject]:
    """Taints with one of ``effects`` that no toleration tolerates, in node order."""
    tolerations = list(pod_tolerations or [])
    return [
        taint
        for taint in node_taints or []
        if dig(taint, "effect", default="") in effects
        and not any(toleration_tolerates_taint(tol, taint) for tol in tolerations)
    ]


def tolerates(
    node_taints: Iterable[KubeObject] | None,
    pod_tolerations: Iterable[KubeObject] | None,
    effects: Sequence[str] = DEFAULT_EFFECTS,
) -> bool:
    """True when every taint with one of ``effects`` is tolerated (TaintToleration filter)."""
    return not untolerated_taints(node_taints, pod_tolerations, effects)

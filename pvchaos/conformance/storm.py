"""What a PVC storm must leave behind, and the arithmetic of its measurements (pure).

The storm (pvchaos/kit/storm.py) creates hundreds of claims and pods at once; at its end
one snapshot is judged here:
- the cluster invariants (conformance.invariants: no PV claimed twice, every pod on a
  node its PVs' nodeAffinity allows, Bound pairs point at each other);
- every claim of the storm Bound;
- every pod Running, except those a zone outage made unable to run (on a stopped node,
  or using a PV that only stopped nodes satisfy);
- after a zone outage, every claim and pod still unscheduled when the zone's nodes were
  tainted ended up in a surviving zone.
The rest turns the apiserver's latency histogram into percentiles and a growth curve
into an exponent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.conformance.invariants import Snapshot, check
from pvchaos.conformance.types import KubeObject, dig

ZONE_KEY = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def _key(obj: KubeObject) -> str:
    ns, name = dig(obj, "metadata", "namespace"), dig(obj, "metadata", "name")
    return f"{ns}/{name}" if ns else str(name)


def _pod_claims(pod: KubeObject) -> list[str]:
    ns = dig(pod, "metadata", "namespace")
    return [f"{ns}/{c}" for v in dig(pod, "spec", "volumes", default=[])
            if (c := dig(v, "persistentVolumeClaim", "claimName"))]


def unable_to_run(pod: KubeObject, snapshot: Snapshot, down_nodes: Collection[str]) -> str | None:
    """Why a pod cannot be Running after `down_nodes` stopped (None: it must run).
    A pod on a stopped node, or using a PV whose affinity only stopped nodes satisfy."""
    node = dig(pod, "spec", "nodeName")
    if node and node in down_nodes:
        return f"on stopped node {node}"
    claims = {_key(c): c for c in snapshot.claims}
    volumes = {dig(v, "metadata", "name"): v for v in snapshot.volumes}
    alive = [n for n in snapshot.nodes if dig(n, "metadata", "name") not in down_nodes]
    for claim_key in _pod_claims(pod):
        pv = volumes.get(dig(claims.get(claim_key), "spec", "volumeName"))
        if pv is not None and not any(node_matches_pv_affinity(n, pv) for n in alive):
            return f"PV {dig(pv, 'metadata', 'name')} of {claim_key} is reachable only from stopped nodes"
    return None


def storm_violations(snapshot: Snapshot, namespace: str, down_nodes: Collection[str] = ()) -> list[str]:
    """Everything wrong with the storm's namespace at its end, one line each (empty: all good)."""
    out = [str(v) for v in check(snapshot)]
    mine = [c for c in snapshot.claims if dig(c, "metadata", "namespace") == namespace]
    pending = sorted(_key(c) for c in mine if dig(c, "status", "phase") != "Bound")
    if pending:
        out.append(f"[claim-not-bound] {len(pending)} of {len(mine)} claims are not Bound (the PV controller "
                   f"binds them, once provisioned or matched): {_few(pending)}")
    stuck = []
    for pod in snapshot.pods:
        if dig(pod, "metadata", "namespace") != namespace or dig(pod, "status", "phase") == "Running":
            continue
        if unable_to_run(pod, snapshot, down_nodes) is None:
            stuck.append(f"{_key(pod)} ({dig(pod, 'status', 'phase')}, node {dig(pod, 'spec', 'nodeName') or '-'})")
    if stuck:
        out.append(f"[pod-not-running] {len(stuck)} pods are not Running: {_few(sorted(stuck))}")
    return out


def unscheduled(pods: Iterable[KubeObject], claims: Iterable[KubeObject]) -> tuple[set[str], set[str]]:
    """(pods without a node, claims with neither a volume nor a selected node): what the
    scheduler had not decided yet at the moment of a snapshot."""
    pod_keys = {_key(p) for p in pods if not dig(p, "spec", "nodeName")}
    claim_keys = {_key(c) for c in claims
                  if not dig(c, "spec", "volumeName") and not dig(c, "metadata", "annotations", SELECTED_NODE)}
    return pod_keys, claim_keys


def landed_outside(snapshot: Snapshot, down_zone: str, pods: Collection[str], claims: Collection[str]) -> list[str]:
    """Pods and claims that were undecided when `down_zone` went down, yet ended up in it."""
    zone_of = {dig(n, "metadata", "name"): dig(n, "metadata", "labels", ZONE_KEY) for n in snapshot.nodes}
    out = []
    for pod in snapshot.pods:
        node = dig(pod, "spec", "nodeName")
        if _key(pod) in pods and node and zone_of.get(node) == down_zone:
            out.append(f"pod {_key(pod)} on {node}")
    zone_nodes = [n for n in snapshot.nodes if dig(n, "metadata", "labels", ZONE_KEY) == down_zone]
    others = [n for n in snapshot.nodes if dig(n, "metadata", "labels", ZONE_KEY) != down_zone]
    volumes = {dig(v, "metadata", "name"): v for v in snapshot.volumes}
    for claim in snapshot.claims:
        pv = volumes.get(dig(claim, "spec", "volumeName"))
        if _key(claim) not in claims or pv is None:
            continue
        if any(node_matches_pv_affinity(n, pv) for n in zone_nodes) and not any(
                node_matches_pv_affinity(n, pv) for n in others):
            out.append(f"claim {_key(claim)} bound to PV {dig(pv, 'metadata', 'name')} in {down_zone}")
    return sorted(out)


def _few(items: Sequence[str], n: int = 8) -> str:
    return ", ".join(items[:n]) + (f" (and {len(items) - n} more)" if len(items) > n else "")


# ---- the apiserver's latency histogram ---------------------------------------------------

LONG_RUNNING_VERBS = frozenset({"WATCH", "CONNECT", "WATCHLIST"})
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _samples(text: str, name: str) -> Iterator[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of metric `name` in Prometheus text."""
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m["name"] == name:
            yield dict(_LABEL.findall(m["labels"] or "")), float(m["value"])


def histogram(text: str, name: str = "apiserver_request_duration_seconds",
              verbs: Collection[str] | None = None) -> dict[float, float]:
    """Cumulative bucket counts {le: count} of a Prometheus histogram, summed over every
    label set except `le`; long-running verbs (WATCH, CONNECT) are left out, and `verbs`
    narrows further."""
    buckets: dict[float, float] = {}
    for labels, value in _samples(text, f"{name}_bucket"):
        verb = labels.get("verb", "")
        if verb in LONG_RUNNING_VERBS or (verbs is not None and verb not in verbs):
            continue
        le = math.inf if labels.get("le") in ("+Inf", "Inf") else float(labels.get("le", "nan"))
        buckets[le] = buckets.get(le, 0.0) + value
    return buckets


def requests_by_resource(text: str, verbs: Collection[str], name: str = "apiserver_request_total") -> dict[str, float]:
    """Requests per `resource[/subresource]` of a counter, for the given verbs: where a
    storm's writes go (events, leases, status updates...)."""
    out: dict[str, float] = {}
    for labels, value in _samples(text, name):
        if labels.get("verb", "") in verbs:
            what = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            out[what] = out.get(what, 0.0) + value
    return out


def delta(after: Mapping[Any, float], before: Mapping[Any, float]) -> dict[Any, float]:
    """The requests made between two scrapes (counters only grow; a restart would show as negative)."""
    return {le: count - before.get(le, 0.0) for le, count in after.items()}


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile: linear inside the bucket holding the q-th request;
    None when there were no requests. A quantile in the +Inf bucket is the last finite bound."""
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q}: between 0 and 1")
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * ((rank - below) / (count - below) if count > below else 0.0)
        lower, below = le, count
    return lower


# ---- growth --------------------------------------------------------------------------------

def fitted_exponent(sizes: Sequence[float], values: Sequence[float]) -> float:
    """k in value ~ size^k, least squares on logarithms (1: linear, 2: quadratic)."""
    pairs = [(math.log(s), math.log(v)) for s, v in zip(sizes, values, strict=True) if s > 0 and v > 0]
    if len(pairs) < 2:
        raise ValueError("a growth exponent needs two or more positive points")
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    var = sum((x - mx) ** 2 for x, _ in pairs)
    if var == 0:
        raise ValueError("a growth exponent needs two or more different sizes")
    return sum((x - mx) * (y - my) for x, y in pairs) / var


@dataclass(frozen=True)
class Cost:
    """Resident memory of a local cluster: a fixed part plus a part per node and per pod (MiB)."""

    base_mib: float
    per_node_mib: float
    per_pod_mib: float

    def estimate(self, nodes: int, pods: int) -> float:
        return self.base_mib + self.per_node_mib * nodes + self.per_pod_mib * pods

"""`pvchaos explain` on object sets recorded from a real 1.35.4 control plane (the local
backend; `kube.explain_read.read_view`, managedFields dropped), so the engine reads
what an API server really sends: typed-client defaults, bind-completed annotations,
events.k8s.io events seen through core/v1, and the scheduler's own messages."""

from __future__ import annotations

import json
from pathlib import Path

from pvchaos.conformance.claims import claim_key
from pvchaos.conformance.explain import Scene, explain

DATA = Path(__file__).parent / "data"


def recorded(name: str) -> Scene:
    data = json.loads((DATA / name).read_text())
    return Scene(pod=data["pod"], nodes=data["nodes"], claims={claim_key(c): c for c in data["claims"]},
                 pvs=data["pvs"], classes={c["metadata"]["name"]: c for c in data["classes"]},
                 events=data["events"], minor=data["minor"])


def test_two_volumes_one_immediate_one_with_match_fields() -> None:
    """rec/data bound by an Immediate class in zone-a; rec/logs on a static PV whose first
    term has a matchFields (ignored) and zone-c, the second a label no node has; the pod
    is pinned to zone-b."""
    e = explain(recorded("explain_two_volumes_1.35.4.json"))
    assert e.cause.code == "VOLUMES_DISJOINT"
    assert "rec/data -> zone-a-1, zone-a-2; rec/logs -> zone-c-1, zone-c-2" in e.cause.summary
    assert e.scheduler.agrees is True, e.scheduler.differences
    assert e.scheduler.predicted == {"NODE_AFFINITY_CONFLICT": 2, "POD_AFFINITY_MISMATCH": 4}
    zone_b = next(v for v in e.nodes if v.node == "zone-b-1")
    logs = next(x for x in zone_b.exclusions if x.claim == "rec/logs")
    assert logs.detail == ("claim rec/logs -> PV rec-fields: node affinity none of 2 terms match: term 1: needs "
                           "topology.kubernetes.io/zone In [zone-c]; node has topology.kubernetes.io/zone=zone-b; "
                           "term 2: needs storage In [nvme]; node has storage=ssd (matchFields are ignored for PV "
                           "affinity)")


def test_lost_claim() -> None:
    e = explain(recorded("explain_lost_claim_1.35.4.json"))
    assert e.cause.code == "PV_GONE"
    assert e.pod_wide is not None and e.pod_wide.reasons == ("PVC_BOUND_TO_MISSING_PV",)
    assert e.scheduler.agrees is True

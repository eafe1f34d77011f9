"""What must not change while the control plane is replaced underneath the workloads (pure).

Taken once before an upgrade (a `Baseline` of one namespace) and compared with every
snapshot during and after it:
- no PV changes phase or claimRef;
- no claim that was Bound is lost, unbound or bound to another PV (a claim that binds
  later joins the baseline, so it may not be bound twice either);
- no pod that was Running is evicted, deleted, replaced or moved.
The cluster-wide invariants (conformance.invariants) are checked next to this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pvchaos.conformance.invariants import Snapshot

KubeObject = Mapping[str, Any]


def _meta(o: KubeObject) -> Mapping[str, Any]:
    return o.get("metadata") or {}


def _ns(o: KubeObject) -> str | None:
    return _meta(o).get("namespace")


def _claim_ref(pv: KubeObject) -> str | None:
    ref = (pv.get("spec") or {}).get("claimRef")
    return f"{ref.get('namespace')}/{ref.get('name')} (uid {ref.get('uid')})" if ref else None


def _phase(o: KubeObject) -> str | None:
    return (o.get("status") or {}).get("phase")


@dataclass(frozen=True)
class Baseline:
    """The state of one namespace's storage and pods that must hold from now on."""

    namespace: str
    volumes: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)  # PV -> (phase, claimRef)
    bound: Mapping[str, str] = field(default_factory=dict)  # claim -> PV
    running: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)  # pod -> (uid, node)

    def describe(self) -> str:
        return f"{len(self.volumes)} PVs, {len(self.bound)} Bound claims, {len(self.running)} Running pods"


def baseline(snapshot: Snapshot, namespace: str) -> Baseline:
    """The PVs claimed from `namespace`, its Bound claims and its Running pods, now."""
    volumes = {str(_meta(v).get("name")): (_phase(v), _claim_ref(v)) for v in snapshot.volumes
               if ((v.get("spec") or {}).get("claimRef") or {}).get("namespace") == namespace}
    return Baseline(namespace, volumes, _bound(snapshot, namespace), {
        str(_meta(p).get("name")): (str(_meta(p).get("uid")), (p.get("spec") or {}).get("nodeName"))
        for p in snapshot.pods if _ns(p) == namespace and _phase(p) == "Running" and not _meta(p).get("deletionTimestamp")})


def _bound(snapshot: Snapshot, namespace: str) -> dict[str, str]:
    return {str(_meta(c).get("name")): str((c.get("spec") or {}).get("volumeName"))
            for c in snapshot.claims if _ns(c) == namespace and _phase(c) == "Bound"}


def with_new_bindings(base: Baseline, snapshot: Snapshot) -> Baseline:
    """The baseline plus claims that have bound since: once Bound, they must stay so."""
    fresh = {k: v for k, v in _bound(snapshot, base.namespace).items() if k not in base.bound}
    return replace(base, bound={**base.bound, **fresh}) if fresh else base


def disturbances(base: Baseline, snapshot: Snapshot) -> list[str]:
    """Every way the snapshot departs from the baseline, one line each (empty: none)."""
    out: list[str] = []
    volumes = {str(_meta(v).get("name")): v for v in snapshot.volumes}
    for name, (phase, ref) in sorted(base.volumes.items()):
        pv = volumes.get(name)
        if pv is None:
            out.append(f"PV {name} ({phase}, claimRef {ref}) is gone")
            continue
        if _phase(pv) != phase:
            out.append(f"PV {name} changed phase {phase} -> {_phase(pv)}")
        if _claim_ref(pv) != ref:
            out.append(f"PV {name} changed claimRef {ref} -> {_claim_ref(pv)}")
    claims = {str(_meta(c).get("name")): c for c in snapshot.claims if _ns(c) == base.namespace}
    for name, volume in sorted(base.bound.items()):
        claim = claims.get(name)
        if claim is None:
            out.append(f"claim {base.namespace}/{name} (Bound to {volume}) is lost")
        elif _phase(claim) != "Bound" or (claim.get("spec") or {}).get("volumeName") != volume:
            out.append(f"claim {base.namespace}/{name} was Bound to {volume}, now {_phase(claim)} "
                       f"to {(claim.get('spec') or {}).get('volumeName')!r}")
    pods = {str(_meta(p).get("name")): p for p in snapshot.pods if _ns(p) == base.namespace}
    for name, (uid, node) in sorted(base.running.items()):
        pod = pods.get(name)
        if pod is None or str(_meta(pod).get("uid")) != uid:
            out.append(f"pod {base.namespace}/{name} (Running on {node}) was deleted or replaced")
        elif _meta(pod).get("deletionTimestamp"):
            out.append(f"pod {base.namespace}/{name} on {node} is being evicted or deleted")
        elif _phase(pod) != "Running" or (pod.get("spec") or {}).get("nodeName") != node:
            out.append(f"pod {base.namespace}/{name} was Running on {node}, now {_phase(pod)} "
                       f"on {(pod.get('spec') or {}).get('nodeName')}")
    return out

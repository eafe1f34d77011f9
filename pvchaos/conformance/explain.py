"""Why a pod is Pending: per node, the constraints that exclude it, the root cause, and
whether kube-scheduler's latest FailedScheduling message agrees.

This is the troubleshooting people do by hand (read the events, the claims, their PVs'
nodeAffinity, the classes' binding mode and allowedTopologies, the node labels and
taints, and reason it out). ``verdicts`` judges each node, ``causes`` names the root
cause, ``scheduler_message`` reads the scheduler's counts; a disagreement is reported,
never hidden. Pure: the caller passes plain Kubernetes JSON (``Scene``); no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pvchaos.conformance import scheduler_message
from pvchaos.conformance.causes import Cause, root_causes
from pvchaos.conformance.placement import pod_claim_keys
from pvchaos.conformance.types import KubeObject, dig
from pvchaos.conformance.verdicts import (
    ClaimState,
    Exclusion,
    NodeVerdict,
    Scene,
    claim_states,
    node_verdict,
    pod_key,
    pod_wide_exclusion,
    pvs_by_name,
)
from pvchaos.conformance.volume_setup import setup_causes

__all__ = ["Agreement", "Cause", "ClaimState", "Exclusion", "Explanation", "NodeVerdict", "Scene", "explain",
           "explain_placed"]


@dataclass(frozen=True)
class Agreement:
    """The scheduler's latest FailedScheduling message against the prediction."""

    message: str | None
    predicted: Mapping[str, int]
    predicted_pod_wide: str | None
    agrees: bool | None  # None: no filter message to compare with
    differences: tuple[str, ...] = ()
    parsed: scheduler_message.SchedulerMessage | None = None
    stale: str | None = None  # the message predates this change of the pod or its claims


@dataclass(frozen=True)
class Explanation:
    pod: str
    nodes: tuple[NodeVerdict, ...]
    claims: tuple[ClaimState, ...]
    pod_wide: Exclusion | None
    causes: tuple[Cause, ...]  # every independent cause, the one to fix first first
    scheduler: Agreement

    @property
    def cause(self) -> Cause:
        """The cause to fix first."""
        return self.causes[0]

    @property
    def schedulable(self) -> bool:
        """Some node fits and nothing else holds the pod back (the exit code's 0)."""
        return self.cause.code == "SCHEDULABLE"

    @property
    def fitting(self) -> tuple[str, ...]:
        return () if self.pod_wide else tuple(v.node for v in self.nodes if v.fits)


# ---- agreement with the scheduler -------------------------------------------------------------

def _event_time(event: KubeObject) -> str:
    return str(dig(event, "series", "lastObservedTime") or dig(event, "lastTimestamp") or dig(event, "eventTime")
               or dig(event, "metadata", "creationTimestamp") or "")


def _instant(text: object) -> datetime | None:
    """An API timestamp ("...Z", with or without fractions) as a datetime; None when absent or unreadable."""
    try:
        found = datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None
    return found.replace(tzinfo=UTC) if found is not None and found.tzinfo is None else found


EPOCH = datetime.fromtimestamp(0, UTC)


def latest_failed_scheduling(scene: Scene) -> KubeObject | None:
    """The newest FailedScheduling event about this pod (same uid when the event has one)."""
    uid = dig(scene.pod, "metadata", "uid")
    found = [e for e in scene.events
             if dig(e, "reason") == "FailedScheduling" and dig(e, "involvedObject", "kind") == "Pod"
             and dig(e, "involvedObject", "name") == dig(scene.pod, "metadata", "name")
             and (not uid or not dig(e, "involvedObject", "uid") or dig(e, "involvedObject", "uid") == uid)]
    return max(found, key=lambda e: _instant(_event_time(e)) or EPOCH) if found else None


def _changes(obj: KubeObject, what: str, with_status: bool) -> list[tuple[datetime, str]]:
    """When ``obj`` was created and written (managedFields), each with who wrote it. The
    pod's status is left out: the scheduler writes PodScheduled itself with its message."""
    out = []
    created = _instant(dig(obj, "metadata", "creationTimestamp"))
    if created is not None:
        out.append((created, f"{what} created"))
    for entry in dig(obj, "metadata", "managedFields", default=[]) or []:
        when = _instant(dig(entry, "time"))
        if when is not None and (with_status or dig(entry, "subresource") != "status"):
            part = " status" if dig(entry, "subresource") == "status" else ""
            out.append((when, f"{what}{part} written by {dig(entry, 'manager', default='?')}"))
    return out


def last_change(scene: Scene) -> tuple[datetime, str] | None:
    """The newest change of the pod (not its status) or of one of its claims (binding
    included), with what changed: a scheduler message older than it is stale."""
    found = _changes(scene.pod, f"pod {pod_key(scene.pod)}", with_status=False)
    for key in dict.fromkeys(pod_claim_keys(scene.pod)):
        if key in scene.claims:
            found += _changes(scene.claims[key], f"claim {key}", with_status=True)
    return max(found, key=lambda c: c[0]) if found else None


def staleness(scene: Scene, event: KubeObject) -> str | None:
    """Why ``event`` no longer speaks for the pod as it is, or None when nothing changed since."""
    said, changed = _instant(_event_time(event)), last_change(scene)
    if said is None or changed is None or changed[0] <= said:
        return None
    return (f"stale: the message is from {said.isoformat()}, older than the last change ({changed[1]} at "
            f"{changed[0].isoformat()}); the scheduler has not judged the pod since")


def agreement(scene: Scene, verdicts: Sequence[NodeVerdict], pod_wide: Exclusion | None) -> Agreement:
    """Compare the predicted reasons with the scheduler's latest message: per-reason node
    counts, or the pod-wide reason. Agreement needs a reason on some side: "nothing" and
    "nothing" is not compared, and a reason explain has no key for is a difference."""
    predicted: Counter[str] = Counter()
    if dig(scene.pod, "spec", "nodeName"):  # the scheduler skips a pod with a nodeName
        return Agreement(None, {}, None, None, ("the pod names its node; the scheduler does not judge it",))
    if pod_wide is None:
        for v in verdicts:
            predicted.update(v.scheduler_reasons())
    wide = pod_wide.reasons[0] if pod_wide else None
    event = latest_failed_scheduling(scene)
    if event is None:
        return Agreement(None, dict(predicted), wide, None, ("no FailedScheduling event for this pod",))
    text = str(dig(event, "message", default=""))
    parsed = scheduler_message.parse(text, scene.minor)
    stale = staleness(scene, event)
    notes = (stale,) if stale else ()
    if parsed.total is None:
        return Agreement(text, dict(predicted), wide, None, ("the latest message is not a filter verdict", *notes),
                         parsed, stale)
    differences = []
    if parsed.total != len(verdicts):
        differences.append(f"the scheduler counted {parsed.total} nodes, explain sees {len(verdicts)}")
    if wide is not None or parsed.pod_wide is not None:
        if parsed.pod_wide is not None and parsed.pod_wide_key is None:
            differences.append(f"not modelled by explain: {parsed.pod_wide!r} (the "
                               f"{scheduler_message.unmodeled_pod_wide_plugin(parsed.pod_wide)} plugin)")
        if parsed.pod_wide_key != wide:
            differences.append(f"the scheduler says {parsed.pod_wide or dict(parsed.counts)!r}, explain predicts "
                               f"{wide or dict(predicted) or 'no reason'}")
    else:
        for key in sorted(set(predicted) | set(parsed.counts)):
            if predicted.get(key, 0) != parsed.counts.get(key, 0):
                differences.append(f"{key}: the scheduler counts {parsed.counts.get(key, 0)} node(s), "
                                   f"explain {predicted.get(key, 0)}")
        for reason, count in parsed.unknown.items():
            differences.append(f"not modelled by explain: {count} {reason}")
    compared = bool(predicted or wide or parsed.counts or parsed.pod_wide_key)
    if not differences and not compared:
        return Agreement(text, dict(predicted), wide, None, ("neither the scheduler nor explain names a reason",
                                                             *notes), parsed, stale)
    return Agreement(text, dict(predicted), wide, not differences, (*differences, *notes), parsed, stale)


# ---- the whole pod ---------------------------------------------------------------------------

def explain_placed(scene: Scene) -> Explanation | None:
    """A pod the scheduler placed that is still Pending (ContainerCreating): the volume
    step that holds it (attach, mount, driver registration), or None when no step has
    reported a failure."""
    causes = setup_causes(scene.pod, scene.nodes, scene.events, scene.attachments, scene.csinodes)
    if not causes:
        return None
    node = dig(scene.pod, "spec", "nodeName")
    done = Agreement(None, {}, None, None, (f"the scheduler placed the pod on node {node}; the volume steps there hold it",))
    return Explanation(pod_key(scene.pod), (), tuple(claim_states(scene)), None, causes, done)


def explain(scene: Scene) -> Explanation:
    """Per-node verdicts, claim states, the root cause and the scheduler's agreement."""
    claims = claim_states(scene)
    pvs = pvs_by_name(scene)
    by_name = sorted(scene.nodes, key=lambda n: str(dig(n, 'metadata', 'name', default='')))
    verdicts = tuple(node_verdict(scene, node, claims, pvs) for node in by_name)
    pod_wide = pod_wide_exclusion(claims)
    scheduler = agreement(scene, verdicts, pod_wide)
    causes = root_causes(scene, verdicts, claims, scheduler.parsed, scheduler.stale)
    return Explanation(pod_key(scene.pod), verdicts, tuple(claims), pod_wide, causes, scheduler)



"""Reading kube-scheduler's FailedScheduling message: which filter excluded how many nodes.

The text comes from ``FitError.Error()`` (pkg/scheduler/framework/types.go):

- ``0/<all> nodes are available: <text>.`` when a PreFilter plugin rejected the pod
  for every node at once (an unbound Immediate claim, a missing claim);
- ``0/<all> nodes are available: <n> <reason>, <n> <reason>.`` otherwise: a histogram
  of the reasons the nodes were filtered with, sorted as strings. A node counts once
  per reason its first failing filter gave (VolumeBinding may give two);
- either followed by `` preemption: ...``, which says nothing about the filters.

Reasons are recognised by the wording table in ``conformance.messages``, for the
cluster's minor version when known, else any wording; a reason the table does not
know is kept as text, so a disagreement can be shown rather than hidden.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from pvchaos.conformance import messages

NODE_REASON_KEYS = (
    "NODE_AFFINITY_CONFLICT", "NO_PV_TO_BIND", "PV_NOT_EXIST", "NOT_ENOUGH_STORAGE", "UNTOLERATED_TAINT",
    "NODE_UNSCHEDULABLE", "POD_AFFINITY_MISMATCH", "VOLUME_ZONE_CONFLICT", "INSUFFICIENT_EPHEMERAL",
    "NODE_NAME_MISMATCH", "INSUFFICIENT_CPU", "INSUFFICIENT_MEMORY",
)
"""Per-node filter reasons the explanation models (keys of ``messages.MESSAGES``)."""

POD_WIDE_KEYS = ("UNBOUND_IMMEDIATE", "PVC_NOT_FOUND", "PVC_BEING_DELETED", "PVC_BOUND_TO_MISSING_PV")
"""PreFilter rejections that exclude every node at once."""

UNMODELED: tuple[tuple[str, str, str], ...] = (
    # (words of the reason, the scheduler plugin, the cause code explain gives it)
    ("Insufficient ", "NodeResourcesFit", "INSUFFICIENT_RESOURCES"),  # noderesources/fit.go
    ("Too many pods", "NodeResourcesFit", "INSUFFICIENT_RESOURCES"),
    ("didn't match pod affinity rules", "InterPodAffinity", "INTER_POD_AFFINITY"),  # interpodaffinity/filtering.go
    ("didn't match pod anti-affinity rules", "InterPodAffinity", "INTER_POD_AFFINITY"),
    ("didn't satisfy existing pods anti-affinity rules", "InterPodAffinity", "INTER_POD_AFFINITY"),
    ("topology spread constraints", "PodTopologySpread", "TOPOLOGY_SPREAD"),  # podtopologyspread/filtering.go
    ("free ports for the requested pod ports", "NodePorts", "UNMODELED_FILTER"),
    ("exceed max volume count", "NodeVolumeLimits", "VOLUME_LIMIT_EXCEEDED"),  # nodevolumelimits/csi.go
    ("ReadWriteOncePod access mode already in-use", "VolumeRestrictions", "RWOP_CLAIM_IN_USE"),  # volumerestrictions
)
"""Reasons of filters explain does not judge per node, with the code a cause from them gets.
A reason not listed is still a cause (``UNMODELED_FILTER``), never a silent "fits"."""


UNMODELED_POD_WIDE: tuple[tuple[str, str], ...] = (
    # (words of a PreFilter rejection, the scheduler plugin): rejections of every node at
    # once that explain does not reproduce; each is UNMODELED_FILTER, never "fits"
    ("resourceclaim", "DynamicResources"),  # dynamicresources PreFilter: a missing or unallocatable claim
    ("ResourceClaim", "DynamicResources"),
)


def unmodeled_pod_wide_plugin(reason: str) -> str:
    """The plugin behind a pod-wide rejection explain has no key for."""
    return next((plugin for words, plugin in UNMODELED_POD_WIDE if words in reason), "an unmodelled PreFilter")


def unmodeled_code(reason: str) -> tuple[str, str]:
    """(plugin, cause code) for a reason the per-node model does not predict."""
    return next(((plugin, code) for words, plugin, code in UNMODELED if words in reason),
                ("an unmodelled filter", "UNMODELED_FILTER"))


_HEAD = re.compile(r"0/(?P<total>\d+) nodes are available:?\s*")
_ENTRY = re.compile(r"(?P<count>\d+) (?P<reason>.+?)(?=, \d+ |$)")


@dataclass(frozen=True)
class SchedulerMessage:
    """A parsed FailedScheduling message. ``counts`` maps reason keys to node counts;
    ``unknown`` holds reasons (with counts) the table has no key for."""

    text: str
    total: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    pod_wide: str | None = None
    pod_wide_key: str | None = None
    unknown: Mapping[str, int] = field(default_factory=dict)


def _pattern(template: str) -> re.Pattern[str]:
    """A wording as a regular expression: each {field} stands for a name (no quotes)."""
    parts = [re.escape(literal) + ('[^"]*' if name is not None else "")
             for literal, name, _, _ in string.Formatter().parse(template)]
    return re.compile("".join(parts))


def _wordings(key: str, minor: int | None) -> list[str]:
    rows = messages.MESSAGES[key]
    if minor is None:
        return [text for _, text in rows]
    return [next((text for since, text in rows if minor >= since), rows[-1][1])]


def classify(reason: str, keys: tuple[str, ...], minor: int | None) -> str | None:
    """The key whose wording ``reason`` contains (for ``minor`` when known), or None."""
    for key in keys:
        if any(_pattern(text).search(reason) for text in _wordings(key, minor)):
            return key
    return None


def _filter_part(body: str) -> str:
    """The filter verdict only: PostFilter reports ("no new claims to deallocate",
    "preemption: ...") follow it, each appended as " <text>."."""
    body = body.split(" preemption:", 1)[0]
    return body.split(". ", 1)[0].strip().rstrip(".").rstrip(",").strip()


def parse(text: str, minor: int | None = None) -> SchedulerMessage:
    """Parse one FailedScheduling message; text without the ``0/N`` head is kept as pod-wide."""
    head = _HEAD.match(text.strip())
    if head is None:
        return SchedulerMessage(text=text, pod_wide=text.strip(), pod_wide_key=classify(text, POD_WIDE_KEYS, minor))
    body = _filter_part(text.strip()[head.end():])
    total = int(head["total"])
    if not re.match(r"\d+ ", body):
        return SchedulerMessage(text=text, total=total, pod_wide=body or None,
                                pod_wide_key=classify(body, POD_WIDE_KEYS, minor) if body else None)
    counts: dict[str, int] = {}
    unknown: dict[str, int] = {}
    for entry in _ENTRY.finditer(body):
        count, reason = int(entry["count"]), entry["reason"].strip()
        key = classify(reason, NODE_REASON_KEYS, minor)
        bucket, name = (counts, key) if key else (unknown, reason)
        bucket[name] = bucket.get(name, 0) + count
    return SchedulerMessage(text=text, total=total, counts=counts, unknown=unknown)

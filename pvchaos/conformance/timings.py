"""How long each node-lifecycle step may take, derived from what the cluster was told
(pure): a fixed timeout lets a controller-manager that notices a dead node five times
later than configured pass; a bound from the configuration does not.

Upstream's node-lifecycle controller (pkg/controller/nodelifecycle) looks at every node
each `--node-monitor-period`, and marks one Unknown once its last heartbeat (Lease
renewal or status update) is older than `--node-monitor-grace-period`; the unreachable
taints follow in the same pass (NoExecute through a per-zone rate limiter whose first
token is free). The taint-eviction controller deletes a pod `tolerationSeconds` after
the NoExecute taint. So a step's bound is its configured time plus one monitor period,
stretched by a stated factor and margin for a loaded machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# Upstream defaults (kube-controller-manager 1.32+), used when the cluster's own settings
# cannot be read (an existing cluster).
UPSTREAM_GRACE_SECONDS = 50.0
UPSTREAM_MONITOR_PERIOD_SECONDS = 5.0
UPSTREAM_EVICTION_RATE = 0.1  # --node-eviction-rate: nodes a second a healthy zone's tainter may taint
# The stated allowance for a busy control plane: bound = (configured + one period) x
# FACTOR + MARGIN. Loose enough for 2 cores under load, tight enough that a grace period
# 4x the configured one fails (8 s configured: bound 18.5 s; 32 s real: ~33 s measured).
FACTOR = 1.5
MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class LifecycleSettings:
    """The node-lifecycle settings a bound is computed from, and where they came from."""

    grace_seconds: float
    monitor_period_seconds: float
    source: str
    eviction_rate_per_second: float = UPSTREAM_EVICTION_RATE  # the cluster's, where it says


@dataclass(frozen=True)
class Bound:
    """The most a step may take, and why: the message of a failed check quotes `why`."""

    step: str
    seconds: float
    why: str

    def verdict(self, measured: float) -> str | None:
        """None when `measured` is within the bound, else the sentence that says by how much."""
        if measured <= self.seconds:
            return None
        return (f"{self.step} took {measured:.1f}s, expected at most {self.seconds:.1f}s ({self.why}): the "
                "control plane is slower than it was configured to be")


def _seconds(text: str | None) -> float | None:
    """`8s`, `1m30s`, `500ms`, `8s (harness)` -> seconds; None when unreadable."""
    if not text:
        return None
    m = re.match(r"\s*((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)", text)
    if not m:
        return None
    total = 0.0
    for value, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", m.group(1)):
        total += float(value) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def lifecycle_settings(description: Mapping[str, str]) -> LifecycleSettings:
    """From a cluster handle's description (local and kind record the flags they set);
    upstream's defaults, said so, where the cluster does not tell."""
    grace = _seconds(description.get("node-monitor-grace-period"))
    period = _seconds(description.get("node-monitor-period"))
    rate = _rate(description.get("node-eviction-rate"))
    if grace is None:
        return LifecycleSettings(UPSTREAM_GRACE_SECONDS, period or UPSTREAM_MONITOR_PERIOD_SECONDS,
                                 "upstream defaults: the cluster's own settings could not be read", rate)
    if period is None:
        return LifecycleSettings(grace, UPSTREAM_MONITOR_PERIOD_SECONDS,
                                 "the cluster's grace period; monitor period: upstream default", rate)
    return LifecycleSettings(grace, period, "the cluster's configuration"
                             + ("" if "node-eviction-rate" in description else "; eviction rate: upstream default"),
                             rate)


def _rate(text: str | None) -> float:
    """`--node-eviction-rate` as the cluster states it; upstream's 0.1 when it does not."""
    try:
        rate = float(str(text).split()[0]) if text else UPSTREAM_EVICTION_RATE
    except ValueError:
        return UPSTREAM_EVICTION_RATE
    return rate if rate > 0 else UPSTREAM_EVICTION_RATE


def _stretch(seconds: float) -> float:
    return seconds * FACTOR + MARGIN_SECONDS


def to_unreachable(s: LifecycleSettings) -> Bound:
    """From the node going silent to Ready=Unknown with the NoExecute unreachable taint."""
    base = s.grace_seconds + s.monitor_period_seconds
    return Bound("to Unknown and tainted", _stretch(base),
                 f"grace {s.grace_seconds:g}s + monitor period {s.monitor_period_seconds:g}s from {s.source}, "
                 f"x{FACTOR:g} + {MARGIN_SECONDS:g}s")


def eviction_after_taint(toleration_seconds: float, s: LifecycleSettings) -> Bound:
    """From the NoExecute taint to the pod's deletion: its toleration, then the
    taint-eviction controller's queue."""
    return Bound(f"eviction after a {toleration_seconds:g}s toleration", _stretch(toleration_seconds),
                 f"tolerationSeconds {toleration_seconds:g}s x{FACTOR:g} + {MARGIN_SECONDS:g}s ({s.source})")


def zone_tainted(nodes: int, s: LifecycleSettings) -> Bound:
    """Every node of a fully disrupted zone tainted: unreachable, then one NoExecute taint
    per 1/rate seconds after the first (the zone's rate limiter; `--node-eviction-rate`,
    0.1/s upstream, as the cluster states it)."""
    rate_limited = max(0, nodes - 1) / s.eviction_rate_per_second
    base = s.grace_seconds + s.monitor_period_seconds + rate_limited
    return Bound(f"all {nodes} nodes of the zone tainted", _stretch(base),
                 f"grace {s.grace_seconds:g}s + period {s.monitor_period_seconds:g}s + {rate_limited:g}s of the "
                 f"zone's rate limiter from {s.source}, x{FACTOR:g} + {MARGIN_SECONDS:g}s")


def tainter_would_finish(nodes: int, s: LifecycleSettings) -> float:
    """Seconds in which a zone's tainter, were it not stopped, would have NoExecute-tainted
    all `nodes` nodes once they are Unknown (the first token is free, then one per 1/rate
    seconds), plus the margin: how long a test watches to show that it was stopped."""
    return max(0, nodes - 1) / s.eviction_rate_per_second + MARGIN_SECONDS

"""Lifecycle bounds from the cluster's configuration (pvchaos/conformance/timings.py)."""

from __future__ import annotations

import pytest

from pvchaos.conformance import timings


def test_settings_come_from_the_description_and_say_so() -> None:
    s = timings.lifecycle_settings({"node-monitor-grace-period": "8s", "node-monitor-period": "1s"})
    assert (s.grace_seconds, s.monitor_period_seconds) == (8, 1) and s.source.startswith("the cluster's configuration")
    kind = timings.lifecycle_settings({"node-monitor-grace-period": "50s (upstream default)"})
    assert (kind.grace_seconds, kind.monitor_period_seconds) == (50, timings.UPSTREAM_MONITOR_PERIOD_SECONDS)
    unknown = timings.lifecycle_settings({})
    assert unknown.grace_seconds == timings.UPSTREAM_GRACE_SECONDS and "upstream defaults" in unknown.source
    assert timings.lifecycle_settings({"node-monitor-grace-period": "1m30s"}).grace_seconds == 90


def test_a_grace_period_four_times_the_configured_one_fails_with_both_figures() -> None:
    s = timings.lifecycle_settings({"node-monitor-grace-period": "8s", "node-monitor-period": "1s"})
    bound = timings.to_unreachable(s)
    assert bound.verdict(9.5) is None, "configured behaviour passes"
    assert bound.verdict(bound.seconds) is None
    late = bound.verdict(33.0)
    assert late is not None and "33.0s" in late and f"{bound.seconds:.1f}s" in late and "grace 8s" in late


@pytest.mark.parametrize("toleration", [0, 6, 300])
def test_eviction_bound_grows_with_the_toleration(toleration: int) -> None:
    s = timings.LifecycleSettings(8, 1, "test")
    bound = timings.eviction_after_taint(toleration, s)
    assert bound.seconds >= toleration and bound.verdict(toleration + 1) is None
    assert bound.verdict(toleration * timings.FACTOR + timings.MARGIN_SECONDS + 0.1) is not None


def test_zone_bound_counts_the_rate_limiter() -> None:
    s = timings.LifecycleSettings(8, 1, "test")
    assert timings.zone_tainted(3, s).seconds - timings.zone_tainted(1, s).seconds == pytest.approx(20 * timings.FACTOR)


def test_the_rate_limiter_is_the_clusters_and_bounds_what_the_zone_suite_waits() -> None:
    """A local cluster taints at 1 node/s (its --node-eviction-rate): the zone bound and the
    partial-disruption window shrink with it, and a cluster that does not say keeps upstream's."""
    local = timings.lifecycle_settings({"node-monitor-grace-period": "8s", "node-monitor-period": "1s",
                                        "node-eviction-rate": "1"})
    assert local.eviction_rate_per_second == 1 and local.source == "the cluster's configuration"
    kind = timings.lifecycle_settings({"node-monitor-grace-period": "8s", "node-monitor-period": "1s"})
    assert kind.eviction_rate_per_second == timings.UPSTREAM_EVICTION_RATE and "eviction rate: upstream" in kind.source
    assert timings.zone_tainted(2, local).seconds == pytest.approx((8 + 1 + 1) * timings.FACTOR + timings.MARGIN_SECONDS)
    assert timings.tainter_would_finish(3, kind) == pytest.approx(25)  # the window the suite used at 0.1/s
    assert timings.tainter_would_finish(3, local) == pytest.approx(7)
    # a controller tainting at a fifth of the configured pace misses the bound
    assert timings.zone_tainted(2, local).verdict(8 + 1 + 5 * 1 / local.eviction_rate_per_second + 10) is not None

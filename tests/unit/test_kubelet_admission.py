"""The kubelet-half expectation table (KEP-5381): its lookups, and the table against each
cached version's own pkg/kubelet."""

from __future__ import annotations

import pytest

from pvchaos.conformance import feature_gates, kubelet_admission
from pvchaos.tools import message_sources, versions


def test_every_version_with_the_gate_has_an_expectation_and_none_before() -> None:
    for version, gates in feature_gates.STATES.items():
        minor = versions.minor_of(version)
        assert minor is not None
        if gates["MutablePVNodeAffinity"] is None:
            with pytest.raises(ValueError, match="immutable"):
                kubelet_admission.admission(minor)
        else:
            assert kubelet_admission.admission(minor).evidence


def test_the_finding_names_the_version_the_node_and_the_volume() -> None:
    for outcome in (kubelet_admission.MOUNT_BLOCKED, kubelet_admission.STARTS):
        line = kubelet_admission.finding("v1.38.0-beta.0", outcome, "db-0", "w1", "pv-a", "after its node restarted")
        assert "v1.38.0-beta.0" in line and "w1" in line and "pv-a" in line and kubelet_admission.REASON in line
    assert kubelet_admission.MOUNT_CHECK in kubelet_admission.finding(
        "v1.35.4", kubelet_admission.MOUNT_BLOCKED, "db-0", "w1", "pv-a", "")


def test_the_table_is_what_each_cached_source_says() -> None:
    modcache = message_sources.default_modcache()
    checked = []
    for version in feature_gates.STATES:
        minor = versions.minor_of(version)
        if minor is None or minor < 35 or not (modcache / "k8s.io" / f"kubernetes@{version}").is_dir():
            continue
        assert message_sources.kubelet_outcome_in_source(version, modcache) == \
            kubelet_admission.admission(minor).outcome, f"{version}: conformance/kubelet_admission.py disagrees"
        checked.append(version)
    if not checked:
        pytest.skip("no k8s.io/kubernetes source of 1.35+ in the Go module cache")

"""The message table: version selection, templates, and SPEC's quoted substrings."""

import string

import pytest

from pvchaos.conformance.messages import MESSAGES, REASONS, any_of, expected, matches

# Substrings quoted in SPEC.md sections 1-4, each with the key that must carry it.
SPEC_STRINGS = [
    ("NODE_AFFINITY_CONFLICT", "didn't match PersistentVolume's node affinity"),
    ("NODE_AFFINITY_CONFLICT", "had volume node affinity conflict"),
    ("NO_PV_TO_BIND", "didn't find available persistent volumes to bind"),
    ("UNBOUND_IMMEDIATE", "pod has unbound immediate PersistentVolumeClaims"),
    ("UNTOLERATED_TAINT", "had untolerated taint"),
    ("NO_PV_NO_CLASS", "no persistent volumes available for this claim and no storage class is set"),
    ("WAIT_FOR_CONSUMER", "waiting for first consumer to be created before binding"),
    ("EXTERNAL_PROVISIONING", "Waiting for a volume to be created"),
    ("EXTERNAL_PROVISIONING", "waiting for a volume to be created, either by external provisioner"),
    ("PV_TOO_SMALL", "requested PV is too small"),
    ("CLASS_MISMATCH", "storageClassName does not match"),
    ("VOLUME_MODE_MISMATCH", "incompatible volumeMode"),
    ("ACCESS_MODE_MISMATCH", "incompatible accessMode"),
    ("FIELD_IMMUTABLE", "field is immutable"),
    ("AFFINITY_REQUIRED_EMPTY", "must specify required node constraints"),
    ("AFFINITY_TERMS_EMPTY", "must have at least one node selector term"),
    ("NODE_UNREACHABLE_MESSAGE", "Kubelet stopped posting node status."),
    ("TAINT_EVICTION", "Taint manager: deleting due to NoExecute taint"),
    ("MOUNT_NODE_AFFINITY", "NodeAffinity check failed"),
    ("INSUFFICIENT_EPHEMERAL", "Insufficient ephemeral-storage"),
]


@pytest.mark.parametrize(("key", "text"), SPEC_STRINGS)
def test_every_spec_string_is_one_of_the_keys_wordings(key, text):
    assert any(text in wording for _, wording in MESSAGES[key])


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_rows_are_newest_first_and_cover_every_version(key):
    minors = [since for since, _ in MESSAGES[key]]
    assert minors == sorted(minors, reverse=True)
    assert len(set(minors)) == len(minors)
    assert minors[-1] == 0


def test_node_affinity_conflict_wording_changed_in_1_33():
    old, new = "had volume node affinity conflict", "didn't match PersistentVolume's node affinity"
    assert expected("NODE_AFFINITY_CONFLICT", 32) == old
    assert expected("NODE_AFFINITY_CONFLICT", 33) == new
    assert expected("NODE_AFFINITY_CONFLICT", 35) == new


def test_external_provisioning_wording_changed_in_1_28():
    assert expected("EXTERNAL_PROVISIONING", 27).startswith("waiting for a volume to be created, either")
    assert expected("EXTERNAL_PROVISIONING", 28).startswith("Waiting for a volume to be created either")


def test_templates_are_filled_and_missing_fields_are_an_error():
    assert expected("CLASS_NOT_FOUND", 35, name="gold") == 'storageclass.storage.k8s.io "gold" not found'
    assert expected("TAINT_EVICTION_EVENT", 35, pod="app/web-0") == "Marking for deletion Pod app/web-0"
    with pytest.raises(ValueError, match="name"):
        expected("CLASS_NOT_FOUND", 35)


def test_unknown_key_is_a_key_error():
    with pytest.raises(KeyError, match="NOPE"):
        expected("NOPE", 35)
    with pytest.raises(KeyError):
        any_of("NOPE")


def test_any_of_returns_every_wording_newest_first():
    assert any_of("NODE_AFFINITY_CONFLICT") == (
        "didn't match PersistentVolume's node affinity",
        "had volume node affinity conflict",
    )
    assert any_of("CLASS_NOT_FOUND", name="gold") == ('storageclass.storage.k8s.io "gold" not found',)


def test_any_of_without_fields_keeps_the_longest_literal():
    assert any_of("CLASS_NOT_FOUND") == ('storageclass.storage.k8s.io "',)
    assert any_of("VOLUME_MISMATCH") == ('Cannot bind to requested volume "',)


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_any_of_never_returns_an_empty_or_unfilled_pattern(key):
    for text in any_of(key):
        assert text.strip()
        assert not any(field for _, field, _, _ in string.Formatter().parse(text) if field)


def test_matches_real_event_messages():
    event = (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), "
        "3 node(s) didn't match PersistentVolume's node affinity. preemption: ..."
    )
    assert matches("NODE_AFFINITY_CONFLICT", event, 35)
    assert not matches("NODE_AFFINITY_CONFLICT", event, 32)
    assert matches("NODE_AFFINITY_CONFLICT", event)
    assert matches("UNTOLERATED_TAINT", event)
    assert not matches("UNBOUND_IMMEDIATE", event)
    mismatch = 'Cannot bind to requested volume "pv-1": requested PV is too small'
    assert matches("VOLUME_MISMATCH", mismatch, 35, volume="pv-1", reason=expected("PV_TOO_SMALL", 35))
    assert not matches("VOLUME_MISMATCH", mismatch, 35, volume="pv-2", reason="x")


def test_reasons_refer_to_known_messages():
    assert set(REASONS) <= set(MESSAGES)
    assert REASONS["VOLUME_MISMATCH"] == "VolumeMismatch"

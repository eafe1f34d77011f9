"""A failed canary or wait quotes the component (pvchaos/conformance/component_words.py):
the provisioner's ProvisioningFailed event, the attacher's attachError, and names the
attacher when no attacher answered at all (issue 39, item 2)."""

from __future__ import annotations

from pvchaos.conformance import component_words as words

NO_KEY = ("error generating accessibility requirements: no topology key found for node zone-a-1")


def _event(reason: str, message: str, when: str, source: str = "csi.pvchaos.dev_host_1", rv: int = 0) -> dict:
    return {"reason": reason, "message": message, "lastTimestamp": when, "source": {"component": source},
            "metadata": {"resourceVersion": str(rv or int(when[-3:-1]))}}


def test_the_newest_provisioning_failure_is_quoted_with_its_sender() -> None:
    events = [_event("WaitForFirstConsumer", "waiting for first consumer", "2026-01-01T00:00:00Z", "pv-controller"),
              _event("ProvisioningFailed", "old words", "2026-01-01T00:00:01Z"),
              _event("ProvisioningFailed", NO_KEY, "2026-01-01T00:00:02Z")]
    said = words.provisioning_failure(events)
    assert said == f"csi.pvchaos.dev_host_1 says (ProvisioningFailed): {NO_KEY}"
    assert words.provisioning_failure(events[:1]) is None, "no failure event: nothing to quote"


def _va(status: dict | None = None) -> dict:
    va = {"metadata": {"name": "csi-123"}, "spec": {"attacher": "csi.pvchaos.dev", "nodeName": "n1",
                                                    "source": {"persistentVolumeName": "pv-1"}}}
    return {**va, "status": status} if status is not None else va


DRIVER = {"metadata": {"name": "csi.pvchaos.dev"}, "spec": {"attachRequired": True}}


def test_an_attach_error_is_quoted() -> None:
    text = words.attachment_problem(_va({"attached": False, "attachError": {"message": "rpc error: boom"}}),
                                    DRIVER, "pv-1", "n1")
    assert text == "VolumeAttachment csi-123: the attacher of csi.pvchaos.dev reports attachError: rpc error: boom"


def test_no_status_at_all_names_the_attacher_and_what_the_harness_knows() -> None:
    guess = words.attachment_problem(_va(), DRIVER, "pv-1", "n1")
    assert "no status at all" in guess and "attachRequired: true" in guess
    assert guess.endswith("is the external-attacher of csi.pvchaos.dev running?")
    known = words.attachment_problem(_va(), DRIVER, "pv-1", "n1", ["csi-attacher"])
    assert known.endswith("the harness's external-attacher (csi-attacher) is not running")


def test_no_attachment_names_the_attach_detach_controller() -> None:
    text = words.attachment_problem(None, DRIVER, "pv-1", "n1")
    assert text.startswith("no VolumeAttachment of pv-1 to n1 exists: the attach/detach controller")


def test_attached_false_without_an_error_is_an_attacher_that_never_answered() -> None:
    text = words.attachment_problem(_va({"attached": False}), DRIVER, "pv-1", "n1", ["csi-attacher"])
    assert text == ("VolumeAttachment csi-123 says attached: false with no attachError: no attacher answered it "
                    "(CSIDriver csi.pvchaos.dev has attachRequired: true); the harness's external-attacher "
                    "(csi-attacher) is not running")


def test_a_failure_its_sender_has_moved_past_is_not_quoted() -> None:
    """The PV controller's "class not found" for a class it had not seen yet, then its
    ExternalProvisioning once it had, in the same second: the provisioner said nothing."""
    gone = _event("ProvisioningFailed", 'storageclass.storage.k8s.io "c" not found', "2026-01-01T00:00:05Z",
                  "persistentvolume-controller", rv=101)
    handed = _event("ExternalProvisioning", "Waiting for a volume to be created by csi.pvchaos.dev",
                    "2026-01-01T00:00:05Z", "persistentvolume-controller", rv=102)
    assert words.provisioning_failure([gone, handed]) is None
    failing = [handed, _event("Provisioning", "External provisioner is provisioning volume", "2026-01-01T00:00:06Z",
                              rv=103), _event("ProvisioningFailed", NO_KEY, "2026-01-01T00:00:06Z", rv=104)]
    assert words.provisioning_failure([gone, *failing]) == f"csi.pvchaos.dev_host_1 says (ProvisioningFailed): {NO_KEY}"


def _pv(name: str = "pv-1", driver: str | None = "csi.pvchaos.dev") -> dict:
    return {"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": "h"}} if driver else {}}


def test_a_pod_waiting_on_an_unanswered_attachment_names_it() -> None:
    said = words.unattached_volumes("n1", [_pv()], [_va()], {"csi.pvchaos.dev": DRIVER})
    assert len(said) == 1 and said[0].startswith("VolumeAttachment csi-123 has no status at all: no attacher")
    missing = words.unattached_volumes("n1", [_pv()], [], {})
    assert missing[0].startswith("no VolumeAttachment of pv-1 to n1 exists"), "no CSIDriver: attach is required"


def test_volumes_that_need_no_attachment_or_are_attached_are_not_named() -> None:
    no_attach = {"metadata": {"name": "csi.pvchaos.dev"}, "spec": {"attachRequired": False}}
    assert words.unattached_volumes("n1", [_pv()], [], {"csi.pvchaos.dev": no_attach}) == []
    assert words.unattached_volumes("n1", [_pv()], [_va({"attached": True})], {"csi.pvchaos.dev": DRIVER}) == []
    assert words.unattached_volumes("n1", [_pv(driver=None)], [], {}) == [], "not a CSI volume"
    elsewhere = words.unattached_volumes("n2", [_pv()], [_va({"attached": True})], {"csi.pvchaos.dev": DRIVER})
    assert elsewhere and elsewhere[0].startswith("no VolumeAttachment of pv-1 to n2"), "attached to another node"


def _snapshot(**status: object) -> dict[str, object]:
    return {"metadata": {"name": "snap", "uid": "u1"}, "status": status}


def _content(labels: dict[str, str] | None = None, **status: object) -> dict[str, object]:
    return {"metadata": {"name": "snapcontent-u1", "labels": labels or {}}, "status": status}


def test_an_unready_snapshot_names_who_should_have_cut_it() -> None:
    assert "made none" in words.unready_snapshot(_snapshot(), None)
    failed = words.unready_snapshot(_snapshot(), _content(error={"message": "rpc error: code = NotFound"}))
    assert failed == "VolumeSnapshotContent snapcontent-u1 of VolumeSnapshot snap: rpc error: code = NotFound"
    node = words.unready_snapshot(_snapshot(), _content({words.MANAGED_BY: "kind-worker2"}))
    assert "only node kind-worker2's csi-snapshotter (--node-deployment) takes it" in node
    central = words.unready_snapshot(_snapshot(), _content())
    assert "--enable-distributed-snapshotting" in central and "no snapshot.storage.kubernetes.io/managed-by" in central
    assert "has a snapshot handle" in words.unready_snapshot(_snapshot(), _content(snapshotHandle="h"))

"""What a test did with the driver's volumes (issue 35: no pass without evidence), and the
fsGroup oracle: pure functions over Kubernetes JSON."""

from __future__ import annotations

from typing import Any

from pvchaos.conformance.volume_evidence import evidence, fs_group_applies

DRIVER = "vendor.csi.example.com"


def claim(name: str, volume: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"volumeName": volume}}


def pv(name: str, driver: str = DRIVER, provisioned_by: str | None = DRIVER, pinned: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"csi": {"driver": driver}, "accessModes": ["ReadWriteOnce"]}
    if pinned:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": []}}
    annotations = {"pv.kubernetes.io/provisioned-by": provisioned_by} if provisioned_by else {}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec}


def attachment(volume: str, attached: bool, attacher: str = DRIVER) -> dict[str, Any]:
    return {"spec": {"attacher": attacher, "source": {"persistentVolumeName": volume}}, "status": {"attached": attached}}


def pod(claims: list[str], running: bool) -> dict[str, Any]:
    state = {"running": {}} if running else {"waiting": {"reason": "ContainerCreating"}}
    return {"metadata": {"name": "p"}, "spec": {"volumes": [{"persistentVolumeClaim": {"claimName": c}} for c in claims]},
            "status": {"containerStatuses": [{"state": state, "restartCount": 0}]}}


def test_only_the_drivers_own_provisioned_volumes_count() -> None:
    claims = [claim("a", "pv-a"), claim("b", "pv-b"), claim("static", "pv-s"), claim("other", "pv-o"), claim("c", "")]
    pvs = [pv("pv-a"), pv("pv-b", pinned=False), pv("pv-s", provisioned_by=None), pv("pv-o", driver="other.csi")]
    vas = [attachment("pv-a", True), attachment("pv-b", False), attachment("pv-s", True)]
    pods = [pod(["a"], True), pod(["b"], False)]
    e = evidence(DRIVER, claims, pvs, vas, pods, real_kubelet=True)
    assert (e.provisioned, e.attached, e.published, e.pinned) == (2, 1, 1, 1)
    assert e.exercised() == ["dynamic-provisioning", "topology", "attach", "publish", "access-mode ReadWriteOnce",
                             "volume-mode Filesystem"]
    assert evidence(DRIVER, claims, pvs, vas, pods, real_kubelet=False).published == 0  # KWOK mounts nothing
    assert evidence(DRIVER, [], pvs, vas, pods, True).exercised() == []


def test_fs_group_follows_the_policy_as_the_kubelet_applies_it() -> None:
    assert fs_group_applies("File", ["ReadWriteMany"], None)
    assert not fs_group_applies("None", ["ReadWriteOnce"], "ext4")
    assert fs_group_applies(None, ["ReadWriteOnce"], "ext4")  # unset is ReadWriteOnceWithFSType
    assert not fs_group_applies("ReadWriteOnceWithFSType", ["ReadWriteOnce"], "")
    assert not fs_group_applies("ReadWriteOnceWithFSType", ["ReadWriteOnce", "ReadOnlyMany"], "ext4")
    assert fs_group_applies("ReadWriteOnceWithFSType", ["ReadWriteOncePod"], "xfs")


def test_readings_of_one_test_merge_without_counting_a_volume_twice() -> None:
    """A test that deletes its own claims is read before the delete and at its end
    (Workspace.before_delete); the two readings overlap, so counts take the larger."""
    from pvchaos.conformance.volume_evidence import Evidence

    before = Evidence(provisioned=3, attached=3, published=2, access_modes=frozenset({"ReadWriteOnce"}), pinned=3)
    after = Evidence(provisioned=1, access_modes=frozenset({"ReadWriteOncePod"}), volume_modes=frozenset({"Block"}))
    both = before.merge(after)
    assert (both.provisioned, both.attached, both.published, both.pinned) == (3, 3, 2, 3)
    assert both.access_modes == {"ReadWriteOnce", "ReadWriteOncePod"} and both.volume_modes == {"Block"}
    assert Evidence().merge(Evidence()).exercised() == []


def test_a_restore_shows_snapshots_and_a_clone_clones_only_for_the_drivers_volumes() -> None:
    restored = {**claim("r", "pv-r"), "spec": {"volumeName": "pv-r", "dataSource": {"kind": "VolumeSnapshot"}}}
    cloned = {**claim("c", "pv-c"), "spec": {"volumeName": "pv-c", "dataSource": {"kind": "PersistentVolumeClaim"}}}
    foreign = {**claim("f", "pv-f"), "spec": {"volumeName": "pv-f", "dataSource": {"kind": "VolumeSnapshot"}}}
    pvs = [pv("pv-r"), pv("pv-c"), pv("pv-f", driver="other.csi")]
    e = evidence(DRIVER, [restored, cloned, foreign], pvs, [], [], False)
    assert e.copies == {"snapshots", "clones"} and e.exercised()[-2:] == ["clones", "snapshots"]
    assert evidence(DRIVER, [cloned], pvs, [], [], False).merge(
        evidence(DRIVER, [restored], pvs, [], [], False)).copies == {"snapshots", "clones"}
    assert evidence(DRIVER, [foreign], pvs, [], [], False).copies == frozenset(), "another driver's restore is not ours"

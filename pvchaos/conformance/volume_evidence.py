"""What a test did with the driver's volumes, read from its objects (before it deletes its
claims or pods, and when it ends; the readings merged): how many of
the driver's volumes it had provisioned, attached and published, with which access and
volume modes, and whether the volumes were pinned by topology. A certification rests on
this (issue 35: no pass without evidence): a test that never made one of the vendor's
volumes cannot count as a pass of the vendor's driver.

Pure: Kubernetes JSON in, an `Evidence` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pvchaos.conformance.types import KubeObject

PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
# a claim's dataSource kind -> the capability a volume of the driver made from it shows
# (a restore needs a snapshot the driver cut and reported ready)
_COPY_WORDS = {"VolumeSnapshot": "snapshots", "PersistentVolumeClaim": "clones"}

__all__ = ["Evidence", "evidence"]


@dataclass(frozen=True)
class Evidence:
    """Counts of the driver's volumes one test used, and what they were."""

    provisioned: int = 0  # PVs the driver provisioned for the test's claims
    attached: int = 0  # of those, attached to a node (a VolumeAttachment with status.attached)
    published: int = 0  # of those, mounted into a pod that ran (a real kubelet's NodePublishVolume)
    access_modes: frozenset[str] = field(default_factory=frozenset)
    volume_modes: frozenset[str] = field(default_factory=frozenset)
    pinned: int = 0  # of those, PVs whose nodeAffinity the driver's topology set
    copies: frozenset[str] = field(default_factory=frozenset)  # "snapshots" (a restore), "clones"
    # CSI inline ephemeral volumes of the driver in pods that ran (real kubelets: the
    # kubelet published each with NodePublishVolume; no claim, no PV)
    inline: int = 0

    def exercised(self) -> list[str]:
        """The capability words this evidence shows (certification rows, Allure labels)."""
        words = []
        if self.provisioned:
            words.append("dynamic-provisioning")
        if self.pinned:
            words.append("topology")
        if self.attached:
            words.append("attach")
        if self.published:
            words.append("publish")
        words += [f"access-mode {m}" for m in sorted(self.access_modes)]
        words += [f"volume-mode {m}" for m in sorted(self.volume_modes)]
        words += sorted(self.copies)
        if self.inline:
            words.append("inline-ephemeral")
        return words

    def merge(self, other: Evidence) -> Evidence:
        """What two readings of one test show together: readings overlap (the same volume
        seen twice), so counts take the larger, modes the union."""
        return Evidence(max(self.provisioned, other.provisioned), max(self.attached, other.attached),
                        max(self.published, other.published), self.access_modes | other.access_modes,
                        self.volume_modes | other.volume_modes, max(self.pinned, other.pinned),
                        self.copies | other.copies, max(self.inline, other.inline))

    def line(self) -> str:
        inline = f", inline {self.inline}" if self.inline else ""
        return f"provisioned {self.provisioned}, attached {self.attached}, published {self.published}{inline}"


def _meta(obj: KubeObject) -> Mapping[str, object]:
    meta = obj.get("metadata") or {}
    return meta if isinstance(meta, Mapping) else {}


def _started(pod: KubeObject) -> bool:
    """A container of the pod ran: its volumes were published to it."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        if "running" in state or "terminated" in state or int(status.get("restartCount") or 0) > 0:
            return True
    return False


def _claims_of(pod: KubeObject) -> set[str]:
    spec = pod.get("spec") or {}
    names = {str((v.get("persistentVolumeClaim") or {}).get("claimName")) for v in spec.get("volumes") or []
             if v.get("persistentVolumeClaim")}
    pod_name = str(_meta(pod).get("name") or "")
    names |= {f"{pod_name}-{v.get('name')}" for v in spec.get("volumes") or [] if v.get("ephemeral")}
    return names


def _inline_of(pod: KubeObject, driver: str) -> int:
    """The pod's CSI inline volumes of `driver`."""
    return sum(1 for v in (pod.get("spec") or {}).get("volumes") or [] if (v.get("csi") or {}).get("driver") == driver)


def evidence(driver: str, claims: Iterable[KubeObject], pvs: Iterable[KubeObject],
             attachments: Iterable[KubeObject], pods: Iterable[KubeObject], real_kubelet: bool) -> Evidence:
    """The evidence of one test: its namespace's claims and pods, and the cluster's PVs and
    VolumeAttachments. Only PVs of `driver` that it provisioned count; `published` needs
    real kubelets (KWOK's pods run without mounting anything)."""
    claims = list(claims)
    claim_names = {str(_meta(c).get("name")) for c in claims}
    source_kind = {str(_meta(c).get("name")): str(((c.get("spec") or {}).get("dataSource") or {}).get("kind") or "")
                   for c in claims}
    by_name = {str(_meta(pv).get("name")): pv for pv in pvs}
    mine: dict[str, KubeObject] = {}
    claim_of: dict[str, str] = {}
    for claim in claims:
        volume = str((claim.get("spec") or {}).get("volumeName") or "")
        pv = by_name.get(volume)
        if pv is None:
            continue
        spec = pv.get("spec") or {}
        annotations = _meta(pv).get("annotations") or {}
        if (spec.get("csi") or {}).get("driver") == driver and isinstance(annotations, Mapping) \
                and annotations.get(PROVISIONED_BY) == driver:
            mine[volume] = pv
            claim_of[volume] = str(_meta(claim).get("name"))
    attached = {str(((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName"))
                for va in attachments
                if (va.get("spec") or {}).get("attacher") == driver and (va.get("status") or {}).get("attached")}
    used = set()
    inline = 0
    if real_kubelet:
        for pod in pods:
            if _started(pod):
                used |= _claims_of(pod) & claim_names
                inline += _inline_of(pod, driver)
    return Evidence(
        provisioned=len(mine),
        attached=len(attached & set(mine)),
        published=sum(1 for v in mine if claim_of[v] in used),
        access_modes=frozenset(m for pv in mine.values() for m in (pv.get("spec") or {}).get("accessModes") or []),
        volume_modes=frozenset(str((pv.get("spec") or {}).get("volumeMode") or "Filesystem") for pv in mine.values()),
        pinned=sum(1 for pv in mine.values() if (pv.get("spec") or {}).get("nodeAffinity")),
        copies=frozenset(_COPY_WORDS[k] for v in mine if (k := source_kind.get(claim_of[v], "")) in _COPY_WORDS),
        inline=inline,
    )


def fs_group_applies(policy: str | None, access_modes: Iterable[str], fs_type: str | None) -> bool:
    """Whether the kubelet changes a CSI volume's group to the pod's fsGroup (CSIDriver
    spec.fsGroupPolicy; unset means ReadWriteOnceWithFSType): always for File, never for
    None, and for ReadWriteOnceWithFSType only when the PV has an fsType and is
    ReadWriteOnce or ReadWriteOncePod alone. (A driver with the VOLUME_MOUNT_GROUP node
    capability is handed the group instead; this answers for the kubelet's own change.)"""
    effective = policy or "ReadWriteOnceWithFSType"
    if effective == "File":
        return True
    if effective == "None":
        return False
    modes = set(access_modes)
    return bool(fs_type) and bool(modes) and modes <= {"ReadWriteOnce", "ReadWriteOncePod"}

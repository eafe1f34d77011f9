"""Every expected event, condition and error message, keyed by Kubernetes minor version.

Wording moves between releases, so suites never spell a message themselves: they ask
``expected(key, minor)`` (or ``any_of(key)`` when the version is unknown) and match it
as a substring. Each key holds rows of (first minor with this wording, text), newest
first; a text may hold ``{placeholders}`` filled from keyword arguments.
"""

from __future__ import annotations

import string
from collections.abc import Mapping

Rows = tuple[tuple[int, str], ...]

MESSAGES: Mapping[str, Rows] = {
    # --- kube-scheduler FailedScheduling reasons ---------------------------------
    # pkg/scheduler/framework/plugins/volumebinding/binder.go ErrReasonNodeConflict.
    # Changed by kubernetes PR #129887, released in v1.33.0 (CHANGELOG-1.33.md,
    # "Other (Cleanup or Flake)"); SPEC.md said 1.34, the changelog says 1.33.
    "NODE_AFFINITY_CONFLICT": (
        (33, "didn't match PersistentVolume's node affinity"),
        (0, "had volume node affinity conflict"),
    ),
    "NO_PV_TO_BIND": ((0, "didn't find available persistent volumes to bind"),),  # binder.go ErrReasonBindConflict
    "PV_NOT_EXIST": ((0, "unavailable due to one or more pvc(s) bound to non-existent pv(s)"),),
    "NOT_ENOUGH_STORAGE": ((0, "did not have enough free storage"),),  # binder.go ErrReasonNotEnoughSpace
    "UNBOUND_IMMEDIATE": ((0, "pod has unbound immediate PersistentVolumeClaims"),),  # volume_binding.go PreFilter
    # binder.go checkBindings, in PreBind: the claim's selected-node no longer names the
    # pod's node because the provisioner gave it back (same text in 1.34, 1.35 and 1.37).
    "PROVISIONING_RESCHEDULED": ((0, 'provisioning failed for PVC "{claim}"'),),
    # taint_toleration.go: "had untolerated taint {k: v}", later "had untolerated taint(s)".
    "UNTOLERATED_TAINT": ((0, "had untolerated taint"),),
    "NODE_UNSCHEDULABLE": ((0, "node(s) were unschedulable"),),  # nodeunschedulable.go
    "POD_AFFINITY_MISMATCH": ((0, "didn't match Pod's node affinity/selector"),),  # nodeaffinity.go
    "VOLUME_ZONE_CONFLICT": ((0, "node(s) had no available volume zone"),),  # volumezone.go ErrReasonConflict
    # volumerestrictions.go ErrReasonReadWriteOncePodConflict (1.35.4 source).
    "RWOP_CONFLICT": ((0, "PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"),),
    "MAX_VOLUME_COUNT": ((0, "node(s) exceed max volume count"),),  # nodevolumelimits/csi.go ErrReasonMaxVolumeCountExceeded
    "INSUFFICIENT_EPHEMERAL": ((0, "Insufficient ephemeral-storage"),),  # noderesources/fit.go
    "INSUFFICIENT_CPU": ((0, "Insufficient cpu"),),  # noderesources/fit.go: "Insufficient " + resource name
    "INSUFFICIENT_MEMORY": ((0, "Insufficient memory"),),
    "NODE_NAME_MISMATCH": ((0, "node(s) didn't match the requested node name"),),  # nodename.go
    # PreFilter rejections of a claim (volume_binding.go / volumerestrictions): the lister's error text.
    "PVC_NOT_FOUND": ((0, 'persistentvolumeclaim "{name}" not found'),),
    "PVC_BEING_DELETED": ((0, 'persistentvolumeclaim "{name}" is being deleted'),),
    # binder.go GetPodVolumeClaims; seen on 1.35.4 with a Lost claim (tests/cluster/test_explain_catalogue.py).
    "PVC_BOUND_TO_MISSING_PV": ((0, 'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume}"'),),
    "NO_NODES_AVAILABLE": ((0, "0/{total} nodes are available"),),  # framework/types.go NoNodeAvailableMsg
    # --- PV controller events on PVCs (pkg/controller/volume/persistentvolume/pv_controller.go)
    "NO_PV_NO_CLASS": ((0, "no persistent volumes available for this claim and no storage class is set"),),
    "CLASS_NOT_FOUND": ((0, 'storageclass.storage.k8s.io "{name}" not found'),),  # ProvisioningFailed
    "WAIT_FOR_CONSUMER": ((0, "waiting for first consumer to be created before binding"),),
    "WAIT_FOR_POD_SCHEDULED": ((0, "waiting for pod {pod} to be scheduled"),),  # one pod; "pods a,b" for several
    # ExternalProvisioning: reworded by PR #118262 (merged 2023-05-26, so v1.28).
    "EXTERNAL_PROVISIONING": (
        (28, "Waiting for a volume to be created either by the external provisioner"),
        (0, "waiting for a volume to be created, either by external provisioner"),
    ),
    "VOLUME_MISMATCH": ((0, 'Cannot bind to requested volume "{volume}": {reason}'),),
    "PV_TOO_SMALL": ((0, "requested PV is too small"),),  # checkVolumeSatisfyClaim
    "CLASS_MISMATCH": ((0, "storageClassName does not match"),),
    "VOLUME_MODE_MISMATCH": ((0, "incompatible volumeMode"),),
    "ACCESS_MODE_MISMATCH": ((0, "incompatible accessMode"),),
    "PV_BEING_DELETED": ((0, "the volume is marked for deletion"),),
    "PV_BOUND_ELSEWHERE": ((0, 'volume "{volume}" already bound to a different claim.'),),  # FailedBinding
    # --- API validation (pkg/apis/core/validation/validation.go) --------------------
    "FIELD_IMMUTABLE": ((0, "field is immutable"),),
    "AFFINITY_REQUIRED_EMPTY": ((0, "must specify required node constraints"),),  # validateVolumeNodeAffinity
    "AFFINITY_TERMS_EMPTY": ((0, "must have at least one node selector term"),),  # ValidateNodeSelector
    # --- node loss ---------------------------------------------------------------------
    "NODE_UNREACHABLE_MESSAGE": ((0, "Kubelet stopped posting node status."),),  # node_lifecycle_controller.go
    # pkg/controller/tainteviction/taint_eviction.go (1.35): this text is the message of
    # the pod's DisruptionTarget condition (reason DeletionByTaintManager), not an event.
    "TAINT_EVICTION": ((0, "Taint manager: deleting due to NoExecute taint"),),
    # Same file: the Normal event, reason TaintManagerEviction; pod is "namespace/name".
    "TAINT_EVICTION_EVENT": ((0, "Marking for deletion Pod {pod}"),),
    "TAINT_EVICTION_CANCELLED": ((0, "Cancelling deletion of Pod {pod}"),),
    # kubelet FailedMount: "MountVolume.NodeAffinity check failed for volume ...".
    "MOUNT_NODE_AFFINITY": ((0, "NodeAffinity check failed"),),
}

REASONS: Mapping[str, str] = {
    "RWOP_CONFLICT": "FailedScheduling",
    "MAX_VOLUME_COUNT": "FailedScheduling",
    "VOLUME_ZONE_CONFLICT": "FailedScheduling",
    "NODE_AFFINITY_CONFLICT": "FailedScheduling",
    "NO_PV_TO_BIND": "FailedScheduling",
    "UNBOUND_IMMEDIATE": "FailedScheduling",
    "PROVISIONING_RESCHEDULED": "FailedScheduling",
    "UNTOLERATED_TAINT": "FailedScheduling",
    "NO_PV_NO_CLASS": "FailedBinding",
    "CLASS_NOT_FOUND": "ProvisioningFailed",
    "WAIT_FOR_CONSUMER": "WaitForFirstConsumer",
    "WAIT_FOR_POD_SCHEDULED": "WaitForPodScheduled",
    "EXTERNAL_PROVISIONING": "ExternalProvisioning",
    "VOLUME_MISMATCH": "VolumeMismatch",
    "PV_BOUND_ELSEWHERE": "FailedBinding",
    "TAINT_EVICTION": "DeletionByTaintManager",
    "TAINT_EVICTION_EVENT": "TaintManagerEviction",
    "MOUNT_NODE_AFFINITY": "FailedMount",
}
"""Event (or condition) reason that carries each message, where it is fixed."""


def _rows(key: str) -> Rows:
    try:
        return MESSAGES[key]
    except KeyError:
        raise KeyError(f"no message {key!r}; known: {', '.join(sorted(MESSAGES))}") from None


def _fill(key: str, text: str, fmt: Mapping[str, object]) -> str:
    try:
        return text.format(**fmt)
    except KeyError as missing:
        raise ValueError(f"message {key} needs {missing.args[0]!r}: {text!r}") from None


def expected(key: str, minor: int, **fmt: object) -> str:
    """The wording a 1.``minor`` control plane uses for ``key``, placeholders filled."""
    for since, text in _rows(key):
        if minor >= since:
            return _fill(key, text, fmt)
    raise ValueError(f"message {key} has no wording for 1.{minor}")


def _fixed_part(text: str) -> str:
    """Longest literal run of a template, for matching when its fields are unknown."""
    literals = [literal for literal, *_ in string.Formatter().parse(text)]
    return max(literals, key=len)


def any_of(key: str, **fmt: object) -> tuple[str, ...]:
    """Every wording of ``key``, newest first, for matching when the version is unknown.

    Without the template's fields, each wording is cut to its longest literal part.
    """
    return tuple(_fill(key, text, fmt) if fmt else _fixed_part(text) for _, text in _rows(key))


def matches(key: str, message: str, minor: int | None = None, **fmt: object) -> bool:
    """Does ``message`` contain the wording of ``key`` (any wording when ``minor`` is None)?"""
    if minor is not None:
        return expected(key, minor, **fmt) in message
    return any(text in message for text in any_of(key, **fmt))

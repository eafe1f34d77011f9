"""Which PersistentVolume a claim binds to, and why a named PV does not fit.

Mirrors component-helpers storage/volume ``FindMatchingVolume`` (pv_helpers.go in 1.36,
helpers.go before) and its two callers:

- PV controller (``node=None``; pkg/controller/volume/persistentvolume/index.go
  ``findByClaim``): PVs are grouped by their set of access modes; groups holding every
  requested mode are searched fewest-modes-first and the first group with a fit wins.
  So a smaller PV with more modes loses to a larger PV with exactly the requested ones,
  and "smallest fit" holds within a group. Node affinity is ignored here.
- Scheduler (``node`` given, WaitForFirstConsumer): only PVs of the claim's class are
  candidates; PVs whose affinity excludes the node are skipped, access modes checked.

Within ``FindMatchingVolume`` a PV is skipped when: its claimRef names another claim,
capacity < request, volumeMode differs (unset = Filesystem), volumeAttributesClassName
differs (None == ""), or it is being deleted. A PV pre-bound to this claim (claimRef
namespace/name, and uid if set) is returned at once, without checking phase, selector
or class; if its affinity excludes the scheduler's node, nothing is returned at all.
Other PVs must also be Available, match the claim's selector and have the same class,
and the smallest wins (ties: first in input order; upstream order is the informer's).

A claim's ``spec.storageClassName`` of None means "no class requested" to the matcher
(upstream ``GetPersistentVolumeClaimClass`` returns ""), so it matches only PVs with no
class. On a real cluster the DefaultStorageClass admission plugin (or the controller's
retroactive assignment) usually fills it in first; pass the claim as the cluster holds it.
The beta annotation ``volume.beta.kubernetes.io/storage-class`` wins over the field on
both objects, as upstream. A PV dict with no ``status.phase`` is treated as Available
(hand-written fixtures); upstream would wait for the controller to set it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from fractions import Fraction

from pvchaos.conformance.affinity import label_selector_matches, node_matches_pv_affinity
from pvchaos.conformance.quantity import parse_quantity, quantity_bytes
from pvchaos.conformance.types import KubeObject, dig

BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
KNOWN_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def claim_key(pvc: KubeObject) -> str:
    """The "namespace/name" of a claim, the key ``pvs_by_claim`` maps."""
    return f"{dig(pvc, 'metadata', 'namespace', default='default')}/{dig(pvc, 'metadata', 'name', default='')}"


def claim_class(pvc: KubeObject) -> str:
    """Requested class: beta annotation, else ``spec.storageClassName``, None read as ""."""
    annotations = dig(pvc, "metadata", "annotations", default={})
    if BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_CLASS_ANNOTATION] or "")
    return str(dig(pvc, "spec", "storageClassName", default=""))


def volume_class(pv: KubeObject) -> str:
    """A PV's class: beta annotation, else ``spec.storageClassName`` ("" when unset)."""
    annotations = dig(pv, "metadata", "annotations", default={})
    if BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_CLASS_ANNOTATION] or "")
    return str(dig(pv, "spec", "storageClassName", default=""))


def is_bound_to_claim(pv: KubeObject, pvc: KubeObject) -> bool:
    """``IsVolumeBoundToClaim``: claimRef names this claim; its uid, when set, must match."""
    ref = dig(pv, "spec", "claimRef")
    if ref is None:
        return False
    if dig(ref, "name", default="") != dig(pvc, "metadata", "name", default=""):
        return False
    if dig(ref, "namespace", default="default") != dig(pvc, "metadata", "namespace", default="default"):
        return False
    uid = dig(ref, "uid", default="")
    return not uid or uid == dig(pvc, "metadata", "uid", default="")


def requested_storage(pvc: KubeObject) -> Fraction:
    """The claim's ``spec.resources.requests.storage`` (0 when absent)."""
    return parse_quantity(dig(pvc, "spec", "resources", "requests", "storage", default=0))


def capacity(pv: KubeObject) -> Fraction:
    """The PV's ``spec.capacity.storage`` (0 when absent)."""
    return parse_quantity(dig(pv, "spec", "capacity", "storage", default=0))


def _modes(obj: KubeObject) -> frozenset[str]:
    return frozenset(dig(obj, "spec", "accessModes", default=[]))


def _volume_mode(obj: KubeObject) -> str:
    return str(dig(obj, "spec", "volumeMode", default="Filesystem"))


def _vac(obj: KubeObject) -> str:
    return str(dig(obj, "spec", "volumeAttributesClassName", default=""))


def _pv_name(pv: KubeObject) -> str:
    return str(dig(pv, "metadata", "name", default=""))


def _smallest_fit(
    pvc: KubeObject,
    pvs: Iterable[KubeObject],
    node: KubeObject | None,
    excluded: Collection[str],
    delay_binding: bool,
) -> KubeObject | None:
    """The body of upstream ``FindMatchingVolume`` over one candidate list."""
    request = requested_storage(pvc)
    best: KubeObject | None = None
    best_size = Fraction(0)
    for pv in pvs:
        if _pv_name(pv) in excluded:
            continue
        prebound = is_bound_to_claim(pv, pvc)
        if dig(pv, "spec", "claimRef") is not None and not prebound:
            continue
        size = capacity(pv)
        if size < request or _volume_mode(pv) != _volume_mode(pvc) or _vac(pv) != _vac(pvc):
            continue
        if dig(pv, "metadata", "deletionTimestamp") is not None:
            continue
        affinity_ok = node is None or node_matches_pv_affinity(node, pv)
        if prebound:
            return pv if affinity_ok else None
        if node is None and delay_binding:
            continue
        if dig(pv, "status", "phase", default="Available") != "Available":
            continue
        selector = dig(pvc, "spec", "selector")
        if selector is not None and not label_selector_matches(dig(pv, "metadata", "labels"), selector):
            continue
        if volume_class(pv) != claim_class(pvc) or not affinity_ok:
            continue
        if node is not None and not _modes(pvc) <= _modes(pv):
            continue
        if best is None or size < best_size:
            best, best_size = pv, size
    return best


def find_matching_volume(
    pvc: KubeObject,
    pvs: Sequence[KubeObject],
    node: KubeObject | None = None,
    *,
    delay_binding: bool = False,
    excluded: Collection[str] = (),
) -> KubeObject | None:
    """The PV upstream would bind ``pvc`` to, or None.

    ``node=None`` is the PV controller (Immediate binding; node affinity ignored);
    ``delay_binding=True`` there means a WaitForFirstConsumer claim without a selected
    node, for which only a pre-bound PV is returned. A ``node`` is the scheduler path.
    ``excluded`` holds PV names already chosen for the pod's other claims.
    """
    if node is not None:
        same_class = [pv for pv in pvs if volume_class(pv) == claim_class(pvc)]
        return _smallest_fit(pvc, same_class, node, excluded, delay_binding)
    groups: dict[frozenset[str], list[KubeObject]] = {}
    for pv in pvs:
        groups.setdefault(_modes(pv) & frozenset(KNOWN_ACCESS_MODES), []).append(pv)
    wanted = _modes(pvc)
    for modes in sorted((m for m in groups if wanted <= m), key=len):
        found = _smallest_fit(pvc, groups[modes], None, excluded, delay_binding)
        if found is not None:
            return found
    return None


def explain_mismatch(pvc: KubeObject, pv: KubeObject) -> list[str]:
    """Why ``pv`` cannot bind ``pvc`` named in ``spec.volumeName``; [] when it fits.

    Ordered as the PV controller checks (``checkVolumeSatisfyClaim`` in
    pv_controller.go), which reports only the first, in a ``VolumeMismatch`` event
    'Cannot bind to requested volume "<pv>": <reason>'. A claimRef to another claim
    comes first: upstream then emits FailedBinding 'volume "<pv>" already bound to a
    different claim.' instead. Sizes compare as whole units (``Quantity.Value()``).
    """
    reasons: list[str] = []
    name = _pv_name(pv)
    if dig(pv, "spec", "claimRef") is not None and not is_bound_to_claim(pv, pvc):
        reasons.append(f'volume "{name}" already bound to a different claim.')
    if dig(pv, "metadata", "deletionTimestamp") is not None:
        reasons.append(f'the volume is marked for deletion "{name}"')
    request = dig(pvc, "spec", "resources", "requests", "storage", default=0)
    if quantity_bytes(dig(pv, "spec", "capacity", "storage", default=0)) < quantity_bytes(request):
        reasons.append("requested PV is too small")
    if volume_class(pv) != claim_class(pvc):
        reasons.append("storageClassName does not match")
    if _volume_mode(pv) != _volume_mode(pvc):
        reasons.append("incompatible volumeMode")
    if not _modes(pvc) <= _modes(pv):
        reasons.append("incompatible accessMode")
    return reasons

"""Volume expansion and VolumeAttributesClass changes (issue 37), from the binding side.

The API's part runs on every cluster: a bound claim of a class without
allowVolumeExpansion cannot grow (kube-apiserver's PersistentVolumeClaimResize admission:
"only dynamically provisioned pvc can be resized and the storageclass that provisions the
pvc must support resize"), and the claim keeps its request and its volume.

The rest is the driver's csi-resizer sidecar (upstream's external-resizer): it sees a
grown CSI claim itself (ControllerExpandVolume, then the kubelet's NodeExpandVolume where
the driver asks for it), and a changed volumeAttributesClassName goes to it as
ControllerModifyVolume. pvchaos-csi's stack runs external-resizer v2.3.0 on both
backends; a vendor package runs these tests when it ships csi-resizer (certify), and
otherwise they show "not supported" (docs/csi-driver.md).
"""

from __future__ import annotations

import time
from fractions import Fraction

import allure
import pytest

from pvchaos.conformance.quantity import parse_quantity
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o
from pvchaos.kube.errors import ApiError, ExpectationFailed
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import wait_for

pytestmark = [allure.epic("Expansion and volume attributes"), pytest.mark.needs("dynamic-zonal")]

RESIZER = "csi-resizer"  # the harness's own sidecar (pvchaos/clusters/csi.py); a vendor's is not watched
RESIZE_REFUSED = "the storageclass that provisions the pvc must support resize"  # resize/admission.go
EXPAND_TIMEOUT = 120.0


def _bound_claim(ws: Workspace, sc: str, size: str = "1Gi") -> Obj:
    """Claim `data` of class `sc`, bound through a pod (a WaitForFirstConsumer class binds
    once one is scheduled); its PV."""
    ws.create(b.persistent_volume_claim("data", size, sc))
    ws.create(b.pod("app", ("data",)))
    x.pod_runs(ws, "app", timeout=120)
    return x.bound_volume(ws, "data")


def _grow(ws: Workspace, size: str) -> Obj:
    return ws.patch("PersistentVolumeClaim", "data", {"spec": {"resources": {"requests": {"storage": size}}}})


def _capacity(obj: Obj | None, where: str) -> Fraction:
    section = (obj or {}).get(where) or {}
    return parse_quantity(str((section.get("capacity") or {}).get("storage") or "0"))


@allure.feature("Expansion")
@allure.story("a class without allowVolumeExpansion: the API refuses to grow a bound claim, which keeps its volume")
@pytest.mark.quick
def test_a_claim_of_a_class_without_expansion_cannot_grow(ws: Workspace) -> None:
    """The driver's class may allow expansion (a vendor's usually does, and the test's class
    copies it), so this class says false itself."""
    sc = ws.storage_class("fixed")
    ws.patch("StorageClass", sc, {"allowVolumeExpansion": False})
    pv = _bound_claim(ws, sc)
    try:
        grown = _grow(ws, "2Gi")
    except ApiError as exc:
        x.expect(exc.status == 403 and RESIZE_REFUSED in str(exc.body),
                 f"the API refuses the larger request with 403 '{RESIZE_REFUSED}'; it said HTTP {exc.status}: "
                 f"{exc.body}", ws=ws)
    else:
        raise ExpectationFailed(f"the API accepted a larger request for claim data of a class without "
                                f"allowVolumeExpansion (is PersistentVolumeClaimResize admission on?): {o.spec(grown)}")
    claim = ws.get("PersistentVolumeClaim", "data")
    x.expect(parse_quantity(o.spec(claim)["resources"]["requests"]["storage"]) == parse_quantity("1Gi")
             and o.spec(claim).get("volumeName") == o.name(pv),
             f"claim data keeps its 1Gi request and PV {o.name(pv)}", claim, ws=ws)


@allure.feature("Expansion")
@allure.story("a bound claim grows: its PV and then the claim's capacity follow (csi-resizer)")
@pytest.mark.needs("expansion")
@pytest.mark.exercises("expansion")
def test_a_bound_claim_grows_with_its_volume(ws: Workspace) -> None:
    """The class allows expansion (allowVolumeExpansion may be set on an existing class);
    the request goes from 1Gi to 2Gi while the pod runs (online expansion). The resizer
    grows the PV; the claim's status.capacity follows once the driver needs no node step,
    or a real kubelet did it (NodeExpandVolume)."""
    sc = ws.storage_class("growable")
    ws.patch("StorageClass", sc, {"allowVolumeExpansion": True})
    pv = _bound_claim(ws, sc)
    wanted = parse_quantity("2Gi")
    t0 = time.monotonic()
    _grow(ws, "2Gi")
    grown = wait_for(ws.kube, "PersistentVolume", o.name(pv), lambda p: _capacity(p, "spec") >= wanted,
                     f"PV {o.name(pv)} capacity at least 2Gi (ControllerExpandVolume)", None, EXPAND_TIMEOUT,
                     fail_if=x.harness_component_down(ws, RESIZER))
    measure.since("expansion seconds", t0)
    claim = ws.get("PersistentVolumeClaim", "data") or {}
    conditions = [c.get("type") for c in (claim.get("status") or {}).get("conditions") or []]
    if ws.cluster.has("real-kubelet") or "FileSystemResizePending" not in conditions:
        wait_for(ws.kube, "PersistentVolumeClaim", "data", lambda c: _capacity(c, "status") >= wanted,
                 "claim data status.capacity at least 2Gi", ws.namespace, EXPAND_TIMEOUT)
    else:
        measure.note("claim conditions (no kubelet to expand the filesystem)", ", ".join(map(str, conditions)))
    x.expect(o.spec(grown).get("claimRef", {}).get("name") == "data", "the grown PV is still the claim's", grown,
             ws=ws)


@allure.feature("VolumeAttributesClass")
@allure.story("a bound claim moves to the driver's VolumeAttributesClass: the claim reports it, the volume stays")
@pytest.mark.needs("modify-volume")
@pytest.mark.exercises("modify-volume")
def test_a_bound_claim_takes_a_volume_attributes_class(ws: Workspace) -> None:
    """Upstream's volume-modify pattern: a claim made without a class of attributes is given
    the driver's; csi-resizer calls ControllerModifyVolume and the claim's
    status.currentVolumeAttributesClassName becomes it, with the same PV."""
    pv = _bound_claim(ws, ws.storage_class("modifiable"))
    vac = ws.volume_attributes_class()
    t0 = time.monotonic()
    ws.patch("PersistentVolumeClaim", "data", {"spec": {"volumeAttributesClassName": vac}})
    claim = wait_for(ws.kube, "PersistentVolumeClaim", "data",
                     lambda c: (c.get("status") or {}).get("currentVolumeAttributesClassName") == vac,
                     f"claim data status.currentVolumeAttributesClassName {vac} (ControllerModifyVolume)",
                     ws.namespace, EXPAND_TIMEOUT, fail_if=x.harness_component_down(ws, RESIZER))
    measure.since("modify seconds", t0)
    x.expect(o.spec(claim).get("volumeName") == o.name(pv), f"claim data keeps PV {o.name(pv)}", claim, ws=ws)

"""Reclaim policies: what happens to a PV when its claim is deleted (SPEC 2)."""

from __future__ import annotations

import allure
import pytest

from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import wait_gone

pytestmark = [allure.epic("Binding"), allure.feature("Reclaim")]


def _dynamic_claim_with_delete_policy(ws: Workspace) -> Obj:
    """Claim `data` bound to a freshly provisioned volume whose class says Delete."""
    sc = ws.storage_class("zonal-delete", "Immediate", reclaim="Delete")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    return x.bound_volume(ws, "data")


@allure.story("Delete removes the PV with its claim")
@pytest.mark.needs("dynamic-zonal")
def test_delete_policy_removes_volume(ws: Workspace) -> None:
    pv = _dynamic_claim_with_delete_policy(ws)
    ws.delete("PersistentVolumeClaim", "data")
    with allure.step(f"PV {pv['metadata']['name']} is deleted by its provisioner"):
        wait_gone(ws.kube, "PersistentVolume", pv["metadata"]["name"], timeout=60)


@allure.story("Retain keeps the PV Released with its claimRef until the claimRef is cleared")
@pytest.mark.needs("static-pv")
@pytest.mark.quick
def test_retain_policy_released_until_claim_ref_cleared(ws: Workspace) -> None:
    iso = ws.case_labels
    pv = ws.create(b.persistent_volume(ws.name("retained"), "5Gi", labels=iso, reclaim="Retain"))
    name = pv["metadata"]["name"]
    ws.create(b.persistent_volume_claim("first", "5Gi", "", selector={"matchLabels": iso}))
    x.bound_volume(ws, "first")
    ws.delete("PersistentVolumeClaim", "first")
    released = x.volume_phase(ws, name, "Released")
    ref = released["spec"].get("claimRef") or {}
    x.expect(ref.get("name") == "first", "a Released PV keeps the claimRef of its old claim", released, ws=ws)

    ws.create(b.persistent_volume_claim("second", "5Gi", "", selector={"matchLabels": iso}))
    x.claim_stays_pending(ws, "second", "NO_PV_NO_CLASS")

    with allure.step("clear spec.claimRef: the PV turns Available and the new claim binds it"):
        ws.patch("PersistentVolume", name, {"spec": {"claimRef": None}})
    bound = x.bound_volume(ws, "second")
    x.expect(bound["metadata"]["name"] == name, "the new claim binds the recycled PV", bound, ws=ws)


@allure.story("switching a dynamic PV to Retain before deleting its claim keeps it")
@pytest.mark.needs("dynamic-zonal")
def test_switch_to_retain_keeps_volume(ws: Workspace) -> None:
    pv = _dynamic_claim_with_delete_policy(ws)
    name = pv["metadata"]["name"]
    ws.cleanup.push(f"delete PersistentVolume {name}", lambda: ws.delete("PersistentVolume", name, wait=False))
    ws.patch("PersistentVolume", name, {"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
    ws.delete("PersistentVolumeClaim", "data")
    released = x.volume_phase(ws, name, "Released")
    x.expect(released["spec"]["persistentVolumeReclaimPolicy"] == "Retain", "the policy change holds", released, ws=ws)

"""Static binding: which Available PV the PV controller binds a claim to (SPEC 2).

Each case is named data: the PVs on offer, the claim, and the PV that must be chosen
(or None: the claim stays Pending). The oracle's prediction is checked against the
same literal expectation, and the cluster against both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import allure
import pytest

from pvchaos.conformance import messages
from pvchaos.conformance.claims import explain_mismatch, find_matching_volume
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b

pytestmark = [
    allure.epic("Binding"),
    allure.feature("Static binding"),
    pytest.mark.needs("static-pv"),
]


@dataclass(frozen=True)
class PV:
    key: str
    capacity: str
    modes: tuple[str, ...] = ("ReadWriteOnce",)
    volume_mode: str | None = None
    storage_class: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    request: str
    modes: tuple[str, ...] = ("ReadWriteOnce",)
    volume_mode: str | None = None
    storage_class: str = ""
    selector: dict[str, Any] | None = None


@dataclass(frozen=True)
class Case:
    id: str
    story: str
    pvs: tuple[PV, ...]
    claim: Claim
    binds: str | None  # key of the PV that must be bound, None: stays Pending


CASES = [
    Case("smallest-fit-wins", "capacity", (PV("50g", "50Gi"), PV("1t", "1Ti"), PV("100g", "100Gi"), PV("200g", "200Gi")),
         Claim("80Gi"), "100g"),
    Case("100Gi-never-satisfies-120Gi", "capacity", (PV("100g", "100Gi"),), Claim("120Gi"), None),
    Case("1Ti-satisfies-100Gi", "capacity", (PV("1t", "1Ti"),), Claim("100Gi"), "1t"),
    Case("rwo-pv-refuses-rwx-claim", "access modes", (PV("rwo", "10Gi"),), Claim("5Gi", ("ReadWriteMany",)), None),
    Case("rox-claim-binds-multi-mode-pv", "access modes",
         (PV("rwo", "5Gi"), PV("all", "10Gi", ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"))),
         Claim("5Gi", ("ReadOnlyMany",)), "all"),
    Case("rox-pv-refuses-rwo-claim", "access modes", (PV("rox", "10Gi", ("ReadOnlyMany",)),), Claim("5Gi"), None),
    Case("block-pv-refuses-filesystem-claim", "volume mode", (PV("blk", "10Gi", volume_mode="Block"),),
         Claim("5Gi"), None),
    Case("block-claim-binds-block-pv", "volume mode",
         (PV("fs", "5Gi"), PV("blk", "10Gi", volume_mode="Block")), Claim("5Gi", volume_mode="Block"), "blk"),
    Case("class-mismatch-stays-pending", "storage class", (PV("gold", "10Gi", storage_class="gold"),),
         Claim("5Gi"), None),
    Case("selector-picks-labelled-pv", "selectors",
         (PV("silver", "5Gi", labels={"tier": "silver"}), PV("gold", "50Gi", labels={"tier": "gold"})),
         Claim("5Gi", selector={"matchLabels": {"tier": "gold"}}), "gold"),
    Case("selector-excludes-every-pv", "selectors", (PV("silver", "5Gi", labels={"tier": "silver"}),),
         Claim("5Gi", selector={"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}), None),
]


def _isolating_label(ws: Workspace) -> dict[str, str]:
    """Class-less PVs are visible to every claim; a per-test label keeps cases apart."""
    return ws.case_labels


def _make(ws: Workspace, case: Case) -> tuple[dict[str, dict], dict]:
    iso = _isolating_label(ws)
    pvs = {}
    for pv in case.pvs:
        obj = b.persistent_volume(ws.name(pv.key), pv.capacity, pv.storage_class, pv.modes, pv.volume_mode,
                                  labels={**iso, **pv.labels})
        pvs[pv.key] = obj
    selector = dict(case.claim.selector or {})
    selector["matchLabels"] = {**iso, **selector.get("matchLabels", {})}
    claim = b.persistent_volume_claim("claim", case.claim.request, case.claim.storage_class, case.claim.modes,
                                      case.claim.volume_mode, selector=selector)
    return pvs, claim


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_static_binding(ws: Workspace, case: Case) -> None:
    allure.dynamic.story(case.story)
    allure.dynamic.title(f"static binding: {case.id}")
    pvs, claim = _make(ws, case)
    predicted = find_matching_volume(claim, list(pvs.values()))
    expected_name = pvs[case.binds]["metadata"]["name"] if case.binds else None
    assert (predicted or {}).get("metadata", {}).get("name") == expected_name, (
        f"the oracle predicts {(predicted or {}).get('metadata', {}).get('name')}, the case says {expected_name}")

    with allure.step(f"create PVs {[p.key for p in case.pvs]} and claim {case.claim}"):
        for obj in pvs.values():
            ws.create(obj)
        # The controller chooses among the PVs it has seen: let it see them all first.
        for obj in pvs.values():
            x.volume_phase(ws, obj["metadata"]["name"], "Available")
        ws.create(claim)

    if case.binds is None:
        x.claim_stays_pending(ws, "claim", "NO_PV_NO_CLASS")
        for obj in pvs.values():
            pv = ws.get("PersistentVolume", obj["metadata"]["name"])
            x.expect((pv or {}).get("status", {}).get("phase") == "Available",
                     f"PV {obj['metadata']['name']} should still be Available", pv, ws=ws)
        return
    pv = x.bound_volume(ws, "claim")
    x.expect(pv["metadata"]["name"] == expected_name,
             f"claim bound {pv['metadata']['name']} ({pv['spec']['capacity']['storage']}), expected "
             f"{expected_name} ({pvs[case.binds]['spec']['capacity']['storage']})", pv, ws=ws)
    pvc = ws.get("PersistentVolumeClaim", "claim") or {}
    x.expect(pvc.get("status", {}).get("capacity", {}).get("storage") == pv["spec"]["capacity"]["storage"],
             "a bound claim reports the whole PV's capacity (the rest is not shared)", pvc, pv, ws=ws)


@allure.story("storage class")
def test_class_name_typo_is_reported(ws: Workspace) -> None:
    """A claim naming a class that does not exist stays Pending with `... not found`."""
    typo = ws.name("fast-sdd")
    ws.create(b.persistent_volume_claim("claim", "1Gi", typo))
    x.claim_stays_pending(ws, "claim", "CLASS_NOT_FOUND", name=typo)


@allure.story("pre-bound volumeName")
@pytest.mark.quick
def test_volume_name_binds_that_pv_not_the_smallest(ws: Workspace) -> None:
    iso = _isolating_label(ws)
    small = ws.create(b.persistent_volume(ws.name("small"), "5Gi", labels=iso))
    big = ws.create(b.persistent_volume(ws.name("big"), "50Gi", labels=iso))
    for pv in (small, big):
        x.volume_phase(ws, pv["metadata"]["name"], "Available")
    ws.create(b.persistent_volume_claim("claim", "5Gi", "", volume_name=big["metadata"]["name"]))
    pv = x.bound_volume(ws, "claim")
    x.expect(pv["metadata"]["name"] == big["metadata"]["name"], "volumeName must win over the smallest fit", pv, ws=ws)
    small_now = ws.get("PersistentVolume", small["metadata"]["name"])
    x.expect((small_now or {}).get("status", {}).get("phase") == "Available", "the smaller PV stays Available",
             small_now, ws=ws)


MISMATCHES = [
    ("too-small", dict(capacity="5Gi"), dict(request="10Gi"), "PV_TOO_SMALL"),
    ("class", dict(storage_class="gold"), dict(storage_class=""), "CLASS_MISMATCH"),
    ("volume-mode", dict(volume_mode="Block"), dict(), "VOLUME_MODE_MISMATCH"),
    ("access-mode", dict(access_modes=("ReadOnlyMany",)), dict(access_modes=("ReadWriteMany",)), "ACCESS_MODE_MISMATCH"),
]


@allure.story("pre-bound volumeName")
@pytest.mark.parametrize("pv_args,claim_args,key", [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_volume_name_mismatch_is_reported(ws: Workspace, pv_args: dict, claim_args: dict, key: str) -> None:
    """A claim naming a PV that does not fit gets a VolumeMismatch event and stays Pending."""
    pv_kw = {"capacity": "10Gi", "storage_class": "", **pv_args}
    pv = ws.create(b.persistent_volume(ws.name("named"), pv_kw.pop("capacity"), **pv_kw))
    cl_kw = {"request": "1Gi", "storage_class": "", **claim_args}
    claim = b.persistent_volume_claim("claim", cl_kw.pop("request"), volume_name=pv["metadata"]["name"], **cl_kw)
    reasons = explain_mismatch(claim, pv)
    assert reasons and messages.expected(key, ws.cluster.minor or 35) in reasons[0], (
        f"oracle explains {reasons}, expected {key}")
    ws.create(claim)
    x.event(ws, "PersistentVolumeClaim", "claim", "VOLUME_MISMATCH", volume=pv["metadata"]["name"],
            reason=messages.expected(key, ws.cluster.minor or 35))
    x.phase_now(ws, "PersistentVolumeClaim", "claim", "Pending")  # a mismatched claim stays Pending

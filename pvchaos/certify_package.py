"""What `pvchaos certify` can know without a cluster, and what it makes of what it finds.

A vendor's driver directory is read once, here, into a typed `DriverPackage` (load,
validate, then pass the typed thing): manifests in name order, image archives, an
optional driver profile. Everything that can be refused before a cluster starts is
refused here, in one line: no manifests, a YAML document that is not a Kubernetes object,
no CSIDriver, no StorageClass of that driver, an archive that is not what `docker save`
writes, an image the manifests use that no archive holds (there is no registry).

The rest is pure too: `discover` turns the objects the cluster shows (CSIDriver, CSINodes,
the StorageClass) into a `Discovery`; `compare` checks a profile against it and returns
each disagreement; `suite_rows` folds Allure results into one row per suite; and
`render_markdown` / `to_json` write the certification report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pvchaos.certification import EVIDENCE_LABEL, EXERCISED_LABEL, MISSING_LABEL, redact
from pvchaos.drivers.profile import DriverProfile

ZONE_KEY = "topology.kubernetes.io/zone"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


# ---- discovery (pure over the cluster's objects) ----------------------------------------

@dataclass(frozen=True)
class NodeRegistration:
    node: str
    registered: bool
    topology_keys: tuple[str, ...] = ()
    allocatable: int | None = None


@dataclass(frozen=True)
class Discovery:
    """What the cluster shows and the driver answers."""

    driver: str
    attach_required: bool | None = None
    storage_capacity: bool | None = None
    fs_group_policy: str | None = None
    volume_lifecycle_modes: tuple[str, ...] = ()
    nodes: tuple[NodeRegistration, ...] = ()
    binding_mode: str | None = None
    allow_expansion: bool | None = None
    plugin_name: str | None = None
    vendor_version: str | None = None
    version_source: str = ""
    # what the driver itself answers (pvchaos-csi info on a node): GetPluginCapabilities,
    # NodeGetCapabilities, ControllerGetCapabilities; None where it was not asked
    plugin_capabilities: tuple[str, ...] | None = None
    node_capabilities: tuple[str, ...] | None = None
    controller_capabilities: tuple[str, ...] | None = None
    services_source: str = ""

    @property
    def topology_keys(self) -> tuple[str, ...]:
        """The keys every registered node reports (a key some node lacks is no topology)."""
        regs = [n for n in self.nodes if n.registered]
        if not regs:
            return ()
        common = set(regs[0].topology_keys)
        for n in regs[1:]:
            common &= set(n.topology_keys)
        return tuple(sorted(common))

    @property
    def max_volumes(self) -> int | None:
        counts = [n.allocatable for n in self.nodes if n.registered and n.allocatable is not None]
        return min(counts) if counts else None

    def table(self) -> dict[str, str]:
        """Capability -> what was discovered, as the report shows it."""
        def word(b: bool | None) -> str:
            return "unknown" if b is None else ("yes" if b else "no")
        return {
            "attachRequired": word(self.attach_required),
            "capacity": word(self.storage_capacity),
            "topology": ", ".join(self.topology_keys) or "none",
            "fsGroupPolicy": self.fs_group_policy or "unknown",
            "volumeLimits": "unlimited" if self.max_volumes is None else str(self.max_volumes),
            "controllerExpansion": word(self.allow_expansion) + " (StorageClass allowVolumeExpansion)",
            "volumeBindingMode": self.binding_mode or "unknown",
            "GetPluginCapabilities": _answered(self.plugin_capabilities, self.services_source),
            "NodeGetCapabilities": _answered(self.node_capabilities, self.services_source),
            "ControllerGetCapabilities": _answered(self.controller_capabilities, self.services_source),
            "volumeLifecycleModes": ", ".join(self.volume_lifecycle_modes) if self.volume_lifecycle_modes else "unknown",
        }


def _answered(caps: tuple[str, ...] | None, source: str) -> str:
    if caps is None:
        return f"not asked ({source})" if source else "not asked"
    return ", ".join(caps) or "none"


def _worker(node: Mapping[str, Any]) -> bool:
    return CONTROL_PLANE_LABEL not in ((node.get("metadata") or {}).get("labels") or {})


def discover(driver: str, csidriver: Mapping[str, Any] | None, csinodes: Iterable[Mapping[str, Any]],
             nodes: Iterable[Mapping[str, Any]], storage_class: Mapping[str, Any] | None) -> Discovery:
    """A Discovery from the objects as the API sends them (dicts). Only worker nodes count:
    a driver need not run on the control plane."""
    spec = (csidriver or {}).get("spec") or {}
    by_node = {str(n["metadata"]["name"]): n for n in csinodes}
    regs = []
    for node in sorted((n for n in nodes if _worker(n)), key=lambda n: str(n["metadata"]["name"])):
        name = str(node["metadata"]["name"])
        entry = next((d for d in ((by_node.get(name) or {}).get("spec") or {}).get("drivers") or []
                      if d.get("name") == driver), None)
        if entry is None:
            regs.append(NodeRegistration(name, False))
        else:
            count = (entry.get("allocatable") or {}).get("count")
            regs.append(NodeRegistration(name, True, tuple(sorted(entry.get("topologyKeys") or [])),
                                         None if count is None else int(count)))
    sc = storage_class or {}
    return Discovery(
        driver=driver,
        attach_required=None if csidriver is None else bool(spec.get("attachRequired", True)),
        storage_capacity=None if csidriver is None else bool(spec.get("storageCapacity", False)),
        fs_group_policy=None if csidriver is None else str(spec.get("fsGroupPolicy") or "ReadWriteOnceWithFSType"),
        volume_lifecycle_modes=tuple(spec.get("volumeLifecycleModes") or ["Persistent"]),
        nodes=tuple(regs),
        binding_mode=str(sc.get("volumeBindingMode") or "Immediate") if sc else None,
        allow_expansion=bool(sc.get("allowVolumeExpansion", False)) if sc else None,
    )


def missing_registrations(d: Discovery) -> list[str]:
    """Workers whose CSINode does not list the driver."""
    return [n.node for n in d.nodes if not n.registered]


@dataclass(frozen=True)
class Disagreement:
    capability: str
    declared: str
    discovered: str

    def line(self) -> str:
        return f"{self.capability}: the profile declares {self.declared}, the cluster shows {self.discovered}"


def declared_table(profile: DriverProfile | None) -> dict[str, str]:
    """Capability -> what the profile declares ("" for what a profile cannot say)."""
    if profile is None:
        return {}
    def cap(name: str) -> str:
        return "yes" if profile.has(name) else "no"
    return {
        "capacity": cap("capacity"),
        "topology": ", ".join(profile.topology_keys) if profile.has("topology") else "none",
        "fsGroupPolicy": "applies (fsGroup)" if profile.has("fsGroup") else "no fsGroup",
        "volumeLimits": "limited" if profile.has("volumeLimits") else "no",
        "controllerExpansion": cap("controllerExpansion"),
    }


def compare(profile: DriverProfile | None, d: Discovery) -> list[Disagreement]:
    """Every capability the profile declares otherwise than the cluster shows."""
    if profile is None:
        return []
    out = []
    keys = set(d.topology_keys)
    if profile.has("topology") and not keys:
        out.append(Disagreement("topology", "topology", "no topology keys in any worker's CSINode"))
    for key in profile.topology_keys:
        if key not in keys:
            lacking = [n.node for n in d.nodes if key not in n.topology_keys]
            out.append(Disagreement(f"TopologyKeys {key}", f"topology key {key}",
                                    f"no {key} in the CSINode of {', '.join(lacking) or 'every worker'}"))
    if d.storage_capacity is not None and profile.has("capacity") != d.storage_capacity:
        out.append(Disagreement("capacity", f"capacity={str(profile.has('capacity')).lower()}",
                                f"CSIDriver storageCapacity={str(d.storage_capacity).lower()}"))
    if d.fs_group_policy is not None and profile.has("fsGroup") and d.fs_group_policy == "None":
        out.append(Disagreement("fsGroup", "fsGroup=true", "CSIDriver fsGroupPolicy=None"))
    if profile.has("volumeLimits") and d.max_volumes is None:
        out.append(Disagreement("volumeLimits", "volumeLimits=true", "no allocatable count in the CSINodes"))
    if profile.inline_volumes and d.volume_lifecycle_modes and "Ephemeral" not in d.volume_lifecycle_modes:
        out.append(Disagreement("InlineVolumes", f"{profile.inline_volumes} InlineVolumes",
                                f"CSIDriver volumeLifecycleModes {', '.join(d.volume_lifecycle_modes)} (no Ephemeral: "
                                "the kubelet refuses the driver's inline volumes)"))
    if d.allow_expansion is not None and profile.has("controllerExpansion") and not d.allow_expansion:
        out.append(Disagreement("controllerExpansion", "controllerExpansion=true",
                                "the StorageClass has allowVolumeExpansion unset or false"))
    return out


def generated_profile(d: Discovery, storage_class: str) -> dict[str, Any]:
    """A driver profile (upstream's testdriver file) from discovery, for a package with none."""
    caps = {"persistence": True, "topology": bool(d.topology_keys), "capacity": bool(d.storage_capacity),
            "volumeLimits": d.max_volumes is not None, "fsGroup": d.fs_group_policy not in (None, "None"),
            "controllerExpansion": bool(d.allow_expansion), "exec": True, "multipods": True}
    info: dict[str, Any] = {"Name": d.driver, "Capabilities": caps}
    if d.topology_keys:
        info["TopologyKeys"] = list(d.topology_keys)
    out: dict[str, Any] = {"ShortName": d.driver.split(".")[0], "DriverInfo": info,
                           "StorageClass": {"FromExistingClassName": storage_class}}
    if "Ephemeral" in d.volume_lifecycle_modes:  # one volume, no attributes: the driver's defaults
        out["InlineVolumes"] = [{"Attributes": {}}]
    return out


# ---- results ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SuiteRow:
    suite: str
    outcome: str  # passed | failed | skipped
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    reason: str = ""
    link: str = ""  # the failing test's Allure result (the HTML report's ids are made when it is built)
    provisioned: int = 0  # the driver's volumes its tests had provisioned, attached and published
    attached: int = 0
    published: int = 0
    tier: str = ""

    @property
    def volumes(self) -> str:
        return f"{self.provisioned} / {self.attached} / {self.published}"


def _suite_of(data: Mapping[str, Any]) -> str:
    labels = {str(lab.get("name")): str(lab.get("value")) for lab in data.get("labels") or []}
    text = labels.get("suite") or labels.get("parentSuite") or str(data.get("fullName") or "")
    match = re.search(r"test_([a-z0-9_]+)", text)
    return match.group(1) if match else (text or "unknown")


def latest_results(results: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The last attempt of each test, leaving out results the harness wrote itself."""
    latest: dict[str, Mapping[str, Any]] = {}
    for data in results:
        if any(lab.get("name") == "pvchaos.certification" for lab in data.get("labels") or []):
            continue
        key = str(data.get("historyId") or data.get("fullName") or data.get("uuid"))
        if key not in latest or int(data.get("stop") or 0) >= int(latest[key].get("stop") or 0):
            latest[key] = data
    return list(latest.values())


def _labels(data: Mapping[str, Any], name: str) -> list[str]:
    return [str(lab.get("value")) for lab in data.get("labels") or [] if lab.get("name") == name]


def volume_counts(data: Mapping[str, Any]) -> tuple[int, int, int]:
    """(provisioned, attached, published) of the run's driver in one test (its evidence label)."""
    for text in _labels(data, EVIDENCE_LABEL):
        found = re.fullmatch(r"provisioned (\d+), attached (\d+), published (\d+)(?:, inline \d+)?", text)
        if found:
            return int(found[1]), int(found[2]), int(found[3])
    return 0, 0, 0


def suite_rows(results: Iterable[Mapping[str, Any]], suites: Sequence[str],
               tier_of: Callable[[str], str] = lambda _: "") -> list[SuiteRow]:
    """One row per suite from Allure result dicts (last attempt of each test counts), with
    the driver's volumes its tests exercised; a suite with no result is a failed row, not a
    silent gap."""
    latest = {str(d.get("uuid")): d for d in latest_results(results)}
    grouped: dict[str, list[Mapping[str, Any]]] = {s: [] for s in suites}
    for data in latest.values():
        grouped.setdefault(_suite_of(data), []).append(data)
    rows = []
    for suite, items in grouped.items():
        counts = [volume_counts(i) for i in items]
        volumes: dict[str, Any] = {"provisioned": sum(c[0] for c in counts), "attached": sum(c[1] for c in counts),
                                   "published": sum(c[2] for c in counts), "tier": tier_of(suite)}
        status = [str(i.get("status")) for i in items]
        failed = [i for i in items if str(i.get("status")) not in ("passed", "skipped")]
        skipped = [i for i in items if str(i.get("status")) == "skipped"]
        n_passed, n_failed, n_skipped = status.count("passed"), len(failed), len(skipped)
        if not items:
            rows.append(SuiteRow(suite, "failed", reason="no results (the suite did not run)", tier=tier_of(suite)))
        elif failed:
            first = failed[0]
            message = str((first.get("statusDetails") or {}).get("message") or "").strip()
            rows.append(SuiteRow(suite, "failed", n_passed, n_failed, n_skipped,
                                 reason=f"{first.get('name')}: {message.splitlines()[0] if message else first.get('status')}",
                                 link=f"allure-results/{first.get('uuid')}-result.json", **volumes))
        elif len(skipped) == len(items):
            rows.append(SuiteRow(suite, "skipped", n_passed, n_failed, n_skipped, reason=_skip_reasons(skipped),
                                 **volumes))
        else:
            rows.append(SuiteRow(suite, "passed", n_passed, n_failed, n_skipped,
                                 reason=f"{len(skipped)} skipped: {_skip_reasons(skipped)}" if skipped else "",
                                 **volumes))
    return rows


def _skip_reasons(skipped: Sequence[Mapping[str, Any]], most: int = 5) -> str:
    """The distinct reasons a suite's tests skipped, in the order met (its tests may lack
    different things: one the attach capability, another a cluster shape)."""
    reasons: list[str] = []
    for item in skipped:
        labels = {str(lab.get("name")): str(lab.get("value")) for lab in item.get("labels") or []}
        message = re.sub(r"^Skipped:\s*", "", str((item.get("statusDetails") or {}).get("message") or "").strip())
        missing = labels.get(MISSING_LABEL)
        first = message.splitlines()[0] if message else ""
        if missing and f"no {missing}" not in first:
            first = f"no {missing}: {first}"
        # one test's reason may be several ("backend existing: no real-kubelet; ... no attach")
        for reason in (r.strip() for r in first.split("; ")):
            if reason and reason not in reasons:
                reasons.append(reason)
    extra = f"; and {len(reasons) - most} more" if len(reasons) > most else ""
    return "; ".join(reasons[:most]) + extra


def recovery_figures(results: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Measured figures (the kit's excluded Allure parameters with a unit) by test name."""
    out: dict[str, str] = {}
    for data in results:
        for p in data.get("parameters") or []:
            name, value = str(p.get("name") or ""), str(p.get("value") or "")
            if re.search(r"(recover|time|seconds|latency|window|_s\b)", name, re.I) and re.search(r"\d", value):
                out[f"{data.get('name')}: {name}"] = value
    return dict(sorted(out.items()))


# ---- capabilities exercised: the certification rests on them -------------------------------

CERTIFIED, NOT_CERTIFIED, FAILED = "CERTIFIED", "NOT CERTIFIED", "FAILED"
# The suites that exercise a capability, for the "why not exercised" of a row.
EXERCISING_SUITES: dict[str, str] = {
    "dynamic-provisioning": "every suite with the driver's class", "publish": "any suite on real kubelets",
    "topology": "binding_modes, spreading", "attach": "attach_detach", "capacity": "capacity",
    "volume-limits": "csi_topology", "fsgroup": "fs_group",
    "expansion": "expansion (with a csi-resizer in the package)", "modify-volume": "expansion (with a csi-resizer)",
    "volume-mode Block": "block_volumes", "access-mode ReadWriteMany": "none yet",
    "snapshots": "snapshots", "clones": "snapshots", "inline-ephemeral": "inline_ephemeral",
}


def driver_capabilities(d: Discovery, profile: DriverProfile | None) -> dict[str, str]:
    """Capability word -> why the driver has it: what discovery found, and what its profile
    declares (a declared capability must be exercised too, or the certification says so)."""
    caps = {"dynamic-provisioning": "a StorageClass of the driver", "publish": "every CSI node plugin",
            "access-mode ReadWriteOnce": "every driver"}
    if d.topology_keys:
        caps["topology"] = f"CSINode topology keys {', '.join(d.topology_keys)}"
    if d.attach_required:
        caps["attach"] = "CSIDriver attachRequired true"
    if d.storage_capacity:
        caps["capacity"] = "CSIDriver storageCapacity true"
    if d.max_volumes is not None:
        caps["volume-limits"] = f"CSINode allocatable count {d.max_volumes}"
    if d.allow_expansion or (profile is not None and profile.has("controllerExpansion")):
        caps["expansion"] = "StorageClass allowVolumeExpansion" if d.allow_expansion else "profile controllerExpansion"
    if d.fs_group_policy and d.fs_group_policy != "None":
        caps["fsgroup"] = f"CSIDriver fsGroupPolicy {d.fs_group_policy}"
    controller = d.controller_capabilities or ()
    if "EXPAND_VOLUME" in controller:
        caps["expansion"] = "ControllerGetCapabilities EXPAND_VOLUME"
    if "MODIFY_VOLUME" in controller:
        caps["modify-volume"] = "ControllerGetCapabilities MODIFY_VOLUME"
    elif profile is not None and profile.volume_attributes_class_source is not None:
        caps["modify-volume"] = "profile VolumeAttributesClass"
    if "CREATE_DELETE_SNAPSHOT" in controller:
        caps["snapshots"] = "ControllerGetCapabilities CREATE_DELETE_SNAPSHOT"
    if "CLONE_VOLUME" in controller:
        caps["clones"] = "ControllerGetCapabilities CLONE_VOLUME"
    # the controller service is not asked where only the node plugin's socket is reachable:
    # what the profile declares counts as well
    if "snapshots" not in caps and profile is not None and profile.has("snapshotDataSource"):
        caps["snapshots"] = "profile capability snapshotDataSource"
    if "clones" not in caps and profile is not None and profile.has("pvcDataSource"):
        caps["clones"] = "profile capability pvcDataSource"
    if "Ephemeral" in d.volume_lifecycle_modes:
        caps["inline-ephemeral"] = "CSIDriver volumeLifecycleModes Ephemeral"
    elif profile is not None and profile.inline_volumes:
        caps["inline-ephemeral"] = f"profile InlineVolumes ({profile.inline_volumes})"
    if profile is not None and profile.has("RWX"):
        caps["access-mode ReadWriteMany"] = "profile capability RWX"
    if profile is not None and profile.has("block"):
        caps["volume-mode Block"] = "profile capability block"
    return caps


@dataclass(frozen=True)
class CapabilityRow:
    """One capability of the driver: which tier's tests exercised it, and the verdict."""

    capability: str
    source: str  # why the driver has it
    tiers: dict[str, str]  # tier -> "passed (N)", "failed (N)" or "-"
    outcome: str  # exercised | failed | not exercised
    why: str = ""  # for not exercised: the suites that would, and why they did not


def capability_rows(caps: Mapping[str, str], results: Iterable[Mapping[str, Any]], tiers: Sequence[str],
                    tier_of: Callable[[str], str], rows: Sequence[SuiteRow]) -> list[CapabilityRow]:
    """Each capability x tier: the tests that passed (or failed) with evidence of it."""
    latest = latest_results(results)
    out = []
    for cap, source in caps.items():
        cells: dict[str, str] = {}
        passed = failed = 0
        for tier in tiers:
            hits = [d for d in latest if tier_of(_suite_of(d)) == tier and cap in _labels(d, EXERCISED_LABEL)]
            ok = sum(1 for d in hits if d.get("status") == "passed")
            bad = sum(1 for d in hits if d.get("status") not in ("passed", "skipped"))
            cells[tier] = f"failed ({bad})" if bad else (f"passed ({ok})" if ok else "-")
            passed, failed = passed + ok, failed + bad
        if failed:
            out.append(CapabilityRow(cap, source, cells, "failed"))
        elif passed:
            out.append(CapabilityRow(cap, source, cells, "exercised"))
        else:
            suites = EXERCISING_SUITES.get(cap, "none")
            reasons = [f"{r.suite}: {r.reason}" for r in rows if r.suite in suites and r.reason]
            out.append(CapabilityRow(cap, source, cells, "not exercised",
                                     f"no passing test showed it (suites that do: {suites})"
                                     + (f"; {'; '.join(reasons)}" if reasons else "")))
    return out


# ---- the report -------------------------------------------------------------------------

@dataclass
class Certification:
    """Everything certification.md and certification.json say."""

    driver: str
    driver_version: str
    version_source: str
    k8s_version: str
    backend: str
    discovered: dict[str, str]
    declared: dict[str, str]
    disagreements: list[Disagreement]
    rows: list[SuiteRow]
    findings: list[str] = field(default_factory=list)
    recovery: dict[str, str] = field(default_factory=dict)
    command: str = ""
    profile_source: str = "generated from discovery"
    plugin_name: str = ""  # the name GetPluginInfo answered; "" when it was not called
    capabilities: list[CapabilityRow] = field(default_factory=list)
    tiers: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """FAILED when a test failed, the profile disagreed or something was left behind;
        NOT CERTIFIED when a capability the driver has was exercised by no passing test
        (or no test ran at all); CERTIFIED otherwise."""
        failed = any(r.outcome == "failed" for r in self.rows) or self.disagreements or self.findings
        if failed or any(c.outcome == "failed" for c in self.capabilities):
            return FAILED
        if not self.capabilities or any(c.outcome != "exercised" for c in self.capabilities):
            return NOT_CERTIFIED
        return CERTIFIED

    def exit_code(self) -> int:
        """0 only for CERTIFIED."""
        return 0 if self.verdict == CERTIFIED else 1


def to_json(c: Certification) -> dict[str, Any]:
    body = asdict(c)
    body["verdict"] = c.verdict
    body["disagreements"] = [d.line() for d in c.disagreements]
    return json.loads(redact(json.dumps(body)))


def _cell(text: str) -> str:
    return redact(text).replace("|", "\\|").replace("\n", " ").strip()


def render_markdown(c: Certification) -> str:
    missing = [r for r in c.capabilities if r.outcome != "exercised"]
    lines = [f"# CSI driver certification: {_cell(c.driver)}", "",
             f"**{c.verdict}**: " + ", ".join(f"{sum(r.outcome == o for r in c.rows)} {o}"
                                             for o in ("passed", "failed", "skipped")) + " suites"
             + (f"; {len(c.disagreements)} profile disagreements" if c.disagreements else "")
             + (f"; {len(c.findings)} findings" if c.findings else "")
             + (f"; capabilities not exercised: {', '.join(r.capability for r in missing)}" if missing else ""), "",
             "## Summary: capability x tier", "",
             "| Capability | Why the driver has it | " + " | ".join(c.tiers) + " | Result |",
             "|---|---|" + "---|" * len(c.tiers) + "---|"]
    for row in c.capabilities:
        result = row.outcome if row.outcome == "exercised" else f"**{row.outcome}**"
        lines.append(f"| {row.capability} | {_cell(row.source)} | " + " | ".join(row.tiers.get(t, "-") for t in c.tiers)
                     + f" | {result} |")
    lines += [f"- {_cell(r.capability)} not exercised: {_cell(r.why)}" for r in missing if r.why]
    lines += ["",
             "| | |", "|---|---|",
             f"| Driver | {_cell(c.driver)} |",
             f"| Version | {_cell(c.driver_version)} ({_cell(c.version_source)}) |",
             f"| GetPluginInfo name | {_cell(c.plugin_name or 'not called (see Version)')} |",
             f"| Kubernetes | {_cell(c.k8s_version)} |",
             f"| Backend | {_cell(c.backend)} |",
             f"| Profile | {_cell(c.profile_source)} |",
             "", "## Capabilities", "", "| Capability | Discovered | Declared | Agree |", "|---|---|---|---|"]
    disagreeing = {"topology" if d.capability.startswith("TopologyKeys") else d.capability for d in c.disagreements}
    for cap, found in c.discovered.items():
        declared = c.declared.get(cap, "")
        agree = "" if not declared else ("**no**" if cap in disagreeing else "yes")
        lines.append(f"| {cap} | {_cell(found)} | {_cell(declared or '-')} | {agree or '-'} |")
    if c.disagreements:
        lines += ["", "Disagreements between the profile and the cluster:", ""]
        lines += [f"- {_cell(d.line())}" for d in c.disagreements]
    lines += ["", "## Suites", "",
              "| Suite | Tier | Result | Passed | Failed | Skipped | Driver volumes provisioned / attached / published "
              "| Reason |", "|---|---|---|---|---|---|---|---|"]
    for r in c.rows:
        result = "**failed**" if r.outcome == "failed" else r.outcome
        reason = f"[{_cell(r.reason)}]({r.link})" if r.link else _cell(r.reason)
        lines.append(f"| {r.suite} | {r.tier or '-'} | {result} | {r.passed} | {r.failed} | {r.skipped} | {r.volumes} "
                     f"| {reason} |")
    if c.recovery:
        lines += ["", "## Recovery figures", "", "| Measurement | Value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in c.recovery.items()]
    lines += ["", "## Findings", ""]
    lines += [f"- {_cell(f)}" for f in c.findings] or ["None: the uninstall left no PVC, PV or VolumeAttachment."]
    lines += ["", "## Reproduce", "", "```sh", c.command, "```", ""]
    return "\n".join(lines)


def write_report(report_dir: Path, c: Certification) -> tuple[Path, Path]:
    report_dir.mkdir(parents=True, exist_ok=True)
    md, js = report_dir / "certification.md", report_dir / "certification.json"
    md.write_text(render_markdown(c))
    js.write_text(json.dumps(to_json(c), indent=1) + "\n")
    return md, js

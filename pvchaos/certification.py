"""The certification summary of a driver run: one page saying, for each behaviour, passed,
failed, or skipped for a named missing capability.

A CSI vendor wants one answer per behaviour, not a test log; and "skipped" is only honest
if it says which capability was missing, so the skip reasons the suites write ("driver X:
no topology (...)", "backend kind: no rwx") are parsed back into capability names. The
page is Markdown, and `write_allure_summary` also puts it into the Allure results as one
extra result, so the same page appears in the Allure report.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pvchaos.drivers.profile import UPSTREAM_CAPABILITIES, DriverProfile, harness_capabilities

OUTCOMES = ("passed", "failed", "skipped")
SUMMARY_LABEL = "pvchaos.certification"
MISSING_LABEL = "pvchaos.missing-capability"  # set by the plugin on a capability skip
SOURCE_LABEL = "pvchaos.skip-source"  # "backend kind", "driver csi.example.com"
EVIDENCE_LABEL = "pvchaos.volumes"  # "provisioned N, attached M, published K" of the run's driver (plugin)
EXERCISED_LABEL = "pvchaos.exercised"  # one per driver capability a test exercised (plugin)
_ALLURE_OUTCOME = {"passed": "passed", "failed": "failed", "broken": "failed", "skipped": "skipped"}
_SECRETS = (
    (re.compile(r"(?i)\b(token|password|client-key-data|client-certificate-data)(\s*[:=]\s*)\S+"), r"\1\2<redacted>"),
    (re.compile(r"(?i)\bbearer\s+\S+"), "Bearer <redacted>"),
    (re.compile(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", re.S), "<redacted PEM>"),
)


@dataclass(frozen=True)
class BehaviourResult:
    """One behaviour's outcome; `reason` is the skip reason or the failure message."""

    behaviour: str
    title: str
    outcome: str
    reason: str = ""
    capability: str | None = None  # the missing capability of a skip, from the result's label

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"behaviour {self.behaviour}: outcome {self.outcome!r} is not one of {OUTCOMES}")

    @property
    def missing_capability(self) -> str | None:
        """The capability a skip was for (the plugin's label, never parsed from the text)."""
        return self.capability if self.outcome == "skipped" else None


def redact(text: str) -> str:
    """Reports never carry credentials, even when an error message quoted one."""
    for pattern, repl in _SECRETS:
        text = pattern.sub(repl, text)
    return text


def _cell(text: str) -> str:
    return redact(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _natural(key: str) -> list[object]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key)]


def _class_text(profile: DriverProfile) -> str:
    match profile.storage_class_source:
        case "FromName":
            return f"FromName (provisioner {profile.name}, no parameters)"
        case "FromExistingClassName":
            return f"FromExistingClassName {profile.storage_class_name}"
        case "FromFile":
            return f"FromFile {profile.storage_class_file}"
    return "none (no dynamic provisioning)"


def render_certification(profile: DriverProfile, results: Iterable[BehaviourResult]) -> str:
    """One Markdown page: the driver, its capabilities, and every behaviour's outcome."""
    rows = sorted(results, key=lambda r: (_natural(r.behaviour), r.title))
    counts = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
    verdict = "FAILED" if counts["failed"] else ("PASSED" if rows else "NO RESULTS")
    size = f"{profile.size_min} to {profile.size_max or 'unbounded'}"
    lines = [
        f"# CSI certification: {_cell(profile.name)}",
        "",
        f"**{verdict}**: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped ({len(rows)} behaviours)",
        "",
        "| Driver | |",
        "|---|---|",
        f"| Name | {_cell(profile.name)} |",
        f"| Short name | {_cell(profile.short_name)} |",
        f"| StorageClass | {_cell(_class_text(profile))} |",
        f"| Size range | {_cell(size)} |",
        f"| Topology keys | {_cell(', '.join(profile.topology_keys) or 'none')} "
        f"({profile.num_allowed_topologies} allowed) |",
        f"| Access modes | {_cell(', '.join(profile.required_access_modes) or 'ReadWriteOnce (default)')} |",
        f"| Profile | {_cell(profile.source)} |",
        "",
        "## Capabilities",
        "",
        "| Capability | Declared |",
        "|---|---|",
    ]
    known = [c for c in UPSTREAM_CAPABILITIES if c in profile.capabilities]
    known += [c for c in UPSTREAM_CAPABILITIES if c not in profile.capabilities]
    for cap in known:
        state = ("yes" if profile.capabilities[cap] else "no") if cap in profile.capabilities else "unset (no)"
        lines.append(f"| {cap} | {state} |")
    harness = ", ".join(sorted(harness_capabilities(profile))) or "none"
    lines += ["", f"Harness capabilities this driver provides: {harness}.", "", "## Behaviours", "",
              "| Behaviour | Title | Outcome | Detail |", "|---|---|---|---|"]
    for r in rows:
        if r.outcome == "skipped":
            missing = r.missing_capability
            outcome = f"skipped: no {missing}" if missing else "skipped"
        else:
            outcome = r.outcome if r.outcome == "passed" else "**failed**"
        detail = "" if r.outcome == "passed" else r.reason.strip().splitlines()[0] if r.reason.strip() else ""
        lines.append(f"| {_cell(r.behaviour)} | {_cell(r.title)} | {outcome} | {_cell(detail)} |")
    return "\n".join(lines) + "\n"


# ---- Allure --------------------------------------------------------------------------

def _labels(result: dict) -> dict[str, str]:
    return {str(lab.get("name")): str(lab.get("value")) for lab in result.get("labels") or [] if isinstance(lab, dict)}


def results_from_allure(results_dir: Path | str) -> list[BehaviourResult]:
    """Behaviour results from allure-results `*-result.json` files. The behaviour id is
    the `behaviour` label if a test set one, else its Allure id, else its fullName; a
    retried test counts once, with its last attempt."""
    latest: dict[str, tuple[int, BehaviourResult]] = {}
    for path in sorted(Path(results_dir).glob("*-result.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"allure result {path}: unreadable ({type(exc).__name__})") from None
        labels = _labels(data)
        if SUMMARY_LABEL in labels:
            continue
        name = str(data.get("name") or data.get("fullName") or path.stem)
        behaviour = labels.get("behaviour") or labels.get("as_id") or str(data.get("fullName") or name)
        message = str((data.get("statusDetails") or {}).get("message") or "")
        outcome = _ALLURE_OUTCOME.get(str(data.get("status")), "failed")
        if outcome == "skipped":
            message = re.sub(r"^Skipped:\s*", "", message.strip())
        elif str(data.get("status")) not in _ALLURE_OUTCOME:
            message = message or f"allure status {data.get('status')!r}"
        key = str(data.get("historyId") or data.get("fullName") or path.name)
        stop = int(data.get("stop") or 0)
        if key not in latest or stop >= latest[key][0]:
            latest[key] = (stop, BehaviourResult(behaviour, name, outcome, message, labels.get(MISSING_LABEL)))
    return [r for _, r in latest.values()]


def write_allure_summary(results_dir: Path | str, profile: DriverProfile,
                         results: Iterable[BehaviourResult]) -> Path:
    """Add the page to allure-results as one result with a Markdown attachment, labelled
    so `results_from_allure` leaves it out. Returns the result file written."""
    results = list(results)
    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    attachment = f"{uuid.uuid4()}-attachment.md"
    (out / attachment).write_text(render_certification(profile, results))
    now = int(time.time() * 1000)
    failed = any(r.outcome == "failed" for r in results)
    result_id = str(uuid.uuid4())
    body = {
        "uuid": result_id, "historyId": f"pvchaos-certification-{profile.name}",
        "name": f"CSI certification: {profile.name}", "fullName": f"pvchaos.certification.{profile.name}",
        "status": "failed" if failed else "passed", "start": now, "stop": now,
        "labels": [{"name": SUMMARY_LABEL, "value": "summary"}, {"name": "suite", "value": "certification"},
                   {"name": "driver", "value": profile.name}],
        "attachments": [{"name": "Certification summary", "source": attachment, "type": "text/markdown"}],
    }
    path = out / f"{result_id}-result.json"
    path.write_text(json.dumps(body, indent=1))
    return path

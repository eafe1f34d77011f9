"""`pvchaos run --k8s-version A,B,...`: the same suites on several Kubernetes versions, one
report, and what changed between adjacent versions.

Each version runs as a run of its own (report under <report dir>/<version>/); their
results are then merged into one Allure report with the version as a parameter of every
result, a test x version table, and a "behaviour changes" section. A behaviour change is
what `pvchaos compare` finds between two runs (pvchaos.compare_runs: a verdict, an
asserted message, or a timing beyond its noise thresholds), here between each version and
the next one up. Known changes are explained in `EXPLAINED`; an unexplained change is
listed as such, so a new one stands out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pvchaos import compare_runs, report
from pvchaos.compare_runs import Change, Run
from pvchaos.conformance import feature_gates
from pvchaos.tools import versions

# (test, older minor, newer minor) -> why its behaviour differs between the two; the test is
# "suite file stem::test name" as pvchaos.results.test_key writes it.
_GATE_ABSENT = ("MutablePVNodeAffinity does not exist before 1.35 (pkg/features/kube_features.go of "
                "v1.34.4 has no such gate): the test needs the gate and skips on 1.34")
EXPLAINED: dict[tuple[str, int | None, int | None], str] = {}
# (test, measurement) -> why that measurement moves between any two runs, version or not:
# shown by runs of one version (the evidence is in the text); a verdict or message change
# of the same test is still judged.
TIMING_ANY_VERSION: dict[tuple[str, str], str] = {
    ("test_component_restart::test_controller_manager_restart_mid_binding", "recovery seconds"): (
        "the claims bind at once or about 5 s later, a step of the PV controller's resync "
        "(--pvclaimbinder-sync-period 5 s), on any version: 0.7 s on v1.34.4 in the 2026-12-07 matrix run, 5.3-5.7 s "
        "on the others, and a probe the same day (kcm stopped, 3 claims, kcm started) gave v1.34.4 5.5 s, v1.35.4 5.4 s"),
    ("test_volume_stress::test_pods_with_volumes_on_one_node", "all pods Running seconds"): (
        "pods on one KWOK node moving to Running, a few seconds on a shared 2-core machine: 1.8, 2.4, 5.1, 3.0 "
        "and 2.9 s on v1.34.4 to v1.38.0-beta.0 in one matrix run (2026-12-07), no trend; the test asserts them "
        "Running, not how fast"),
}
# a skip that names a gate the older version lacks ("Kubernetes v1.34.4 has no
# MutablePVNodeAffinity gate"), from pvchaos.clusters.local.cluster.missing_details
_GATE_MISSING = re.compile(r"has no (\w+) gate; it is first in (1\.\d+)")
# an expected failure that names an upstream issue it reproduced (suites' pytest.xfail)
_UPSTREAM_RACE = re.compile(r"kubernetes #(\d+) reproduced")


@dataclass(frozen=True)
class VersionStep:
    """The changes from one version to the next one up, with each changed test's status
    message on both (a skip's or an expected failure's reason is evidence)."""

    older: str
    newer: str
    changes: tuple[Change, ...]
    reasons: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def explanation(self, change: Change) -> str | None:
        return explain(change, self.older, self.newer, self.reasons.get(change.test, ("", "")))


def explain(change: Change, older: str, newer: str, reasons: tuple[str, str] = ("", "")) -> str | None:
    """Why a change between two versions is expected, or None when nobody has explained it.
    `reasons`: the test's status message on the older and the newer version."""
    a, b = versions.minor_of(older), versions.minor_of(newer)
    test = change.test
    if (test, a, b) in EXPLAINED:
        return EXPLAINED[(test, a, b)]
    if change.verdict == ("skipped", "passed") and a is not None and a < 35 <= (b or 0) and \
            test.startswith("test_pv_affinity_mutation::"):
        return _GATE_ABSENT
    if change.verdict == ("skipped", "passed") and (gate := _GATE_MISSING.search(reasons[0])):
        return (f"the test needs {gate.group(1)}, which {older} does not have (first in {gate.group(2)}); "
                f"it skipped there saying so")
    race = next(((version, m) for version, reason in ((older, reasons[0]), (newer, reasons[1]))
                 if (m := _UPSTREAM_RACE.search(reason))), None)
    if change.verdict_changed and set(change.verdict) == {"skipped", "passed"} and race and not change.messages:
        where, found = race
        return (f"kubernetes #{found.group(1)} is a race the test records as an expected failure whenever it "
                f"reproduces; it reproduced on {where} in this run and not on the other: one run per version "
                f"does not tell a fix from timing")
    if change.timings and not change.verdict_changed and not change.messages and all(
            name == compare_runs.DURATION or (test, name) in TIMING_ANY_VERSION for name, *_ in change.timings):
        moved = [name for name, *_ in change.timings if name != compare_runs.DURATION]
        if moved:
            return "; ".join(TIMING_ANY_VERSION[(test, name)] for name in moved)
    if not change.verdict_changed and all(name == compare_runs.DURATION for name, *_ in change.timings) \
            and not change.messages:
        return "only the test's duration moved (beyond noise): controller resync timing, not a behaviour"
    return None


def parse_versions(text: str) -> list[str]:
    """`v1.34.4,v1.35.4` -> the versions in ascending order; one line on anything wrong."""
    items = [v.strip() for v in text.split(",")]
    if not all(items):
        raise ValueError(f"--k8s-version {text!r}: an empty item; give versions like v1.35.4,v1.36.3")
    bad = [v for v in items if versions.minor_of(v, release_only=True) is None]
    if bad:
        raise ValueError(f"--k8s-version {text!r}: {', '.join(bad)} is not a release version "
                         "(want v1.MINOR.PATCH or a pre-release such as v1.38.0-beta.0)")
    if len(set(items)) != len(items):
        raise ValueError(f"--k8s-version {text!r}: a version is given twice")
    return sorted(items, key=versions.order_key)


def unserved(wanted: Sequence[str], served: Sequence[str]) -> list[str]:
    """The wanted versions the proxy does not serve (nothing when the list is unknown)."""
    return [v for v in wanted if served and v not in served]


def steps(runs: Sequence[Run]) -> list[VersionStep]:
    """Changes between each run and the next (runs in ascending version order, labelled by version)."""
    return [VersionStep(a.label, b.label, changes := tuple(compare_runs.compare(a, b)),
                        {c.test: (_status_message(a, c.test), _status_message(b, c.test)) for c in changes})
            for a, b in itertools.pairwise(runs)]


def _status_message(run: Run, test: str) -> str:
    return str((run.results.get(test, {}).get("statusDetails") or {}).get("message") or "")


def verdict_table(runs: Sequence[Run]) -> dict[str, dict[str, str]]:
    """Test -> version -> status (absent where the version did not run it)."""
    tests = sorted({t for r in runs for t in r.results})
    return {t: {r.label: str(r.results.get(t, {}).get("status", "absent")) for r in runs} for t in tests}


def unexplained(all_steps: Sequence[VersionStep]) -> list[tuple[VersionStep, Change]]:
    return [(s, c) for s in all_steps for c in s.changes if s.explanation(c) is None]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _evidence(change: Change) -> str:
    failure = next((b for what, _, b in change.messages if what == compare_runs.FAILURE and b != "-"), "")
    failure = failure or next((a for what, a, _ in change.messages if what == compare_runs.FAILURE), "")
    return _cell(change.summary() + (f"; failure: {failure}" if failure else ""))


def render_markdown(runs: Sequence[Run], all_steps: Sequence[VersionStep],
                    binary_gates: Mapping[str, Mapping[str, tuple[str, bool]] | None] | None = None) -> str:
    """The matrix as Markdown: the test x version table, then each adjacent pair's changes,
    then the gates per version: from the source table, and (`binary_gates`: version -> the
    alpha/beta gates its kube-apiserver --help describes) from the binaries that ran."""
    labels = [r.label for r in runs]
    table = verdict_table(runs)
    lines = ["# Suites by Kubernetes version", "",
             f"| test | {' | '.join(labels)} |", f"|---|{'---|' * len(labels)}"]
    lines += [f"| {t} | {' | '.join(cells[v] for v in labels)} |" for t, cells in table.items()]
    counts = {v: sum(1 for cells in table.values() if cells[v] == "passed") for v in labels}
    lines += ["", "passed per version: " + ", ".join(f"{v} {n}/{len(table)}" for v, n in counts.items())]
    lines += ["", "## Behaviour changes between adjacent versions", "",
              "A change is what `pvchaos compare` reports: a verdict, an asserted message, or a timing "
              "beyond its noise threshold (" + ", ".join(
                  f"{s:g} s and {r:.0%} of the smaller value for "
                  f"{'a measurement' if k != compare_runs.DURATION else 'a test duration'}"
                  for k, (s, r) in compare_runs.NOISE.items()) + ").", ""]
    for step in all_steps:
        lines += [f"### {step.older} -> {step.newer}", ""]
        if not step.changes:
            lines += ["no change", ""]
            continue
        lines += ["| test | change (evidence) | why |", "|---|---|---|"]
        for c in step.changes:
            why = step.explanation(c) or "**UNEXPLAINED**"
            lines.append(f"| {c.test} | {_evidence(c)} | {_cell(why)} |")
        lines.append("")
    bad = unexplained(all_steps)
    total = sum(len(s.changes) for s in all_steps)
    lines.append(f"{total} changes between adjacent versions; {len(bad)} unexplained"
                 + (": " + ", ".join(f"{c.test} ({s.older} -> {s.newer})" for s, c in bad) if bad else "."))
    gates = sorted(feature_gates.DEPENDS)
    lines += ["", "## Feature gates the suites depend on", "",
              f"| gate | {' | '.join(labels)} |", f"|---|{'---|' * len(labels)}"]
    lines += [f"| {g} | {' | '.join(_gate_cell(v, g) for v in labels)} |" for g in gates]
    if binary_gates is not None:
        lines += ["", "Read from each version's own `kube-apiserver --help` (the binaries that ran; GA gates "
                  "are not listed there):", "", f"| gate | {' | '.join(labels)} |", f"|---|{'---|' * len(labels)}"]
        lines += [f"| {g} | {' | '.join(_binary_cell(binary_gates.get(v), g) for v in labels)} |"
                  for g in gates if g == MUTABLE_PV_GATE]
    return "\n".join(lines) + "\n"


MUTABLE_PV_GATE = "MutablePVNodeAffinity"


def _binary_cell(states: Mapping[str, tuple[str, bool]] | None, gate: str) -> str:
    if states is None:
        return "not built"
    found = states.get(gate)
    return f"{found[0]}, {'on' if found[1] else 'off'}" if found else "not listed (GA or absent)"


def _gate_cell(version: str, gate: str) -> str:
    if version not in feature_gates.STATES:
        return "not recorded (python -m pvchaos.tools.feature_gates)"
    return feature_gates.state_text(feature_gates.STATES[version].get(gate))


CHANGE_PREFIX = "version change: "
CATEGORY = report.change_category(
    "Behaviour changes between Kubernetes versions", CHANGE_PREFIX,
    "A test whose verdict, asserted message or timing changed from one version to the next "
    "(failed: passed on the older version and fails on the newer, or nobody explained it).")


def unexplained_behaviour(all_steps: Sequence[VersionStep]) -> list[tuple[VersionStep, Change]]:
    """Unexplained changes of a verdict or an asserted message (timings alone are reported, not judged)."""
    return [(s, c) for s, c in unexplained(all_steps) if c.verdict_changed or c.messages]


def write_results(target: Path, all_steps: Sequence[VersionStep], table: str) -> None:
    """One Allure result per change (category "Behaviour changes between Kubernetes
    versions"), failed when it is a regression or unexplained, and one with the table."""
    for step in all_steps:
        for c in step.changes:
            why = step.explanation(c)
            text = f"{CHANGE_PREFIX}{step.older} -> {step.newer}: {c.summary()}" + (f" ({why})" if why else "")
            judged = c.regression or (why is None and (c.verdict_changed or bool(c.messages)))
            report.write_synthetic_result(
                target, name=f"{c.test}: {step.older} -> {step.newer}", full_name=f"pvchaos.versions#{c.test}",
                identity=f"versions:{step.older}:{step.newer}:{c.test}",
                failure=text + ("" if why else " UNEXPLAINED") if judged else None, message=text,
                labels={"suite": "version matrix", "epic": "Behaviour changes"})
    bad = unexplained_behaviour(all_steps)
    report.write_synthetic_result(
        target, name="every behaviour change between versions is explained", full_name="pvchaos.versions#summary",
        identity="versions:summary",
        failure="unexplained: " + ", ".join(f"{c.test} ({s.older} -> {s.newer})" for s, c in bad) if bad else None,
        labels={"suite": "version matrix", "epic": "Behaviour changes"}, attachment=("suites by version", table))

"""The breakage matrix, written down from the run that produced it (issue 39 item 3).

Both matrix tiers (`matrix` on local, `kind-matrix` on kind) hand their outcomes here at
the end of the run; the record is a dated markdown table, one row per (breakage, test),
with the verdict the matrix asserts ("fails" with the failure's first words, or what
happened instead) and the run's Kubernetes version and backend, so docs/self-verification.md
quotes a run rather than a commit message. Written to $PVCHAOS_MATRIX_RECORD when set,
else next to the run's temporary files; the path is printed.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pvchaos.tools.versions import DEFAULT_K8S_VERSION
from tests.selfcheck.test_detection_power import EXPECTATION_ERRORS, Outcome

RECORD_ENV = "PVCHAOS_MATRIX_RECORD"


def selected_runs(item_names: Iterable[str], test_name: str,
                  runs: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The breakage runs (run -> its tests) whose matrix test pytest selected (pure):
    `-k resizer` on a matrix tier runs only the breakages it names, so an entry added to
    the table gets its dated row without the whole tier's 20-45 minutes (without -k every
    test is selected, so every run)."""
    chosen = {name.removeprefix(f"{test_name}[").removesuffix("]") for name in item_names
              if name.startswith(f"{test_name}[")}
    return {run: tests for run, tests in runs.items() if run in chosen}


def verdict(outcome: Outcome | None) -> str:
    """What the matrix asserts of one test, in words (pure)."""
    if outcome is None:
        return "**no result**"
    if outcome.status not in ("failed", "error"):
        return f"**{outcome.status}** (must fail)"
    first = " ".join(outcome.message.replace("pvchaos.kube.errors.", "").split())[:160].replace("|", "\\|")
    if not any(name in outcome.message for name in EXPECTATION_ERRORS):
        return f"**failed, not a product failure**: {first}"
    return f"fails: {first}"


def not_failing(tests: list[str], outcomes: Mapping[str, Outcome], breakage: str) -> list[str]:
    """The tests of one breakage that did not fail with a product failure, each with what
    happened instead (pure; empty when the matrix holds for this breakage)."""
    wrong = []
    for test in tests:
        got = outcomes.get(test)
        if got is None:
            wrong.append(f"{test}: no result (run output tail below)")
        elif got.status not in ("failed", "error"):
            wrong.append(f"{test}: {got.status} under {breakage}")
        elif not any(name in got.message for name in EXPECTATION_ERRORS):
            wrong.append(f"{test}: failed, but not with a product failure: {got.message[:300]}")
    return wrong


def markdown(results: Mapping[str, tuple[Mapping[str, Outcome], float]], tests_of: Mapping[str, list[str]],
             backend: str, k8s_version: str, when: datetime.date) -> str:
    """The dated table (pure): every test of every breakage that ran, in breakage order."""
    part = "" if len(results) == len(tests_of) else f" ({len(results)} of the {len(tests_of)} breakages, as selected)"
    rows = [f"Record: {backend}, Kubernetes {k8s_version}, run {when.isoformat()}{part}:", "",
            "| breakage | suite test | verdict | run (s) |", "| --- | --- | --- | --- |"]
    good = bad = 0
    for breakage in sorted(results):
        outcomes, seconds = results[breakage]
        for test in tests_of[breakage]:
            text = verdict(outcomes.get(test))
            good, bad = (good + 1, bad) if text.startswith("fails") else (good, bad + 1)
            rows.append(f"| `{breakage}` | `{test.removeprefix('suites/')}` | {text} | {seconds:.0f} |")
    rows += ["", f"{good} of {good + bad} tests fail under their breakage as they must"
             + (f"; {bad} do not." if bad else ".")]
    return "\n".join(rows) + "\n"


def write(results: Mapping[str, tuple[Mapping[str, Outcome], float]], tests_of: Mapping[str, list[str]],
          backend: str, fallback_dir: Path) -> Path:
    """Write the record and return its path (the matrix runs pass no --k8s-version: the
    default version is the one that ran)."""
    path = Path(os.environ.get(RECORD_ENV) or fallback_dir / f"breakage-matrix-{backend}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(results, tests_of, backend, DEFAULT_K8S_VERSION, datetime.date.today()),
                    encoding="utf-8")
    print(f"[pvchaos] breakage matrix record: {path}")
    return path

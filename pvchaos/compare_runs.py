"""`pvchaos compare A B`: what changed between two runs, e.g. the same cluster before and
after its upgrade.

Three kinds of change are reported for each test, A to B:
- its verdict (passed, failed, broken, skipped, absent);
- a message: the wording a suite asserted (recorded by `pvchaos.kit.expect.event` as an
  "asserted message KEY" parameter), or the first line of the failure message, both
  with generated names, uids and times taken out so that two runs of the same thing
  read the same (the object names in an asserted event differ in every run);
- a timing: each "... seconds" measurement (`pvchaos.kit.measure`) and the test's
  duration, compared only where the test passed in both runs (a changed verdict is the
  news there). A timing changed when it moved by at least an absolute and at least a
  relative amount of the smaller value (`NOISE`): both, because a shared 2-core machine
  moves short timings by a second at random and long ones by a fraction of their length.
  A measurement (a recovery, an eviction) must move 2 s and 25%; a whole test's duration,
  which includes waiting for controllers' resyncs, 5 s and 50%, wider because one resync
  more or fewer moves it by seconds. Both sit above the spread of healthy runs of one
  test (docs/findings.md: "Figures moved out of the code", "Suites across versions").

A regression is a test that passed in A and failed or broke in B; the command exits 1
when there is one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvchaos import report
from pvchaos.kit.measure import ASSERTED_MESSAGE
from pvchaos.results import latest_by_test, merge_into

DURATION = "test duration seconds"
NOISE = {"measurement": (2.0, 0.25), DURATION: (5.0, 0.5)}  # (seconds, fraction of the smaller value)
FAILURE = "failure message"
FAILING = ("failed", "broken")
CHANGE_PREFIX = "behaviour change: "  # the message of every per-change result (the category matches it)

CATEGORY = report.change_category(
    "Behaviour changes between the compared runs", CHANGE_PREFIX,
    "A test whose verdict, asserted message or timing changed from run A to run B "
    "(failed: it passed in A and fails in B).")

_NORMALIZE = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uid>"),
    (re.compile(r"\b(pvchaos-[a-z0-9-]*?)-[0-9a-f]{6}\b"), r"\1-<id>"),  # kube.naming.unique
    (re.compile(r"\bpvchaos-(s\d+-)?(gw\d+|main)-"), "pvchaos-<worker>-"),  # s2-: the shard (--shard 2/N)
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?"), "<time>"),
    (re.compile(r"\b\d+\.\d+s\b"), "<n>s"),
]


class CompareError(ValueError):
    """Bad input to `pvchaos compare`; the message is the one line the user sees."""


@dataclass(frozen=True)
class Run:
    """One report directory: its results by test and the environment it recorded."""

    label: str
    directory: Path  # as given: a report directory, or an allure-results directory
    results: Mapping[str, Mapping[str, Any]]
    environment: Mapping[str, str] = field(default_factory=dict)
    results_dir: Path | None = None  # where the *-result.json files are



@dataclass(frozen=True)
class Change:
    """How one test differs from run A to run B."""

    test: str
    verdict: tuple[str, str]
    messages: tuple[tuple[str, str, str], ...] = ()  # (what, wording in A, wording in B)
    timings: tuple[tuple[str, float, float], ...] = ()  # (measurement, A, B)

    @property
    def verdict_changed(self) -> bool:
        return self.verdict[0] != self.verdict[1]

    @property
    def regression(self) -> bool:
        return self.verdict[0] == "passed" and self.verdict[1] in FAILING

    def summary(self) -> str:
        parts = [f"verdict {self.verdict[0]} -> {self.verdict[1]}"] if self.verdict_changed else []
        parts += [f"{what} {a!r} -> {b!r}" for what, a, b in self.messages if what != FAILURE]
        parts += [f"{name} {a:g} -> {b:g}" for name, a, b in self.timings]
        return "; ".join(parts) or "failure message changed"


def load_run(directory: Path | str, label: str) -> Run:
    """A report directory as `pvchaos run --report-dir DIR` writes it (or its allure-results)."""
    root = Path(directory)
    if not root.is_dir():
        raise CompareError(f"REPORT_DIR_{label} {root}: " + ("not a directory" if root.exists() else "no such directory"))
    found = report.layout(root).results
    if not any(found.glob("*-result.json")) and any(root.glob("*-result.json")):
        found = root  # given the allure-results directory itself
    results = latest_by_test(report.load_results(found)) if found.is_dir() else {}
    if not results:
        raise CompareError(f"REPORT_DIR_{label} {root}: not a pvchaos report (expected allure-results/ with "
                           "*-result.json files, as `pvchaos run --report-dir DIR` writes)")
    return Run(label, root, results, report.read_environment(found), found)


def normalize(message: str) -> str:
    """The first line of a message, with what differs between two runs of the same thing taken out."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, replacement in _NORMALIZE:
        line = pattern.sub(replacement, line)
    return line


def messages_of(result: Mapping[str, Any]) -> dict[str, str]:
    """Asserted wordings by message key, and the failure message of a failed test."""
    out = {}
    for param in result.get("parameters") or []:
        name = str(param.get("name", ""))
        if name.startswith(ASSERTED_MESSAGE):  # generated names differ between any two runs: taken out
            out[name.strip()] = normalize(report.parameter_text(param.get("value")))
    failure = (result.get("statusDetails") or {}).get("message")
    if result.get("status") in FAILING and failure:
        out[FAILURE] = normalize(str(failure))
    return out


def timings_of(result: Mapping[str, Any]) -> dict[str, float]:
    """Each measurement the test recorded, and its duration."""
    out = dict(report.measurements(result))
    if result.get("start") and result.get("stop"):
        out[DURATION] = max(0, int(result["stop"]) - int(result["start"])) / 1000
    return out


def beyond_noise(name: str, a: float, b: float) -> bool:
    """A timing changed: by at least both thresholds of its kind (NOISE)."""
    absolute, relative = NOISE.get(name, NOISE["measurement"])
    delta = abs(b - a)
    return delta >= absolute and delta >= relative * min(a, b)


def change_of(test: str, a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> Change | None:
    """How one test changed from A to B (None when it did not); either side may be absent."""
    verdict = (str((a or {}).get("status", "absent")), str((b or {}).get("status", "absent")))
    msg_a, msg_b = messages_of(a or {}), messages_of(b or {})
    # an asserted wording counts when both runs asserted it, or both had the same verdict
    # (a test that failed early never reached its later assertions: not a wording change)
    messages = tuple((what, msg_a.get(what, "-"), msg_b.get(what, "-")) for what in sorted({*msg_a, *msg_b})
                     if msg_a.get(what) != msg_b.get(what)
                     and (what == FAILURE or (what in msg_a and what in msg_b) or verdict[0] == verdict[1]))
    timings: tuple[tuple[str, float, float], ...] = ()
    if verdict == ("passed", "passed"):
        t_a, t_b = timings_of(a or {}), timings_of(b or {})
        timings = tuple((name, t_a[name], t_b[name]) for name in sorted(t_a.keys() & t_b.keys())
                        if beyond_noise(name, t_a[name], t_b[name]))
    change = Change(test, verdict, messages, timings)
    return change if change.verdict_changed or messages or timings else None


def compare(a: Run, b: Run) -> list[Change]:
    """Every test that changed from run A to run B, in test order."""
    tests = sorted({*a.results, *b.results})
    return [c for t in tests if (c := change_of(t, a.results.get(t), b.results.get(t))) is not None]


def regressions(changes: list[Change]) -> list[Change]:
    return [c for c in changes if c.regression]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(changes: list[Change], a: Run, b: Run) -> str:
    """The comparison as Markdown: the two runs, then verdict, message and timing changes."""
    env_keys = ("kubernetes", "backend", "feature gates")
    lines = ["# Behaviour changes between two runs", "", "| | A | B |", "|---|---|---|",
             f"| report | `{a.directory}` | `{b.directory}` |",
             f"| tests | {len(a.results)} | {len(b.results)} |"]
    lines += [f"| {k} | {_cell(a.environment.get(k, '-'))} | {_cell(b.environment.get(k, '-'))} |"
              for k in env_keys if k in a.environment or k in b.environment]
    verdicts = [c for c in changes if c.verdict_changed]
    lines += ["", "## Verdict changes", ""]
    lines += ["| test | A | B | evidence in B |", "|---|---|---|---|"] if verdicts else ["none"]
    for c in verdicts:
        failure = next((m[2] for m in c.messages if m[0] == FAILURE), "")
        mark = " **regression**" if c.regression else ""
        lines.append(f"| {c.test} | {c.verdict[0]} | {c.verdict[1]}{mark} | {_cell(failure if failure != '-' else '')} |")
    worded = [(c.test, m) for c in changes for m in c.messages if not (m[0] == FAILURE and c.verdict_changed)]
    lines += ["", "## Message changes", ""]
    lines += ["| test | message | A | B |", "|---|---|---|---|"] if worded else ["none"]
    lines += [f"| {t} | {what} | {_cell(ma)} | {_cell(mb)} |" for t, (what, ma, mb) in worded]
    timed = [(c.test, t) for c in changes for t in c.timings]
    lines += ["", "## Timing changes", "",
              "Tests that passed in both runs; a change is at least " + ", and ".join(
                  f"{s:g} s and {r:.0%} of the smaller value for {'a measurement' if k != DURATION else 'a test duration'}"
                  for k, (s, r) in NOISE.items()) + ".", ""]
    lines += ["| test | measurement | A (s) | B (s) |", "|---|---|---:|---:|"] if timed else ["none"]
    lines += [f"| {t} | {name} | {va:g} | {vb:g} |" for t, (name, va, vb) in timed]
    bad = regressions(changes)
    lines += ["", f"{len({*a.results, *b.results})} tests compared: {len(verdicts)} verdict changes "
              f"({len(bad)} regressions{': ' + ', '.join(c.test for c in bad) if bad else ''}), "
              f"{len(worded)} message changes, {len(timed)} timing changes."]
    return "\n".join(lines) + "\n"


def prepare_output(out: Path, a: Run, b: Run) -> Path:
    """The output directory, created; refused when writing there would touch a compared run."""
    inputs = {p.resolve() for run in (a, b) for p in (run.directory, run.results_dir) if p is not None}
    if {out.resolve(), report.layout(out).results.resolve()} & inputs:
        raise CompareError(f"--report-dir {out}: is one of the compared reports; give another directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompareError(f"--report-dir {out}: cannot write there ({exc.strerror})") from None
    return out


def write_report(out: Path, changes: list[Change], a: Run, b: Run) -> Path:
    """OUT/compare.md, and OUT/allure-results with both runs (tagged run=A, run=B), one
    result per change (the category "Behaviour changes..." collects them) and one with
    the whole table. Returns the Markdown file."""
    results = report.layout(out).results
    if results.exists():
        for old in results.iterdir():
            if old.is_file():
                old.unlink()
    for run in (a, b):
        merge_into(results, run.label, run.results_dir or report.layout(run.directory).results, dimension="run")
    for c in changes:
        text = CHANGE_PREFIX + c.summary()
        report.write_synthetic_result(
            results, name=f"{c.test}: {c.summary()}", full_name=f"pvchaos.compare#{c.test}",
            identity=f"compare-runs:{c.test}", failure=text if c.regression else None, message=text,
            labels={"suite": "run comparison", "epic": "Behaviour changes"})
    table = render_markdown(changes, a, b)
    bad = regressions(changes)
    report.write_synthetic_result(
        results, name="no test that passed in A fails in B", full_name="pvchaos.compare#summary",
        identity="compare-runs:summary", failure="regressions: " + ", ".join(c.test for c in bad) if bad else None,
        labels={"suite": "run comparison", "epic": "Behaviour changes"}, attachment=("behaviour changes", table))
    md = out / "compare.md"
    md.write_text(table, encoding="utf-8")
    return md


def environment(a: Run, b: Run) -> dict[str, str]:
    """The compared report's environment page: which runs, on what."""
    env = {"compared": f"A = {a.directory}, B = {b.directory}"}
    for key in ("kubernetes", "backend"):
        env[key] = f"A: {a.environment.get(key, '-')}; B: {b.environment.get(key, '-')}"
    return {**env, **{k: v for k, v in b.environment.items() if k.startswith("gate ")}}

"""Turn a run's allure-pytest results into the HTML report, its history and a summary.

A report directory R holds `allure-results/` (written by allure-pytest), `html/` (the
generated single-file report: open `html/index.html` straight from disk), `junit.xml`,
`history/` (kept across runs so trends show) and `summary.md`. Categories tell a
product failure (Kubernetes behaved differently) from a harness error and from an
infrastructure error, because each of those sends the reader somewhere else; they are
built from the exception classes declared in `kube.errors`, so a wait that ran out
while the API server answered is a product failure, and only an unreachable API server
(or a cluster that could not start) is infrastructure.
See docs/reports.md.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvchaos.kube import errors, spent
from pvchaos.tools.allure_cli import ensure_allure

INFRA_ERRORS = tuple(c.__name__ for c in errors.INFRA_ERRORS)
PRODUCT_ERRORS = tuple(c.__name__ for c in errors.PRODUCT_ERRORS) + ("WaitTimeout",)
REPORT_NAME = "pvchaos"
GENERATE_TIMEOUT_S = 300


class ReportError(RuntimeError):
    """The HTML report could not be generated; the message says what the CLI said."""


@dataclass(frozen=True)
class ReportLayout:
    """Where each part of a report directory lives."""

    root: Path

    @property
    def results(self) -> Path:
        return self.root / "allure-results"

    @property
    def html(self) -> Path:
        return self.root / "html"

    @property
    def history(self) -> Path:
        return self.root / "history"

    @property
    def junit(self) -> Path:
        return self.root / "junit.xml"

    @property
    def summary(self) -> Path:
        return self.root / "summary.md"


def layout(report_dir: Path | str) -> ReportLayout:
    return ReportLayout(Path(report_dir))


# --- environment and categories -------------------------------------------------------

def _prop_escape(text: str, key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        out = re.sub(r"([=: #!])", r"\\\1", out)
    elif out.startswith(" "):
        out = "\\" + out
    return out


def write_environment(results_dir: Path | str, env: Mapping[str, str]) -> Path:
    """Write environment.properties, which the report shows on its overview page."""
    path = Path(results_dir) / "environment.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{_prop_escape(str(k), True)}={_prop_escape(str(v), False)}" for k, v in env.items()]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_environment(results_dir: Path | str) -> dict[str, str]:
    """environment.properties as `write_environment` wrote it ({} when there is none)."""
    path = Path(results_dir) / "environment.properties"
    if not path.is_file():
        return {}
    unescape = {"n": "\n", "r": "\r", "t": "\t"}
    env = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key: list[str] = []
        value: list[str] = []
        sep = False
        chars = iter(line)
        for c in chars:
            if c == "\\":
                nxt = next(chars, "")
                (value if sep else key).append(unescape.get(nxt, nxt))
            elif c == "=" and not sep:
                sep = True
            else:
                (value if sep else key).append(c)
        if sep:
            env["".join(key)] = "".join(value)
    return env


def _names(names: Iterable[str]) -> str:
    return r"\b(" + "|".join(names) + r")\b"


# Written to match the same results under Allure 3 (first matching rule wins, regex
# search) and Allure 2 (every rule that matches, whole-string match): each rule
# excludes what the rules before it took, and [\s\S] stands for "any character".
CANARY_ERROR = errors.CanaryFailed.__name__
_NOT_EARLIER = rf"^(?![\s\S]*{_names((*INFRA_ERRORS, CANARY_ERROR))})"
CATEGORIES: list[dict[str, Any]] = [
    {"name": "Infrastructure errors", "matchedStatuses": ["failed", "broken"],
     "messageRegex": rf"^[\s\S]*{_names(INFRA_ERRORS)}[\s\S]*$",
     "description": "The harness could not reach or start what it needed (" + ", ".join(INFRA_ERRORS)
                    + "): the verdict is unknown."},
    {"name": "Canary failures", "matchedStatuses": ["failed", "broken"],
     "messageRegex": rf"^(?![\s\S]*{_names(INFRA_ERRORS)})[\s\S]*\b{CANARY_ERROR}\b[\s\S]*$",
     "description": "A canary found a behaviour the test relies on broken on its cluster (the message names "
                    "the component), so the test failed at once instead of waiting out its timeouts."},
    {"name": "Product failures", "matchedStatuses": ["failed", "broken"],
     "messageRegex": rf"{_NOT_EARLIER}[\s\S]*{_names(PRODUCT_ERRORS)}[\s\S]*$",
     "description": "Kubernetes behaved differently from what the suite expects."},
    {"name": "Product failures", "matchedStatuses": ["broken"],
     "messageRegex": rf"{_NOT_EARLIER}[\s\S]*$",
     "traceRegex": rf"^[\s\S]*{_names(PRODUCT_ERRORS)}[\s\S]*$"},
    {"name": "Product failures", "matchedStatuses": ["failed"],
     "messageRegex": rf"{_NOT_EARLIER}[\s\S]*$"},
    {"name": "Harness errors", "matchedStatuses": ["broken"],
     "messageRegex": rf"^(?![\s\S]*{_names(INFRA_ERRORS + PRODUCT_ERRORS)})[\s\S]*$",
     "description": "The harness itself raised: a bug or a broken fixture, not a verdict."},
    {"name": "Skipped for capability", "matchedStatuses": ["skipped"],
     "messageRegex": r"^[\s\S]*\bno [\w-]+[\s\S]*$",
     "description": "The backend lacks a capability the suite needs (\"backend X: no Y\")."},
]


def write_categories(results_dir: Path | str, first: Iterable[Mapping[str, Any]] = ()) -> Path:
    """Write categories.json, which sorts failures into product, harness and infrastructure;
    `first` are rules of a report of its own (e.g. `pvchaos compare`'s), matched before those."""
    path = Path(results_dir) / "categories.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([*first, *CATEGORIES], indent=2) + "\n", encoding="utf-8")
    return path


def change_category(name: str, prefix: str, description: str) -> dict[str, Any]:
    """An Allure category collecting the results whose message starts with `prefix`,
    whatever their status (the comparisons write one result per change)."""
    return {"name": name, "matchedStatuses": ["failed", "broken", "passed", "skipped"],
            "messageRegex": rf"^{prefix}[\s\S]*$", "description": description}


def write_synthetic_result(target: Path, *, name: str, full_name: str, identity: str, failure: str | None,
                           labels: Mapping[str, str], attachment: tuple[str, str] | None = None,
                           message: str | None = None) -> Path:
    """A result the harness writes itself (a comparison, a summary) so the HTML report
    carries it: failed with `failure` as its message, else passed (with `message`, if
    any); `attachment` is (title, Markdown). `identity` keeps its history across runs."""
    ident = str(uuid.uuid4())
    now = int(time.time() * 1000)
    text = failure if failure is not None else message
    result: dict[str, Any] = {
        "uuid": ident, "name": name, "fullName": full_name,
        "historyId": hashlib.md5(identity.encode()).hexdigest(),  # noqa: S324 - an id, not a secret
        "status": "failed" if failure is not None else "passed", "stage": "finished", "start": now, "stop": now,
        "statusDetails": {"message": text} if text else {},
        "labels": [{"name": k, "value": v} for k, v in labels.items()], "attachments": [], "parameters": [],
    }
    if attachment:
        source = f"{ident}-attachment.md"
        (target / source).write_text(attachment[1], encoding="utf-8")
        result["attachments"] = [{"name": attachment[0], "source": source, "type": "text/markdown"}]
    path = target / f"{ident}-result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path


# --- history ------------------------------------------------------------------------------

def _copy_tree(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_file():
            shutil.copy2(item, dst / item.name)


def restore_history(report_dir: Path | str) -> Path:
    """Seed allure-results/history from R/history (or the last report's html/history).

    The CLI appends this run to the working copy; `save_history` keeps it only once the
    report was generated, so a failed generation leaves R/history as it was.
    """
    lay = layout(report_dir)
    work = lay.results / "history"
    work.mkdir(parents=True, exist_ok=True)
    for source in (lay.history, lay.html / "history"):
        if source.is_dir() and any(source.iterdir()):
            _copy_tree(source, work)
            break
    return work


def save_history(report_dir: Path | str) -> Path:
    """Keep this run's history in R/history and inside html/ so a published report has it."""
    lay = layout(report_dir)
    work = lay.results / "history"
    if work.is_dir():
        _copy_tree(work, lay.history)
        if lay.html.is_dir():
            _copy_tree(work, lay.html / "history")
    lay.history.mkdir(parents=True, exist_ok=True)
    return lay.history


# --- generation ---------------------------------------------------------------------------

def _config(name: str, history_file: Path, history_limit: int) -> dict[str, Any]:
    return {
        "name": name,
        "historyPath": str(history_file),
        "historyLimit": history_limit,
        "plugins": {"allure2": {"options": {"singleFile": True, "reportName": name}}},
    }


def generate_html(report_dir: Path | str, *, name: str = REPORT_NAME, history_limit: int = 30,
                  cli: Path | None = None) -> Path:
    """Render R/allure-results into R/html/index.html, one file that opens from disk.

    Call `restore_history` first and `save_history` after, or trends start over.
    """
    lay = layout(report_dir)
    if not lay.results.is_dir():
        raise ReportError(f"{lay.results}: no allure results (run pytest with --alluredir)")
    cli = cli or ensure_allure()
    staging = lay.root / ".html-staging"
    shutil.rmtree(staging, ignore_errors=True)  # Allure 3 nests output into a non-empty dir
    history_file = (lay.results / "history" / "history.jsonl").resolve()
    history_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pvchaos-allure-") as tmp:
        config = Path(tmp) / "allurerc.json"
        config.write_text(json.dumps(_config(name, history_file, history_limit)))
        cmd = [str(cli), "generate", str(lay.results.resolve()), "--config", str(config),
               "--output", str(staging.resolve())]
        # ALLURE_NO_ANALYTICS keeps the Google Analytics tag out of the report page.
        env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0", "ALLURE_NO_ANALYTICS": "true"}
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=GENERATE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ReportError(f"allure generate: no answer within {GENERATE_TIMEOUT_S}s") from None
    index = staging / "index.html"
    if proc.returncode != 0 or not index.is_file():
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise ReportError(f"allure generate failed (exit {proc.returncode}): {tail or 'no output'}")
    shutil.rmtree(lay.html, ignore_errors=True)
    staging.rename(lay.html)
    return lay.html / "index.html"


def read_report_json(html_dir: Path | str, name: str) -> Any:
    """One of the report's data files, e.g. "widgets/categories.json", decoded.

    The single-file report embeds each file base64-encoded; a directory report has it on disk.
    """
    html_dir = Path(html_dir)
    if (html_dir / name).is_file():
        return json.loads((html_dir / name).read_text(encoding="utf-8"))
    text = (html_dir / "index.html").read_text(encoding="utf-8")
    match = re.search(r'd\("' + re.escape(name) + r'","([A-Za-z0-9+/=]*)"\)', text)
    if not match:
        raise KeyError(f"{name}: not in the report at {html_dir}")
    return json.loads(base64.b64decode(match.group(1)))


def build_report(report_dir: Path | str, env: Mapping[str, str],
                 categories: Iterable[Mapping[str, Any]] = (), note: str | None = None) -> Path:
    """Everything after pytest: environment, categories, history, HTML, summary.md.
    `note` (an interrupted run says so) heads the summary."""
    lay = layout(report_dir)
    ran = what_ran(lay.results)
    write_environment(lay.results, {**env, **ran_environment(ran)})
    write_categories(lay.results, categories)
    restore_history(lay.root)
    index = generate_html(lay.root)
    save_history(lay.root)
    write_summary_md(lay.root, summarize(lay.results), note=note, ran=ran)
    return index


@dataclass(frozen=True)
class Ran:
    """What the control planes of a run ran with (pvchaos/plugin/what_ran.py files):
    each distinct configuration of each component, and every warning."""

    configurations: dict[str, list[str]]  # component -> distinct flag lines
    gates: dict[str, list[str]]  # component -> distinct gate lines
    warnings: list[str]
    storage: dict[str, list[str]] = field(default_factory=dict)  # "provisioner" -> distinct values
    timing: dict[str, list[str]] = field(default_factory=dict)  # component -> distinct timing lines
    plugins: list[str] = field(default_factory=list)  # distinct kube-scheduler profile lines


def _timing_line(timing: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(timing.items()))


def _profile_lines(seen: Mapping[str, Any]) -> list[str]:
    """One line per scheduler profile: what it disables, and the plugins that run."""
    profiles = seen.get("profiles")
    if not isinstance(profiles, Mapping):
        return [f"plugins unknown ({seen.get('config', 'no config read')})"] if profiles else []
    return [f"{name}: disabled {', '.join(p['disabled']) or 'none'}; runs {', '.join(p['enabled'])}"
            for name, p in sorted(profiles.items())]


def what_ran(results_dir: Path) -> Ran:
    """Read the per-cluster records; clusters with the same configuration count once."""
    configurations: dict[str, list[str]] = {}
    gates: dict[str, list[str]] = {}
    warnings: list[str] = []
    storage: dict[str, list[str]] = {}
    timing: dict[str, list[str]] = {}
    plugins: list[str] = []
    for path in sorted(Path(results_dir).glob("pvchaos-ran-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for component, seen in sorted((data.get("components") or {}).items()):
            line = " ".join(f"--{k}={v}" for k, v in sorted((seen.get("flags") or {}).items()))
            gate = ",".join(f"{k}={str(v).lower()}" for k, v in sorted((seen.get("gates") or {}).items())) or "none"
            configurations.setdefault(component, [])
            gates.setdefault(component, [])
            if line not in configurations[component]:
                configurations[component].append(line)
            if gate not in gates[component]:
                gates[component].append(gate)
            if seen.get("timing"):
                lines = timing.setdefault(component, [])
                if (t := _timing_line(seen["timing"])) not in lines:
                    lines.append(t)
            if seen.get("scheduler timing") and isinstance(seen["scheduler timing"], Mapping):
                lines = timing.setdefault(component, [])
                if (t := _timing_line(seen["scheduler timing"])) not in lines:
                    lines.append(t)
            plugins += [p for p in _profile_lines(seen) if p not in plugins]
        for w in data.get("warnings") or []:
            text = f"{data.get('cluster')}: {w}"
            if w not in {x.split(": ", 1)[-1] for x in warnings}:
                warnings.append(text)
        for key, value in sorted((data.get("storage") or {}).items()):
            if value not in storage.setdefault(key, []):
                storage[key].append(value)
    return Ran(configurations, gates, warnings, storage, timing, plugins)


def ran_environment(ran: Ran) -> dict[str, str]:
    """Environment entries: each component's effective flags and gates as they ran."""
    env = {}
    for component, lines in ran.configurations.items():
        env[f"{component} flags (as run)"] = " | ".join(lines)
        env[f"{component} feature gates (as run)"] = " | ".join(ran.gates.get(component, []))
    if ran.warnings:
        env["command-line warnings"] = " | ".join(ran.warnings)
    for component, lines in ran.timing.items():
        env[f"{component} timing (as run)"] = " | ".join(lines)
    if ran.plugins:
        env["kube-scheduler plugins (as run)"] = " | ".join(ran.plugins)
    for key, values in ran.storage.items():
        env[key] = " | ".join(values)
    return env


def mark_unfinished(results_dir: Path | str, reason: str) -> list[str]:
    """Give the tests a signal cut short their reason. allure-pytest records such a test as
    skipped with no details at all (no message, no trace), which no real skip is; returns
    the names of the results it marked."""
    marked = []
    for path in sorted(Path(results_dir).glob("*-result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if result.get("status") == "skipped" and not result.get("statusDetails"):
            result["statusDetails"] = {"message": reason}
            path.write_text(json.dumps(result), encoding="utf-8")
            marked.append(str(result.get("name")))
    return marked


def write_executor(results_dir: Path | str, build_name: str) -> Path:
    """executor.json: the report's Executors widget names the run (an interrupted run says so)."""
    path = Path(results_dir) / "executor.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": "pvchaos", "type": "pvchaos", "buildName": build_name}) + "\n",
                    encoding="utf-8")
    return path


# --- summary ------------------------------------------------------------------------------

@dataclass
class SuiteRow:
    """Counts for one suite and the timings its tests recorded as "... seconds" parameters."""

    suite: str
    passed: int = 0
    failed: int = 0
    broken: int = 0
    skipped: int = 0
    timings: dict[str, list[float]] = field(default_factory=dict)
    test_seconds: float = 0.0  # summed durations of the suite's tests (its wall time at -n 1)

    def times(self, word: str) -> list[float]:
        """Every timing whose parameter name contains `word` ("recovery", "race")."""
        return [v for k, vals in sorted(self.timings.items()) if word in k.lower() for v in vals]


def _label(result: Mapping[str, Any], name: str) -> str | None:
    for label in result.get("labels") or []:
        if label.get("name") == name and label.get("value"):
            return str(label["value"])
    return None


def _suite_of(result: Mapping[str, Any]) -> str:
    full = str(result.get("fullName") or result.get("name") or "unknown")
    return _label(result, "suite") or _label(result, "parentSuite") or full.split("#", 1)[0]


def parameter_text(raw: Any) -> str:
    """allure-pytest stores parameter values as repr() text, so "'12.5'" means 12.5."""
    text = str(raw).strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text
    return str(value).strip()


def _number(raw: Any) -> float | None:
    try:
        return float(parameter_text(raw))
    except ValueError:
        return None


def measurements(result: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The timings a test recorded (numeric parameters named "... seconds", pvchaos.kit.measure)."""
    out = []
    for param in result.get("parameters") or []:
        pname = str(param.get("name", "")).strip()
        value = _number(param.get("value"))
        if pname.lower().endswith("seconds") and value is not None:
            out.append((pname, value))
    return out


def _latest(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last attempt of each test (by historyId), so reruns are not counted twice."""
    by_id: dict[str, dict[str, Any]] = {}
    for res in results:
        key = str(res.get("historyId") or res.get("uuid") or id(res))
        if key not in by_id or res.get("stop", 0) >= by_id[key].get("stop", 0):
            by_id[key] = res
    return list(by_id.values())


def load_results(results_dir: Path | str) -> list[dict[str, Any]]:
    """Every readable allure `*-result.json` of a results directory (unreadable ones are
    skipped: allure-pytest may still be writing when a run is interrupted)."""
    loaded = []
    for path in sorted(Path(results_dir).glob("*-result.json")):
        try:
            loaded.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return loaded


def summarize(results_dir: Path | str) -> list[SuiteRow]:
    """Per-suite counts and timings, read from allure's *-result.json files."""
    loaded = load_results(results_dir)
    rows: dict[str, SuiteRow] = {}
    for res in _latest(loaded):
        row = rows.setdefault(_suite_of(res), SuiteRow(_suite_of(res)))
        status = res.get("status")
        if status in ("passed", "failed", "broken", "skipped"):
            setattr(row, status, getattr(row, status) + 1)
        if res.get("start") and res.get("stop"):
            row.test_seconds += max(0, int(res["stop"]) - int(res["start"])) / 1000
        for pname, value in measurements(res):
            row.timings.setdefault(pname, []).append(value)
    return [rows[k] for k in sorted(rows)]


def _values(vals: list[float]) -> str:
    if not vals:
        return "-"
    if len(vals) <= 3:
        return ", ".join(f"{v:g}" for v in vals)
    return f"median {statistics.median(vals):g}, max {max(vals):g} (n={len(vals)})"


_HEADER = ("suite", "passed", "failed", "broken", "skipped", "test time (s)", "recovery (s)", "race window (s)")


def _cells(rows: list[SuiteRow]) -> list[tuple[str, ...]]:
    out = [(r.suite, str(r.passed), str(r.failed), str(r.broken), str(r.skipped), f"{r.test_seconds:.1f}",
            _values(r.times("recovery")), _values(r.times("race"))) for r in rows]
    total = ("total",) + tuple(str(sum(getattr(r, s) for r in rows))
                               for s in ("passed", "failed", "broken", "skipped")) + (
        f"{sum(r.test_seconds for r in rows):.1f}", "", "")
    return out + [total]


def format_summary(rows: list[SuiteRow]) -> str:
    """A plain-text table for the terminal: counts, recovery times and race windows."""
    table = [_HEADER, *_cells(rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(_HEADER))]
    numeric = {1, 2, 3, 4, 5}

    def fmt(line: tuple[str, ...]) -> str:
        parts = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(table[0]), rule, *(fmt(line) for line in table[1:-1]), rule, fmt(table[-1])])


def _other_measurements(rows: list[SuiteRow]) -> list[str]:
    """The timings the table has no column for (a stress test's, a storm's), per suite."""
    found = [(r.suite, name, vals) for r in rows for name, vals in sorted(r.timings.items())
             if not any(word in name.lower() for word in ("recovery", "race"))]
    if not found:
        return []
    return ["", "## Measurements", "", "| suite | measurement | seconds |", "|---|---|---:|",
            *(f"| {suite} | {name.removesuffix(' seconds').replace('|', '/')} | {_values(vals)} |"
              for suite, name, vals in found)]


# --- where the time went (kube.spent, carried on each test's report; issue 38) ---------------

SPENT = "pvchaos spent: "  # user_properties key prefix + a kube.spent category: seconds
GROUP = "pvchaos group"  # user_properties key: the suite (or file) a test's time is tabled under
TIME_COLUMNS = (*spent.CATEGORIES, spent.BODIES)


@dataclass
class TimeRow:
    """One suite's (or file's) test time, summed over its tests and split by where it went."""

    group: str
    tests: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIME_COLUMNS, 0.0))

    def add(self, total: float, charged: Mapping[str, float]) -> None:
        self.tests += 1
        for column, value in spent.split(total, charged).items():
            self.seconds[column] += value


def time_rows(tests: Iterable[tuple[str, float, Mapping[str, float]]]) -> list[TimeRow]:
    """(group, test seconds, charged seconds per category) per test -> one row per group."""
    rows: dict[str, TimeRow] = {}
    for group, total, charged in tests:
        rows.setdefault(group, TimeRow(group)).add(total, charged)
    return [rows[k] for k in sorted(rows)]


def time_from_junit(junit: Path | str) -> tuple[list[TimeRow], float | None]:
    """The rows of the tests that carry a group in a JUnit report, and the session's wall
    time; ([], None) when there is no readable report."""
    try:
        tree = ET.parse(junit)
    except (OSError, ET.ParseError):
        return [], None
    suites = list(tree.iter("testsuite"))
    wall = float(suites[0].get("time") or 0) if suites else None
    tests = []
    for case in tree.iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        if GROUP not in props:
            continue
        charged = {k.removeprefix(SPENT): float(v) for k, v in props.items() if k.startswith(SPENT)}
        tests.append((props[GROUP], float(case.get("time") or 0), charged))
    return time_rows(tests), wall


def _time_cells(rows: list[TimeRow]) -> list[tuple[str, ...]]:
    total = TimeRow("total", sum(r.tests for r in rows),
                    {c: sum(r.seconds[c] for r in rows) for c in TIME_COLUMNS})
    return [(r.group, str(r.tests), f"{sum(r.seconds.values()):.1f}", *(f"{r.seconds[c]:.1f}" for c in TIME_COLUMNS))
            for r in [*rows, total]]


_TIME_HEADER = ("suite", "tests", "test time (s)", *(f"{c} (s)" for c in TIME_COLUMNS))


def format_time_spent(rows: list[TimeRow], wall: float | None = None) -> str:
    """Where the tests' time went, per suite: a plain-text table for the terminal."""
    table = [_TIME_HEADER, *_time_cells(rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(_TIME_HEADER))]

    def fmt(line: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))

    rule = "  ".join("-" * w for w in widths)
    head = "where the tests' time went (summed over tests; parallel workers overlap)"
    if wall is not None:
        head += f"; session wall time {wall:.1f}s"
    return "\n".join([head, fmt(table[0]), rule, *(fmt(line) for line in table[1:-1]), rule, fmt(table[-1])])


def time_spent_md(rows: list[TimeRow], wall: float | None = None) -> list[str]:
    """The same table in Markdown lines, for summary.md (none without rows)."""
    if not rows:
        return []
    lines = ["", "## Where the time went", "",
             "Summed over each suite's tests (parallel workers overlap)"
             + (f"; session wall time {wall:.1f} s." if wall is not None else "."), "",
             "| " + " | ".join(_TIME_HEADER) + " |", "|---|" + "---:|" * (len(_TIME_HEADER) - 1)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in _time_cells(rows)]


def write_summary_md(report_dir: Path | str, rows: list[SuiteRow], note: str | None = None,
                     ran: Ran | None = None) -> Path:
    """R/summary.md: the same table in Markdown (fits a CI job summary), plus categories."""
    lay = layout(report_dir)
    lines = ["# pvchaos run summary", ""]
    if note:
        lines += [f"**{note.split(' ', 1)[0].capitalize()}** {note.split(' ', 1)[1]}", ""]
    lines += ["| " + " | ".join(_HEADER) + " |",
             "|" + "|".join(["---"] + ["---:"] * 5 + ["---", "---"]) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in _cells(rows)]
    lines += _other_measurements(rows)
    try:
        cats = read_report_json(lay.html, "widgets/categories.json").get("items", [])
    except (OSError, KeyError, ValueError):
        cats = []
    if cats:
        lines += ["", "Categories: " + ", ".join(f"{c['name']} {c['statistic']['total']}" for c in cats)]
    lines += time_spent_md(*time_from_junit(lay.junit))
    if ran is not None and ran.configurations:
        lines += ["", "## What ran", ""]
        lines += [f"**Warning:** {w}" for w in ran.warnings] + ([""] if ran.warnings else [])
        for component, flag_lines in ran.configurations.items():
            lines += [f"- `{component}` (effective flags; the last of a repeated flag wins): "
                      + "; ".join(f"`{fl}`" for fl in flag_lines),
                      "  - feature gates: " + "; ".join(f"`{g}`" for g in ran.gates.get(component, []))]
            if ran.timing.get(component):
                lines += ["  - timing: " + "; ".join(f"`{t}`" for t in ran.timing[component])]
            if component == "kube-scheduler" and ran.plugins:
                lines += ["  - plugins: " + "; ".join(f"`{p}`" for p in ran.plugins)]
    if ran is not None and ran.storage:
        lines += ["", "## Storage", ""]
        lines += [f"- {key}: " + "; ".join(f"`{v}`" for v in values) for key, values in ran.storage.items()]
    lines += ["", "Report: `html/index.html` (opens from disk); JUnit: `junit.xml`."]
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.summary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lay.summary

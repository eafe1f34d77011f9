"""`pvchaos report merge OUT DIR...`: one report from the report directories of shards,
backends and Kubernetes versions that CI jobs wrote on different machines.

Why a command of its own: a nightly matrix runs as many jobs (`run --shard K/N
--backend B --k8s-version V`), and people read one report, with one trend. The merge
gives what one `run` would have written: the Allure report with every result (tagged by
backend and version when there are several, as `run --backend local,kind` and `run
--k8s-version A,B` tag them), JUnit, summary.md, the backend and version tables, and the
history carried forward from the previous report (`--history PREV`).

What may be merged is decided by `plan`, a pure function of the directories' run.json
(pvchaos/run_record.py): one pvchaos version and commit, one test selection (its
fingerprint); within a backend and version either one whole run or shards of one N,
each once, that ran disjoint parts. Anything else is refused in one line (exit 2)
before anything is written. A shard that is missing, or a test that no shard ran, does
not stop the merge (the other results are worth reading) but is said in the summary and
makes the exit code 1, as does any failed test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pvchaos import compare_backends as cmp
from pvchaos import compare_runs, report, run_record, version_matrix
from pvchaos.clusters import arguments
from pvchaos.results import tag_with
from pvchaos.run_record import RunRecord
from pvchaos.tools import versions


class MergeError(ValueError):
    """Report directories that cannot be merged; the message is the one line the user sees."""


@dataclass(frozen=True)
class Source:
    """One input report directory and its record."""

    directory: Path
    record: RunRecord


@dataclass(frozen=True)
class Group:
    """The runs of one backend and Kubernetes version: one whole run, or its shards."""

    backend: str
    kubernetes: str
    sources: tuple[Source, ...]
    missing_shards: tuple[str, ...] = ()
    unrun: tuple[str, ...] = ()  # selected tests no shard ran (all shards present)

    @property
    def label(self) -> str:
        return f"{self.backend} {self.kubernetes}".strip()


@dataclass(frozen=True)
class Plan:
    groups: tuple[Group, ...]
    backends: tuple[str, ...]
    versions: tuple[str, ...]
    problems: tuple[str, ...]  # said in the summary; exit code 1


def _one(values: set[str | None], what: str, sources: Sequence[Source], attr: str) -> None:
    if len(values) > 1:
        seen: dict[object, Path] = {}
        for s in sources:
            seen.setdefault(getattr(s.record, attr), s.directory)
        shown = ", ".join(f"{str(v)[:12]} ({d})" for v, d in list(seen.items())[:3])
        raise MergeError(f"cannot merge: the directories come from different {what}: {shown}")


def _group(backend: str, kubernetes: str, members: list[Source]) -> Group:
    """Check one backend-and-version's runs (pure); MergeError when they cannot be one run."""
    label = f"{backend} {kubernetes}".strip()
    shards = [s for s in members if s.record.shard]
    if len(members) > 1 and len(shards) != len(members):
        raise MergeError(f"cannot merge: {label} has a whole run and other runs of it ("
                         + ", ".join(str(s.directory) for s in members) + ")")
    if not shards:
        return Group(backend, kubernetes, tuple(members))
    parsed = [tuple(int(x) for x in str(s.record.shard).split("/")) for s in shards]
    totals = {n for _, n in parsed}
    if len(totals) > 1:
        raise MergeError(f"cannot merge: {label} has shards of different N ({', '.join(str(s.record.shard) for s in shards)})")
    total = totals.pop()
    indexes = [k for k, _ in parsed]
    twice = sorted({k for k in indexes if indexes.count(k) > 1})
    if twice:
        raise MergeError(f"cannot merge: {label} has shard {twice[0]}/{total} twice ("
                         + ", ".join(str(s.directory) for s, (k, _) in zip(shards, parsed, strict=True) if k == twice[0]) + ")")
    ran: dict[str, Path] = {}
    for s in shards:
        for test in s.record.tests:
            if test in ran:
                raise MergeError(f"cannot merge: {test} ran in two shards of {label} ({ran[test]} and {s.directory}); "
                                 "give every shard the same history, so that they split alike")
            ran[test] = s.directory
    missing = tuple(f"{k}/{total}" for k in range(1, total + 1) if k not in indexes)
    unrun = () if missing else tuple(t for t in shards[0].record.selected if t not in ran)
    ordered = tuple(s for _, s in sorted(zip(indexes, shards, strict=True), key=lambda p: p[0]))
    return Group(backend, kubernetes, ordered, missing, unrun)


def plan(sources: Sequence[Source]) -> Plan:
    """What to merge, or MergeError (pure: it reads only the records)."""
    if not sources:
        raise MergeError("nothing to merge: give one or more report directories")
    for s in sources:
        if not s.record.fingerprint:
            raise MergeError(f"cannot merge {s.directory}: it recorded no test selection (the run stopped before "
                             "its tests were collected)")
    _one({s.record.pvchaos for s in sources}, "versions of pvchaos", sources, "pvchaos")
    _one({s.record.commit for s in sources if s.record.commit}, "commits of pvchaos", sources, "commit")
    _one({s.record.fingerprint for s in sources}, "test selections (fingerprints differ: other suites, -k or "
         "options)", sources, "fingerprint")
    by_group: dict[tuple[str, str], list[Source]] = {}
    for s in sources:
        by_group.setdefault(s.record.group, []).append(s)
    groups = tuple(_group(b, v, members) for (b, v), members in sorted(by_group.items()))
    problems: list[str] = []
    for g in groups:
        if g.missing_shards:
            problems.append(f"{g.label}: shard(s) {', '.join(g.missing_shards)} missing")
        if g.unrun:
            problems.append(f"{g.label}: {len(g.unrun)} selected test(s) ran in no shard ({g.unrun[0]}"
                            + (", ..." if len(g.unrun) > 1 else "") + ")")
        problems += [f"{g.label}: {s.directory} was interrupted" for s in g.sources if s.record.interrupted]
    return Plan(groups, tuple(sorted({g.backend for g in groups})), tuple(sorted({g.kubernetes for g in groups})),
                tuple(problems))


# --- JUnit -------------------------------------------------------------------------------

def merge_junit(parts: Sequence[tuple[str, ET.Element]]) -> ET.Element:
    """One <testsuites> with a <testsuite> per label (a backend and version), holding every
    shard's test cases, with the counts recomputed (pure)."""
    merged = ET.Element("testsuites", {"name": "pvchaos"})
    suites: dict[str, ET.Element] = {}
    for label, root in parts:
        suite = suites.get(label)
        if suite is None:
            suite = suites[label] = ET.SubElement(merged, "testsuite", {"name": f"pvchaos {label}".strip()})
        for case in root.iter("testcase"):
            suite.append(case)
    for suite in suites.values():
        cases = list(suite.iter("testcase"))
        suite.set("tests", str(len(cases)))
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            suite.set(attr, str(sum(1 for c in cases if c.find(tag) is not None)))
        suite.set("time", f"{sum(float(c.get('time') or 0) for c in cases):.3f}")
    return merged


# --- side effects: reading, copying, writing ------------------------------------------------

def load(directories: Sequence[Path]) -> list[Source]:
    sources = []
    for d in directories:
        if not d.is_dir():
            raise MergeError(f"{d}: no such directory")
        try:
            sources.append(Source(d, run_record.read(d)))
        except ValueError as exc:
            raise MergeError(str(exc)) from None
    return sources


def _copy_results(source: Path, target: Path, tags: Sequence[tuple[str, str]]) -> None:
    """One run's allure results into `target`, each result tagged (backend, kubernetes)."""
    target.mkdir(parents=True, exist_ok=True)
    prefix = "-".join("".join(c if c.isalnum() else "-" for c in v) for _, v in tags)
    for path in source.iterdir():
        if path.name.endswith("-result.json"):
            data = json.loads(path.read_text(encoding="utf-8"))
            for dimension, value in tags:
                data = tag_with(data, dimension, value)
            (target / (f"{prefix}-{path.name}" if prefix else path.name)).write_text(json.dumps(data), encoding="utf-8")
        elif path.is_file() and not path.name.endswith(("environment.properties", "categories.json", "executor.json")):
            shutil.copyfile(path, target / path.name)


def _restore_history(out: Path, previous: Path | None) -> None:
    """PREV's history (a report directory, its history/ or html/history, or history.jsonl) into OUT/history."""
    if previous is None:
        return
    candidates = [previous / "history" / "history.jsonl", previous / "html" / "history" / "history.jsonl",
                  previous / "history.jsonl", previous]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        print(f"[pvchaos] merge: no history in {previous}; the trend starts with this report", file=sys.stderr)
        return
    target = report.layout(out).history
    target.mkdir(parents=True, exist_ok=True)
    if found.resolve() != (target / "history.jsonl").resolve():
        shutil.copyfile(found, target / "history.jsonl")


def _tables(out: Path, the_plan: Plan) -> tuple[list[str], int, list[dict]]:
    """backends.md and versions.md, as `run` writes them, from the per-group parts; returns
    the lines printed, the number of unexplained differences and extra categories."""
    parts = report.layout(out).root / "parts"
    results = report.layout(out).results
    lines: list[str] = []
    bad = 0
    categories: list[dict] = []
    if len(the_plan.backends) > 1:
        sections = []
        for version in the_plan.versions:
            by_backend = {g.backend: cmp.verdicts(report.load_results(parts / _slug(g) / "allure-results"))
                          for g in the_plan.groups if g.kubernetes == version}
            rows = cmp.compare(by_backend)
            names = sorted(by_backend)
            table = cmp.render_markdown(rows, names)
            sections.append(table.replace("# Verdicts by backend", f"# Verdicts by backend ({version})")
                            if len(the_plan.versions) > 1 else table)
            cmp.write_comparison_result(results, rows, names)
            bad += len(cmp.unexplained(rows))
            lines.append(f"{version}: {table.splitlines()[-1]}")
        (out / "backends.md").write_text("\n".join(sections), encoding="utf-8")
        lines.append(f"verdicts by backend: {out / 'backends.md'}")
    if len(the_plan.versions) > 1:
        sections = []
        for backend in the_plan.backends:
            runs = [compare_runs.load_run(parts / _slug(g), g.kubernetes)
                    for g in sorted((g for g in the_plan.groups if g.backend == backend),
                                    key=lambda g: versions.order_key(g.kubernetes))]
            steps = version_matrix.steps(runs)
            table = version_matrix.render_markdown(runs, steps)
            sections.append(table.replace("# Suites by Kubernetes version", f"# Suites by Kubernetes version ({backend})")
                            if len(the_plan.backends) > 1 else table)
            version_matrix.write_results(results, steps, table)
            bad += len(version_matrix.unexplained_behaviour(steps))
        (out / "versions.md").write_text("\n".join(sections), encoding="utf-8")
        categories.append(version_matrix.CATEGORY)
        lines.append(f"test x version table and behaviour changes: {out / 'versions.md'}")
    return lines, bad, categories


def _slug(group: Group) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in f"{group.backend}-{group.kubernetes}")


def _environment(the_plan: Plan) -> dict[str, str]:
    first = the_plan.groups[0].sources[0]
    env = report.read_environment(report.layout(first.directory).results)
    env.pop("interrupted", None)
    shards = {g.label: str(len(g.sources)) for g in the_plan.groups}
    return {**env, "backend": " and ".join(the_plan.backends), "kubernetes": ", ".join(the_plan.versions),
            "merged from": f"{sum(len(g.sources) for g in the_plan.groups)} report directories ("
                           + ", ".join(f"{k}: {v} part(s)" for k, v in shards.items()) + ")"}


def merge(out: Path, directories: Sequence[Path], history: Path | None = None, html: bool = True) -> int:
    """The merge; returns the exit code (0: every test passed and nothing is missing)."""
    sources = load(directories)
    the_plan = plan(sources)
    inputs = {d.resolve() for d in directories}
    if out.resolve() in inputs or any(out.resolve() in d.parents for d in inputs):
        raise MergeError(f"{out}: is (inside) one of the merged directories; give another OUT")
    lay = report.layout(out)
    for stale in (lay.results, out / "parts"):
        shutil.rmtree(stale, ignore_errors=True)
    for table in ("backends.md", "versions.md"):  # a previous merge's, of other dimensions
        (out / table).unlink(missing_ok=True)
    lay.results.mkdir(parents=True)
    many = [d for d, values in (("backend", the_plan.backends), ("kubernetes", the_plan.versions)) if len(values) > 1]
    junit: list[tuple[str, ET.Element]] = []
    for g in the_plan.groups:
        tags = [(d, g.backend if d == "backend" else g.kubernetes) for d in many]
        for s in g.sources:
            src = report.layout(s.directory).results
            _copy_results(src, lay.results, tags)
            _copy_results(src, out / "parts" / _slug(g) / "allure-results", ())
            try:
                junit.append((g.label if many else "", ET.parse(report.layout(s.directory).junit).getroot()))
            except (OSError, ET.ParseError):
                pass  # a run that died before pytest wrote it: its results still count
    ET.ElementTree(merge_junit(junit)).write(lay.junit, encoding="utf-8", xml_declaration=True)
    lines, unexplained, categories = _tables(out, the_plan)
    _restore_history(out, history)
    note = ("incomplete: " + "; ".join(the_plan.problems)) if the_plan.problems else None
    env = _environment(the_plan)
    if note:
        env["incomplete"] = note
    if html:
        index = report.build_report(out, env, categories=categories, note=note)
        lines.append(f"Allure report (merged): {index}")
    else:
        report.write_environment(lay.results, env)
        report.write_categories(lay.results, categories)
        report.write_summary_md(out, report.summarize(lay.results), note=note)
    rows = report.summarize(lay.results)
    print(report.format_summary(rows))
    for line in [*lines, f"JUnit XML: {lay.junit}", f"summary: {lay.summary}"]:
        print(line)
    for problem in the_plan.problems:
        print(f"pvchaos: report merge: {problem}", file=sys.stderr)
    failed = sum(r.failed + r.broken for r in rows)
    return 1 if failed or the_plan.problems or unexplained else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=arguments.as_path(arguments.writable_dir), metavar="OUT", help="the merged report directory")
    p.add_argument("dirs", type=arguments.as_path(arguments.existing_dir), nargs="+", metavar="DIR",
                   help="report directories of `pvchaos run --report-dir` (shards, backends, versions)")
    p.add_argument("--history", type=arguments.as_path(arguments.existing_dir), default=None, metavar="PREV",
                   help="the previous merged report (or its history/), whose trend this report continues")
    p.add_argument("--no-html", action="store_true", help="no HTML report: results, JUnit, summary and tables only")


def run(args: argparse.Namespace) -> int:
    return merge(args.out, args.dirs, args.history, html=not args.no_html)

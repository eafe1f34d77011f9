"""Full-suite wall time at one and at two pytest-xdist workers, and whether the verdicts match.

Parallelism only pays if it is both faster and invisible: every test must get the same
verdict at -n 1 and at -n 2 (docs/isolation.md). This runs the suites exactly as
`pvchaos run` does (`pvchaos.runner.pytest_argv`, `--dist loadgroup`), first at -n 1,
then at -n 2, one after the other, each with its own temporary report directory and
PVCHAOS_STATE_DIR, so no other cluster on the machine is touched or swept. Binaries are
ensured first, untimed. Verdicts come from each run's JUnit XML.

    .venv/bin/python -m bench.parallel [--suites a,b] [-k EXPR] [--workers 1,2]

`--workers 0,1,2` adds a run without xdist (one process) to the comparison; the
speed-up is always the first run's wall time over the last one's.

Exits 1 when the verdicts differ (or a run produced no JUnit XML); the speed-up target
is reported, not enforced, since it depends on the machine's cores.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pvchaos.runner import REPO_ROOT, RunRequest, UsageError, pytest_argv, validate
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

TARGET_SPEEDUP = 1.6
DEFAULT_WORKERS = "1,2"
FAILURE_LINES = 12  # of each failure's text, printed under its run
RANK = {"passed": 0, "skipped": 1, "failed": 2}  # a test reported twice keeps its worst verdict
# What a run imports: if any of it changes between the runs (others editing the checkout),
# differing verdicts may come from the edit, not from parallelism; the bench says so.
CODE = ("conftest.py", "pyproject.toml", "pvchaos", "suites")


def code_fingerprint() -> dict[str, str]:
    """Relative path -> sha256 of every Python/YAML/TOML file a run imports or reads."""
    prints: dict[str, str] = {}
    for top in CODE:
        path = REPO_ROOT / top
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.suffix in (".py", ".yaml", ".toml")]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                prints[str(f.relative_to(REPO_ROOT))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return prints


@dataclass(frozen=True)
class RunResult:
    workers: int
    seconds: float
    exit_code: int
    verdicts: dict[str, str]  # test id -> passed | failed | skipped
    problems: list[str]  # the "FAILED ..." / "ERROR ..." lines of pytest's short summary
    checkout: dict[str, str]  # code_fingerprint() when the run started

    def counts(self) -> Counter[str]:
        return Counter(self.verdicts.values())


def verdicts_from_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """test id (`classname::name`) -> passed/failed/skipped (errors count as failed), and
    test id -> the start of the failure text, so a differing verdict can be told apart."""
    verdicts: dict[str, str] = {}
    why: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        tags = {child.tag for child in case}
        verdict = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        if RANK[verdict] >= RANK.get(verdicts.get(test_id, "passed"), 0):
            verdicts[test_id] = verdict
        for child in case:
            if child.tag in ("failure", "error"):
                # the message is the exception's text; without one, pytest's "E   " lines
                text = child.get("message") or "\n".join(
                    ln[1:].strip() for ln in (child.text or "").splitlines() if ln.startswith("E "))
                head = "\n".join(text.strip().splitlines()[:FAILURE_LINES]) or f"({child.tag}, no message)"
                why[test_id] = f"{why[test_id]}\n{head}" if test_id in why else head
    return verdicts, why


def one_run(workers: int, suites: tuple[str, ...], keyword: str | None, scratch: Path) -> RunResult:
    report_dir = scratch / f"reports-n{workers}"
    state_dir = scratch / f"state-n{workers}"
    state_dir.mkdir(parents=True)
    req = RunRequest(suites=suites, keyword=keyword, workers=str(workers), report_dir=report_dir)
    validate(req)
    env = dict(os.environ, PVCHAOS_STATE_DIR=str(state_dir))  # our clusters only, never anyone else's
    log = report_dir / "pytest.log"
    load = os.getloadavg()[0]  # other work on the machine skews wall times; say how much there was
    code_at_start = code_fingerprint()
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(pytest_argv(req), cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - started
    junit = report_dir / "junit.xml"
    verdicts, why = verdicts_from_junit(junit) if junit.is_file() else ({}, {})
    problems = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith(("FAILED ", "ERROR "))]
    result = RunResult(workers, seconds, code, verdicts, problems, code_at_start)
    c = result.counts()
    print(f"-n {workers}: {seconds:.1f} s, exit code {code}; {len(verdicts)} tests: {c['passed']} passed, "
          f"{c['failed']} failed, {c['skipped']} skipped; load average at start {load:.1f}"
          + ("" if junit.is_file() else " (no JUnit XML written)"),
          flush=True)
    for line in problems:
        print(f"  {line}", flush=True)
    for test_id, text in sorted(why.items()):
        print(f"  why {test_id}:\n" + "\n".join(f"    | {ln}" for ln in text.splitlines()), flush=True)
    if not junit.is_file():
        print("  last lines of pytest's output:\n" + "\n".join(
            f"    {ln}" for ln in log.read_text(errors="replace").splitlines()[-15:]), flush=True)
    return result


def compare(runs: list[RunResult]) -> bool:
    """Print the verdict of every test in every run; True when all runs agree on all tests."""
    ids = sorted(set().union(*(r.verdicts for r in runs)))
    width = max((len(i) for i in ids), default=10)
    print(f"\n{'test':<{width}}  " + "  ".join(f"-n {r.workers:<5}" for r in runs))
    same = True
    for test_id in ids:
        row = [r.verdicts.get(test_id, "missing") for r in runs]
        differs = len(set(row)) > 1
        same &= not differs
        print(f"{test_id:<{width}}  " + "  ".join(f"{v:<8}" for v in row) + ("  <- differs" if differs else ""))
    return same and bool(ids)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.parallel", description=__doc__.split("\n\n")[0])
    p.add_argument("--suites", default="", help="comma-separated suite names (default: all)")
    p.add_argument("-k", dest="keyword", default=None, help="pytest's -k")
    p.add_argument("--workers", default=DEFAULT_WORKERS,
                   help=f"worker counts to compare, run in this order (default {DEFAULT_WORKERS}; 0 = no xdist)")
    args = p.parse_args(argv)
    suites = tuple(s.strip() for s in args.suites.split(",") if s.strip())
    try:
        counts = [int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        p.error(f"--workers {args.workers!r}: want comma-separated numbers, e.g. 1,2")
    if len(counts) < 2 or min(counts) < 0 or len(set(counts)) < len(counts):
        p.error("--workers: name at least two different worker counts, none negative")
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-parallel-") as scratch:
        try:  # bad input costs one line, before any cluster starts
            validate(RunRequest(suites=suites, workers=str(max(counts)), report_dir=Path(scratch) / "probe"))
        except UsageError as exc:
            p.error(str(exc))
        ensure_binaries(DEFAULT_K8S_VERSION)  # untimed: building is not what this measures
        runs = [one_run(n, suites, args.keyword, Path(scratch)) for n in counts]
    same = compare(runs)
    changed = sorted(k for k in set().union(*(r.checkout for r in runs)) if len({r.checkout.get(k) for r in runs}) > 1)
    if changed:
        print(f"warning: the checkout changed between runs ({len(changed)} files: {', '.join(changed[:8])}"
              f"{' ...' if len(changed) > 8 else ''}); differing verdicts may come from those edits")
    speedup = runs[0].seconds / runs[-1].seconds if runs[-1].seconds > 0 else 0.0
    walls = ", ".join(f"-n {r.workers} {r.seconds:.0f} s" for r in runs)
    print(f"parallel: {walls}, speed-up {speedup:.2f}x (target >= {TARGET_SPEEDUP}x); "
          f"verdicts identical: {'yes' if same else 'no'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""The default run's time budget (issue 38): every suite `pvchaos run` selects, on the local
backend at one worker per core, within 120 s of suite wall time; on kind (`--backend
kind`, one worker) within 8 minutes.

Each run is a fresh pytest session with the command line `pvchaos run` builds
(runner.pytest_argv: the same selection, workers and `--dist loadgroup`), clusters started
inside it; binaries (and kind's node image) are prepared first, untimed. The wall time is
the session's, read from its JUnit report, next to where the tests' time went (summed over
tests: cluster starts, Kubernetes timers, harness waits, test bodies; pvchaos.kube.spent),
so a change shows what it bought. Prints every run and the medians, and the machine's load
average (a busy machine moves the figures); exits 1 over budget.

    .venv/bin/python -m bench.default_run [--runs 3] [--backend local|kind] [--workers N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from pvchaos import report
from pvchaos.clusters import providers
from pvchaos.clusters.options import REPO_ROOT, Options
from pvchaos.runner import pytest_argv

BUDGET_S = {"local": 120.0, "kind": 480.0}
COLUMNS = report.TIME_COLUMNS


KEPT = REPO_ROOT / "reports" / "bench-failed"  # a failed run's reports, kept to read its flake


def failed_tests(junit_text: str) -> list[str]:
    """The node ids of the JUnit report's failed or errored test cases, each with its
    failure's first line: a run that failed names what failed and why, so a flake is a
    test to look at, not a count."""
    names = []
    for case in ET.fromstring(junit_text).iter("testcase"):
        bad = case.find("failure")
        bad = case.find("error") if bad is None else bad
        if bad is not None:
            first = (bad.get("message") or bad.text or "").strip().splitlines()[:1]
            names.append(f"{case.get('classname', '')}::{case.get('name', '')}" + (f": {first[0][:300]}" if first else ""))
    return names


def keep_reports(reports: Path, run: int) -> Path:
    """Copy a failed run's report directory out of the temp dir before it goes."""
    dest = KEPT / f"run-{run}"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(reports, dest)
    return dest


def one_run(options: Options, run: int) -> tuple[float, dict[str, float], int, list[str]]:
    """(session wall seconds, summed test seconds per column, tests passed, failed or errored
    tests); a run with a failure leaves its reports under reports/bench-failed/run-N."""
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as tmp:
        opts = replace(options, report_dir=Path(tmp) / "reports")
        env = dict(os.environ, PVCHAOS_STATE_DIR=str(Path(tmp) / "state"))
        subprocess.run(pytest_argv(opts), cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        junit = report.layout(opts.report_dir).junit
        rows, wall = report.time_from_junit(junit)
        if wall is None:
            raise SystemExit("bench.default_run: the pytest session wrote no JUnit report")
        text = junit.read_text(encoding="utf-8")
        bad = failed_tests(text)
        skipped = text.count("<skipped")
        tests = sum(r.tests for r in rows)
        if bad:
            print(f"  run {run}'s reports kept in {keep_reports(opts.report_dir, run)}", flush=True)
        return wall, {c: sum(r.seconds[c] for r in rows) for c in COLUMNS}, tests - len(bad) - skipped, bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.default_run", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--backend", choices=tuple(BUDGET_S), default="local")
    p.add_argument("--workers", default="auto", help="as `pvchaos run --workers` (auto: one per core on local)")
    p.add_argument("--quick", action="store_true", help="the quick tier (`pvchaos run --quick`) instead")
    args = p.parse_args(argv)
    if args.runs < 1:
        print("bench.default_run: --runs must be at least 1", file=sys.stderr)
        return 2
    options = Options(backend=args.backend, workers=args.workers, quick=args.quick)
    stop = providers.provider(args.backend).prepare(options)  # builds, node image: untimed
    walls: list[float] = []
    failed_runs: list[int] = []
    parts: dict[str, list[float]] = {c: [] for c in COLUMNS}
    try:
        for run in range(1, args.runs + 1):
            wall, summed, passed, bad = one_run(options, run)
            walls.append(wall)
            for c in COLUMNS:
                parts[c].append(summed[c])
            split = ", ".join(f"{c} {summed[c]:.0f}" for c in COLUMNS)
            print(f"run {run}/{args.runs}: suite wall {wall:.1f} s ({passed} passed, {len(bad)} failed); tests' time "
                  f"{sum(summed.values()):.0f} s: {split} (load average {os.getloadavg()[0]:.1f}, "
                  f"{os.cpu_count()} cores)", flush=True)
            for name in bad:
                print(f"  failed: {name}", flush=True)
            if bad:
                failed_runs.append(run)
    finally:
        if stop is not None:
            stop()
    median = statistics.median(walls)
    budget = BUDGET_S[args.backend]
    print(f"\n{'quick tier' if args.quick else 'default run'} on {args.backend} (--workers {args.workers}): median "
          f"suite wall {median:.1f} s over {args.runs} run(s); budget {budget:.0f} s; ratio {median / budget:.2f}")
    print("where the tests' time went, median seconds summed over tests: "
          + ", ".join(f"{c} {statistics.median(parts[c]):.0f}" for c in COLUMNS))
    # issue 39's trust figure: consecutive runs with no failure (a flake is fixed, not retried)
    print(f"runs with a failure: {', '.join(map(str, failed_runs))}" if failed_runs
          else f"{args.runs} consecutive run(s) with no failed test")
    if failed_runs:
        return 1
    return 0 if args.quick or median <= budget else 1


if __name__ == "__main__":
    sys.exit(main())

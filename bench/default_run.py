"""The default run's time budget (issue 25): every suite in suites/, as `pvchaos run` selects
them, at `-n 2` on the local backend, must stay within 6 minutes of suite wall time now
that the CSI suites are in it (it was under 3 before them).

Each run is a fresh pytest session (`python -m pytest suites -n 2`, clusters started
inside it, as in CI); the wall time is the session's, read from its JUnit report, next to
the sum of the tests' own times (what parallelism saves). Prints the median over runs
and the ratio to the budget; exits 1 over budget.

    .venv/bin/python -m bench.default_run [--runs 1] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

BUDGET_S = 360.0
REPO = Path(__file__).resolve().parents[1]


def one_run(workers: int) -> tuple[float, float, int, int]:
    """(session wall seconds, summed test seconds, tests passed, tests failed or errored)."""
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-") as tmp:
        junit = Path(tmp) / "junit.xml"
        env = dict(os.environ, PVCHAOS_STATE_DIR=str(Path(tmp) / "state"))
        argv = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider", "-n", str(workers),
                f"--junitxml={junit}", "--no-pvchaos-summary"]
        subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if not junit.exists():
            raise SystemExit("bench.default_run: the pytest session wrote no JUnit report")
        tree = ET.parse(junit)
        suite = next(tree.iter("testsuite"))
        cases = list(tree.iter("testcase"))
        bad = sum(1 for c in cases if any(ch.tag in ("failure", "error") for ch in c))
        skipped = sum(1 for c in cases if any(ch.tag == "skipped" for ch in c))
        return (float(suite.get("time") or 0), sum(float(c.get("time") or 0) for c in cases),
                len(cases) - bad - skipped, bad)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.default_run", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    if args.runs < 1 or args.workers < 1:
        print("bench.default_run: --runs and --workers must be at least 1", file=sys.stderr)
        return 2
    walls = []
    for run in range(1, args.runs + 1):
        wall, summed, passed, bad = one_run(args.workers)
        walls.append(wall)
        print(f"run {run}/{args.runs}: suite wall {wall:.1f} s, tests' own time {summed:.1f} s "
              f"({passed} passed, {bad} failed)", flush=True)
    median = statistics.median(walls)
    print(f"\ndefault run at -n {args.workers}: median suite wall {median:.1f} s over {args.runs} run(s); "
          f"budget {BUDGET_S:.0f} s; ratio {median / BUDGET_S:.2f}")
    return 0 if median <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())

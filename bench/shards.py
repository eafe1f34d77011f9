"""Wall time of one `pvchaos run` against two shards of it started at once, and of the
merge; the medians over --runs rounds and the ratio.

Why: `--shard K/N` is for CI, where each shard has a machine of its own; on one shared
machine two shards compete for the same cores, so this measures what sharding costs or
saves here and how long the merge (`pvchaos report merge`, with the HTML report) takes.
Each round runs the unsharded run, then both shards at once (their wall time is the
slower one's), then the merge, every run with its own temporary report directory and
PVCHAOS_STATE_DIR, so no other cluster is touched or swept. Binaries are ensured first,
untimed. The merged verdicts and counts are compared with the unsharded run's; the bench
exits 1 when they differ.

    .venv/bin/python -m bench.shards --suites reclaim,static_binding --runs 3 [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pvchaos import report
from pvchaos.compare_backends import verdicts
from pvchaos.runner import REPO_ROOT
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

PVCHAOS = str(REPO_ROOT / "bin" / "pvchaos")


@dataclass(frozen=True)
class Round:
    whole_s: float
    sharded_s: float
    merge_s: float
    same: bool


def _run(args: list[str], report_dir: Path, state: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PVCHAOS_STATE_DIR": str(state)}
    return subprocess.Popen([PVCHAOS, "run", *args, "--report-dir", str(report_dir)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _counts(report_dir: Path) -> list[tuple[str, int, int, int, int]]:
    return [(r.suite, r.passed, r.failed, r.broken, r.skipped) for r in report.summarize(report.layout(report_dir).results)]


def one_round(selection: list[str], root: Path) -> Round:
    t0 = time.monotonic()
    _run(selection, root / "whole", root / "state-whole").wait()
    whole = time.monotonic() - t0
    t0 = time.monotonic()
    procs = [_run([*selection, "--shard", f"{k}/2"], root / f"shard-{k}", root / f"state-{k}") for k in (1, 2)]
    for p in procs:
        p.wait()
    sharded = time.monotonic() - t0
    t0 = time.monotonic()
    subprocess.run([PVCHAOS, "report", "merge", str(root / "merged"), str(root / "shard-1"), str(root / "shard-2")],
                   cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    merge = time.monotonic() - t0
    same = (verdicts(report.load_results(report.layout(root / "merged").results))
            == verdicts(report.load_results(report.layout(root / "whole").results))
            and _counts(root / "merged") == _counts(root / "whole"))
    return Round(whole, sharded, merge, same)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.shards", description=__doc__.split("\n\n")[0])
    p.add_argument("--suites", default="reclaim,static_binding")
    p.add_argument("--workers", default="1", help="workers of each run (default 1: one core per shard)")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    ensure_binaries(DEFAULT_K8S_VERSION)
    selection = ["--suites", args.suites, "--workers", args.workers]
    rounds = []
    for n in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="pvchaos-bench-shards-") as tmp:
            r = one_round(selection, Path(tmp))
        rounds.append(r)
        print(f"round {n}: 1 run {r.whole_s:.1f}s, 2 shards at once {r.sharded_s:.1f}s, merge {r.merge_s:.1f}s, "
              f"verdicts and counts {'identical' if r.same else 'DIFFER'}", flush=True)
    whole = statistics.median(r.whole_s for r in rounds)
    sharded = statistics.median(r.sharded_s for r in rounds)
    merge = statistics.median(r.merge_s for r in rounds)
    print(f"\nselection: --suites {args.suites} --workers {args.workers}; {args.runs} round(s); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"median wall time: 1 run {whole:.1f}s; 2 shards at once {sharded:.1f}s; merge {merge:.1f}s")
    print(f"ratio 1 run / 2 shards: {whole / sharded:.2f}x; with the merge: {whole / (sharded + merge):.2f}x")
    return 0 if all(r.same for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Cold build time of each Kubernetes version, and the wall time of a matrix run.

A build is "cold" for pvchaos when its binary cache is empty: each version is built into
a throwaway $PVCHAOS_CACHE. `--go-cache fresh` also gives Go an empty build cache (what a
new CI machine pays: every package compiled); `shared` keeps the machine's Go build cache
(what a second version costs once another was built: shared packages are reused). The
Go module cache is always kept (downloads are not what is measured).

    .venv/bin/python -m bench.versions --versions v1.36.3,v1.37.2 --go-cache fresh
    .venv/bin/python -m bench.versions --matrix v1.34.4,v1.35.4,v1.36.3,v1.37.2 --report-dir reports/matrix

The matrix part times `pvchaos run --k8s-version ...` (binaries already built) against
the sum of its per-version suite times, so the printed ratio is the matrix's own overhead
(merging, the comparison, one report).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = "from tools.build import ensure_binaries; import sys; ensure_binaries(sys.argv[1], only=['kubernetes'])"


def cold_build_seconds(version: str, fresh_go_cache: bool) -> float:
    """Seconds to build the control plane and kubectl of `version` into an empty cache."""
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-build-") as tmp:
        env = dict(os.environ, PVCHAOS_CACHE=tmp)
        if fresh_go_cache:
            env["GOCACHE"] = str(Path(tmp) / "go-build")
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", BUILD, version], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        seconds = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"build of {version} failed: {proc.stderr.strip().splitlines()[-1:]}")
        return seconds


def matrix_wall(versions: str, report_dir: Path) -> tuple[float, int, list[float]]:
    """(wall seconds, exit code, each version's suites wall time as the run printed it)."""
    started = time.monotonic()
    proc = subprocess.run([str(REPO / "bin" / "pvchaos"), "run", "--k8s-version", versions,
                           "--report-dir", str(report_dir)], cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    suites = [float(s) for s in re.findall(r"suites wall time: ([\d.]+)s", proc.stdout)]
    sys.stdout.write(proc.stdout[-2500:])
    return wall, proc.returncode, suites


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default="", help="versions to build cold, comma-separated")
    parser.add_argument("--go-cache", choices=("fresh", "shared"), default="fresh")
    parser.add_argument("--matrix", default="", help="versions of one matrix run to time, comma-separated")
    parser.add_argument("--report-dir", type=Path, default=REPO / "reports" / "matrix")
    args = parser.parse_args()
    if not shutil.which("go"):
        raise SystemExit("go: not on PATH")
    print(f"cpus {os.cpu_count()}, load {_load()}")
    builds = {}
    for version in filter(None, args.versions.split(",")):
        builds[version] = cold_build_seconds(version, args.go_cache == "fresh")
        print(f"cold build {version} (go cache {args.go_cache}): {builds[version] / 60:.1f} min, load {_load()}",
              flush=True)
    if builds:
        values = sorted(builds.values())
        print(f"median cold build: {values[len(values) // 2] / 60:.1f} min over {len(values)} versions")
    if args.matrix:
        wall, code, suites = matrix_wall(args.matrix, args.report_dir)
        print(f"matrix run {args.matrix}: {wall / 60:.1f} min wall, exit {code}; suites "
              + ", ".join(f"{s / 60:.1f}" for s in suites) + " min")
        if suites:
            print(f"matrix wall / sum of its suite runs: {wall / sum(suites):.2f}; "
                  f"median suite run {sorted(suites)[len(suites) // 2] / 60:.1f} min; load {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

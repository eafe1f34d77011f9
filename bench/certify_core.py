"""`pvchaos certify` of an example package, one tier, timed: the wall time of the whole
command (cluster, install, discovery, suites, uninstall, teardown), where it went per
suite (the Allure results' durations), and the driver volumes each suite exercised.

    .venv/bin/python -m bench.certify_core [--package examples/vendor-driver] [--tiers core] [--runs 1]

Target (issue 35): the core tier of the example package in 12 minutes on 2 cores. The
last line holds the median wall time and its ratio to the target. Upstream's own answer,
`e2e.test -storage.testdriver=...` with External.Storage, is not measured beside it: its
test binary is built from k8s.io/kubernetes/test/e2e and needs images from a registry
this machine cannot reach (docs/certify.md "Relation to upstream's external storage tests").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pvchaos.certify_package import latest_results, volume_counts

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 12 * 60


def one_run(package: Path, tiers: str, report: Path) -> tuple[float, int, dict]:
    """(wall seconds, exit code, certification.json) of one certify run."""
    start = time.monotonic()
    proc = subprocess.run([str(REPO / "bin" / "pvchaos"), "certify", "--driver-dir", str(package), "--tiers", tiers,
                           "--report-dir", str(report)], capture_output=True, text=True, timeout=3600, check=False)
    wall = time.monotonic() - start
    cert_file = report / "certification.json"
    cert = json.loads(cert_file.read_text()) if cert_file.exists() else {"stderr": proc.stderr[-500:]}
    return wall, proc.returncode, cert


def suite_seconds(report: Path) -> dict[str, tuple[float, int, int]]:
    """Suite -> (test seconds, tests, driver volumes provisioned) from the Allure results."""
    out: dict[str, tuple[float, int, int]] = {}
    results = [json.loads(p.read_text()) for p in (report / "allure-results").glob("*-result.json")]
    for data in latest_results(results):
        suite = next((str(lab["value"]) for lab in data.get("labels") or [] if lab.get("name") == "suite"), "?")
        seconds = (int(data.get("stop") or 0) - int(data.get("start") or 0)) / 1000
        total, count, volumes = out.get(suite, (0.0, 0, 0))
        out[suite] = (total + seconds, count + 1, volumes + volume_counts(data)[0])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--package", default=str(REPO / "examples" / "vendor-driver"))
    p.add_argument("--tiers", default="core")
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    walls = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="pvchaos-bench-certify-") as tmp:
            report = Path(tmp) / "r"
            wall, code, cert = one_run(Path(args.package), args.tiers, report)
            walls.append(wall)
            print(f"run {i + 1}: {wall:.0f}s, exit {code}, verdict {cert.get('verdict', '?')}, "
                  f"load {os.getloadavg()[0]:.1f}")
            for suite, (seconds, count, volumes) in sorted(suite_seconds(report).items(), key=lambda kv: -kv[1][0]):
                print(f"  {suite:40s} {seconds:7.1f}s  {count:3d} tests  {volumes:3d} driver volumes")
    median = statistics.median(walls)
    print(f"certify {Path(args.package).name} --tiers {args.tiers}: median {median:.0f}s of {len(walls)} "
          f"(target {TARGET_SECONDS}s, ratio {median / TARGET_SECONDS:.2f}) on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())

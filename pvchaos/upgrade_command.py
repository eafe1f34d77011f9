"""`pvchaos upgrade --from v1.35.4 --to v1.36.3`: the live upgrade suite
(suites/test_upgrade.py) on a local cluster, with its report, as `pvchaos run` writes one.

Everything a user can get wrong is refused in one line before anything is built or
started: a malformed version, a skew the version-skew policy forbids (unless
--force-skew), a version the Go module proxy does not serve (the build's own error).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pvchaos import runner
from pvchaos.clusters import arguments
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.options import Options, default_report_dir
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION, release, skew_refusal


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="from_version", default=DEFAULT_K8S_VERSION, type=arguments.k8s_version,
                   help=f"the version the cluster starts at (default {DEFAULT_K8S_VERSION})")
    p.add_argument("--to", dest="to_version", required=True, type=arguments.k8s_version,
                   help="the version it is upgraded to, e.g. v1.36.3")
    p.add_argument("--force-skew", action="store_true",
                   help="upgrade even when the version-skew policy forbids it (a downgrade, or two minors)")
    p.add_argument("--zones", default="3", type=arguments.zones)
    p.add_argument("--nodes-per-zone", type=arguments.nodes_per_zone, default=2)
    p.add_argument("--report-dir", type=arguments.writable_dir, default=default_report_dir() / "upgrade",
                   help="where the Allure results, report, JUnit XML and summary go (default reports/upgrade)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --, passed to pytest")


def check_versions(start: str, to: str, force: bool) -> None:
    """One line for a malformed version or a forbidden skew (pure)."""
    for flag, version in (("--from", start), ("--to", to)):
        try:
            release(version)
        except ValueError as exc:
            raise ValueError(f"{flag}: {exc}") from None
    refusal = skew_refusal(start, to)
    if refusal and (not force or release(start) == release(to)):
        raise ClusterError(refusal + ("" if force or release(start) == release(to) else " (--force-skew to try it)"))


def request(args: argparse.Namespace) -> Options:
    """The `pvchaos run` request that runs exactly the upgrade suite, in one worker."""
    extra = [a for a in args.pytest_args if a != "--"]
    flags = [f"--upgrade-to={args.to_version}", *(["--upgrade-force-skew"] if args.force_skew else [])]
    return Options(k8s_version=args.from_version, suites=("upgrade",), workers="0", zones=args.zones,
                   nodes_per_zone=args.nodes_per_zone, report_dir=Path(args.report_dir).resolve(),
                   pytest_args=(*flags, *extra))


def run(args: argparse.Namespace) -> int:
    check_versions(args.from_version, args.to_version, args.force_skew)
    req = request(args)
    runner.validate(req)
    ensure_binaries(args.to_version)  # an unserved version fails here, in one line, before any cluster
    return runner.run(req)

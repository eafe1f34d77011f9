"""The `pvchaos` command: clusters (up, down, list), build, run, upgrade, compare, explain, selftest.

Every failure a user can cause ends in one line on stderr and exit code 2, and so does
an OSError (a directory that became unwritable, a full disk); nothing is left running or
on disk by a command that failed.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import NoReturn

from pvchaos import certify, compare_runs, report, report_merge, upgrade_command
from pvchaos import explain as explain_command
from pvchaos.clusters import arguments, providers
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.common.state import state_root
from pvchaos.clusters.kind import parse_version
from pvchaos.clusters.local.config import PROVISIONER_KINDS
from pvchaos.clusters.options import (
    REPO_ROOT,
    add_run_arguments,
    default_report_dir,
    from_values,
    split_pytest_args,
)
from pvchaos.clusters.provider import Feature
from pvchaos.runner import os_error_text, run_request
from pvchaos.tools.build import BuildError, ensure_binaries
from pvchaos.tools.csi_driver import ensure_csi_driver
from pvchaos.tools.csi_sidecars import ensure_csi_sidecars
from pvchaos.tools.csi_snapshotter import ensure_snapshot_components
from pvchaos.tools.docker_engine import EngineError, ensure_engine, stop_engine
from pvchaos.tools.nodeimage.build import build_node_image, ensure_kind
from pvchaos.tools.versions import DEFAULT_K8S_VERSION


def _cluster_up(args: argparse.Namespace) -> int:
    try:
        backend = providers.provider(args.backend)
    except ValueError as exc:
        raise ClusterError(str(exc)) from None
    if args.csi_max_volumes_per_node and args.backend != "local":
        raise ClusterError(f"cluster up --backend {args.backend}: --csi-max-volumes-per-node is for the local backend")
    handle = backend.cluster_up(args)
    print(f"export KUBECONFIG={handle.kubeconfig}")
    return 0


def _cluster_down(args: argparse.Namespace) -> int:
    chosen = providers.names(Feature.STARTS_CLUSTERS) if args.all else (args.backend,)
    removed = 0
    for name in chosen:
        for line in providers.provider(name).cluster_down(None if args.all else args.name):
            print(line)
            removed += 1
    if not removed:  # silence read as "done" while a cluster of another state directory ran on
        print(f"no clusters to remove under {state_root()} (a run with another PVCHAOS_STATE_DIR keeps its own)")
    return 0


def _cluster_list(args: argparse.Namespace) -> int:
    for name in providers.names(Feature.STARTS_CLUSTERS):
        for line in providers.provider(name).cluster_list():
            print(line)
    return 0


def _build(args: argparse.Namespace) -> int:
    bins = ensure_binaries(args.k8s_version)
    for name, path in bins.all().items():
        if path.exists():  # the test provisioner is built only for a cluster that runs it
            print(f"{name}\t{path}")
    sidecars = ensure_csi_sidecars()  # the local backend's CSI stack runs upstream's sidecars
    print(f"pvchaos-csi\t{ensure_csi_driver()}")
    print(f"csi-provisioner\t{sidecars.provisioner}")
    print(f"csi-attacher\t{sidecars.attacher}")
    snapshots = ensure_snapshot_components()  # and external-snapshotter's two components
    print(f"csi-snapshotter\t{snapshots.snapshotter}")
    print(f"snapshot-controller\t{snapshots.controller}")
    return 0


def _kind_build_image(args: argparse.Namespace) -> int:
    parse_version(args.k8s_version)
    try:
        engine = ensure_engine()
    except EngineError as exc:
        raise ClusterError(str(exc)) from None
    try:
        ensure_kind()
        print(build_node_image(engine, args.k8s_version))
    finally:
        stop_engine(engine)
    return 0


def _run(args: argparse.Namespace) -> int:
    return run_request(from_values(vars(args).get, pytest_side=False))


def _compare(args: argparse.Namespace) -> int:
    """Exit 1 when a test that passed in A fails in B, else 0 (bad input: 2, nothing written)."""
    a = compare_runs.load_run(args.report_a, "A")
    b = compare_runs.load_run(args.report_b, "B")
    out = compare_runs.prepare_output(Path(args.report_dir), a, b)
    changes = compare_runs.compare(a, b)
    markdown = compare_runs.write_report(out, changes, a, b)
    print(markdown.read_text(encoding="utf-8"), end="")
    if not args.no_html:
        html = report.build_report(out, compare_runs.environment(a, b), categories=[compare_runs.CATEGORY])
        print(f"Allure report (both runs and the changes): {html}")
    print(f"Markdown: {markdown}")
    return 1 if compare_runs.regressions(changes) else 0


SELFTEST_TIERS = ("unit", "binaries", "cluster", "selfcheck", "kind", "matrix", "kind-matrix", "long",
                  "versions")  # tests/conftest.py
# too long for every run: only `--tier <name>` (and nightly) runs them
ON_REQUEST_TIERS = ("matrix", "kind-matrix", "long", "versions")


def _selftest(args: argparse.Namespace) -> int:
    """The harness's own tests, all tiers or one (`--tier unit` runs in seconds)."""
    if args.tier != "unit":
        ensure_binaries(DEFAULT_K8S_VERSION)
    extra = [a for a in args.pytest_args if a != "--"]
    target = ["tests/unit"] if args.tier == "unit" else ["tests"]
    tier = (["-m", " and ".join(f"not tier_{t}" for t in ON_REQUEST_TIERS)] if args.tier == "all"
            else ["-m", f"tier_{args.tier}"])
    # Where CI's minutes go: the slowest tests, and each file's time split into cluster
    # starts, Kubernetes timers, harness waits and bodies (pvchaos.kube.spent).
    durations = [] if args.tier == "unit" else ["--durations=30", "--pvchaos-time-spent"]
    argv = [sys.executable, "-m", "pytest", *target, *tier, "-p", "no:cacheprovider", "-rfEs", *durations,
            *hypothesis_profile(extra), *extra]
    return subprocess.call(argv, cwd=REPO_ROOT)


def hypothesis_profile(extra: list[str]) -> list[str]:
    """selftest draws the same examples every run (the `ci` profile, registered in
    tests/conftest.py), on CI and off it; a developer who asks for a seed or another
    profile (`-- --hypothesis-seed N`, `-- --hypothesis-profile explore`) gets that."""
    return [] if any(a.startswith("--hypothesis-") for a in extra) else ["--hypothesis-profile=ci"]


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one line on stderr and exit 2, like every other
    refusal of this command (argparse's own prints the whole usage first). Subparsers
    inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="pvchaos", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    cl = sub.add_parser("cluster", help="local and kind clusters").add_subparsers(dest="action", required=True)
    up = cl.add_parser("up", help="start a cluster that outlives this command")
    up.add_argument("--backend", default="local", choices=providers.names(Feature.STARTS_CLUSTERS))
    up.add_argument("--name", default="pvchaos", type=arguments.cluster_name)
    up.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION, type=arguments.k8s_version)
    up.add_argument("--zones", default="3", type=arguments.zones)
    up.add_argument("--nodes-per-zone", type=arguments.nodes_per_zone, default=2)
    up.add_argument("--feature-gates", default="", type=arguments.feature_gates, help="e.g. MutablePVNodeAffinity=false")
    up.add_argument("--disable-controller", action="append", default=[], metavar="NAME", type=arguments.component_word,
                    help="a kube-controller-manager controller to leave out (repeatable)")
    up.add_argument("--disable-scheduler-plugin", action="append", default=[], metavar="NAME",
                    type=arguments.component_word)
    up.add_argument("--kcm-flag", action="append", default=[], metavar="FLAG", type=arguments.component_flag,
                    help="an extra kube-controller-manager flag, e.g. --kube-api-qps=100 (repeatable)")
    up.add_argument("--no-provisioner", action="store_true", help="no dynamic provisioning at all")
    up.add_argument("--csi-max-volumes-per-node", type=arguments.volume_limit, default=0, metavar="N",
                    help="the CSI driver's volume limit per node (CSINode allocatable.count); 0, the default, is "
                         "no limit (local backend)")
    up.add_argument("--provisioner", choices=PROVISIONER_KINDS, default="csi",
                    help="csi: upstream's external-provisioner and external-attacher with pvchaos-csi (default); "
                         "test-double: the old test provisioner, for comparison")
    up.set_defaults(func=_cluster_up)
    down = cl.add_parser("down", help="stop a cluster and remove what it left")
    down.add_argument("--backend", default="local", choices=providers.names(Feature.STARTS_CLUSTERS))
    which = down.add_mutually_exclusive_group(required=True)
    which.add_argument("--name", type=arguments.cluster_name)
    which.add_argument("--all", action="store_true", help="every local and kind cluster, including leftovers")
    down.set_defaults(func=_cluster_down)
    cl.add_parser("list", help="local clusters and their health").set_defaults(func=_cluster_list)

    b = sub.add_parser("build", help="build (or find cached) binaries for a Kubernetes version")
    b.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION, type=arguments.k8s_version)
    b.set_defaults(func=_build)

    r = sub.add_parser("run", help="run the suites and write the Allure report (the main job)")
    add_run_arguments(r)
    r.set_defaults(func=_run)

    u = sub.add_parser("upgrade", help="upgrade a local cluster in place under storage load (the upgrade suite)",
                       description="Exit 0: the upgrade kept every volume, claim and pod; 1: it did not; "
                                   "2: bad input. See docs/upgrade.md.")
    upgrade_command.add_arguments(u)
    u.set_defaults(func=upgrade_command.run)

    c = sub.add_parser("compare", help="what changed between two report directories (exit 1: a test that "
                                       "passed in A fails in B)")
    c.add_argument("report_a", metavar="REPORT_DIR_A", type=arguments.existing_dir,
                   help="the earlier run (pvchaos run --report-dir)")
    c.add_argument("report_b", metavar="REPORT_DIR_B", type=arguments.existing_dir, help="the later run")
    c.add_argument("--report-dir", default=str(default_report_dir() / "compare"), type=arguments.writable_dir,
                   help="where compare.md and the Allure report of both runs go (default reports/compare)")
    c.add_argument("--no-html", action="store_true", help="only compare.md and allure-results, no HTML report")
    c.set_defaults(func=_compare)

    rp = sub.add_parser("report", help="report tools").add_subparsers(dest="action", required=True)
    m = rp.add_parser("merge", help="one report from the report directories of shards, backends and versions",
                      description="Exit 0: every test passed; 1: a test failed, or a shard or a test is missing; "
                                  "2: directories that cannot be merged. See docs/ci.md.")
    report_merge.add_arguments(m)
    m.set_defaults(func=report_merge.run)

    k = sub.add_parser("kind", help="kind backend tools").add_subparsers(dest="action", required=True)
    bi = k.add_parser("build-image", help="build (or find cached) the offline kind node image of a version")
    bi.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION, type=arguments.k8s_version)
    bi.set_defaults(func=_kind_build_image)

    ce = sub.add_parser("certify", help="install a vendor's CSI driver, discover it, run the suites that apply, "
                                         "write certification.md (see docs/certify.md)",
                        description="Exit 0: every applicable suite passed, nothing disagreed or leaked; 1: a suite "
                                    "failed, the profile disagreed with the cluster, or volumes were left; 2: bad "
                                    "input or the driver never came up. See docs/certify.md.")
    certify.add_arguments(ce)
    ce.set_defaults(func=certify.run)

    e = sub.add_parser("explain", help="why a pod is Pending, and what fixes it (read-only, any cluster)",
                       description="Exit 0: schedulable; 1: a cause was found; 2: bad input. See docs/explain.md.")
    explain_command.add_arguments(e)
    e.set_defaults(func=explain_command.run)

    t = sub.add_parser("selftest", help="the harness's own tests")
    t.add_argument("--tier", default="all", choices=("all", *SELFTEST_TIERS),
                   help="unit: pure, seconds; binaries: tools, no cluster; cluster: local clusters; "
                        "selfcheck: the suites on healthy and broken clusters")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    t.set_defaults(func=_selftest)
    return p


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt("SIGTERM")


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, parsed. `run PATH... -- PYTEST_ARGS`: pytest's part is split off
    first, so a PATH and pytest's own flags cannot be confused."""
    extra: list[str] = []
    if argv[:1] == ["run"]:
        argv, extra = split_pytest_args(argv)
    args = parser().parse_args(argv)
    if argv[:1] == ["run"]:
        args.pytest_args = extra
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse's refusal (one line, OneLineParser) or --help: a code, also in-process
        return exc.code if isinstance(exc.code, int) else 0
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # `kill`, CI: the same path as Ctrl-C
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args))
    except (ClusterError, BuildError, ValueError, RuntimeError) as exc:
        print(f"pvchaos: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a directory that became unwritable, a full disk: one line, not a traceback
        print(f"pvchaos: {args.command}: {os_error_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # Reached outside `run`'s pytest child (which reports itself): a build or a
        # `cluster up`, whose own cleanup ran while this exception unwound.
        name = "SIGTERM" if str(exc) == "SIGTERM" else "SIGINT"
        print(f"pvchaos: interrupted by {name}; {args.command} stopped", file=sys.stderr)
        return 143 if name == "SIGTERM" else 130


if __name__ == "__main__":
    sys.exit(main())

"""`pvchaos run`: check the request, build binaries, run the suites in parallel, report.

Input is validated before anything starts (unknown suites, an unwritable report
directory, more workers than the machine can hold clusters for), so a mistake costs
one line and no cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from clusters.kind import KindBackend
from clusters.options import BACKENDS, REPO_ROOT, Options
from clusters.options import pytest_flags as _pytest_flags
from clusters.topology import Topology
from conformance import feature_gates
from drivers.profile import load_profile
from pvchaos import compare_backends as cmp
from pvchaos import report
from pvchaos.results import merge_into
from pvchaos.certification import render_certification, results_from_allure, write_allure_summary
from tools.build import ensure_binaries
from tools.docker_engine import Engine, stop_engine
from tools.versions import DEFAULT_K8S_VERSION

SUITES_DIR = REPO_ROOT / "suites"
CLUSTER_MEMORY_MIB = 1100  # measured: ~850 MiB RSS for 3 zones x 2 nodes, plus headroom
RunRequest = Options  # what `pvchaos run` was asked: the one option schema (clusters.options)


class UsageError(ValueError):
    """Bad input to `pvchaos run`; the message is the one line the user sees."""


def known_suites() -> list[str]:
    return sorted(p.stem.removeprefix("test_") for p in SUITES_DIR.glob("test_*.py"))


def available_memory_mib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 4096


def effective_workers(req: Options) -> int:
    """`auto` is one worker per core on local clusters, and one for a single kind/existing cluster."""
    if req.backend != "local" and req.workers == "auto":
        return 1
    return worker_count(req.workers)


def worker_count(text: str) -> int:
    """`auto` is one worker per core; each worker runs clusters of its own."""
    if text == "auto":
        return max(1, os.cpu_count() or 1)
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--workers: {text!r} is not a number or 'auto'") from None
    if n < 0:
        raise UsageError(f"--workers: {n} is negative")
    return n


def validate(req: Options) -> None:
    """Raise UsageError with one line for anything wrong, before any cluster starts."""
    unknown = [s for s in req.suites if s not in known_suites()]
    if unknown:
        raise UsageError(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(known_suites())}")
    n = worker_count(req.workers)
    if req.backend in ("kind", "existing") and n > 1 and req.workers != "auto":
        raise UsageError(f"--workers {n}: backend {req.backend} has one cluster; use --workers 1")
    if req.backend == "local":
        try:
            Topology.parse(req.zones, req.nodes_per_zone)
        except ValueError as exc:
            raise UsageError(f"--zones {req.zones}: {exc}") from None
        fits = max(1, available_memory_mib() // (2 * CLUSTER_MEMORY_MIB))
        if n > fits:
            raise UsageError(f"--workers {n}: this machine has memory for about {fits} workers' local clusters "
                             f"({available_memory_mib()} MiB available, ~{2 * CLUSTER_MEMORY_MIB} MiB each)")
    if req.backend == "existing" and not req.kubeconfig:
        raise UsageError("--backend existing needs --kubeconfig")
    if req.kubeconfig and not Path(req.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {req.kubeconfig}: no such file")
    if req.profile:
        if not Path(req.profile).is_file():
            raise UsageError(f"--profile {req.profile}: no such file")
        load_profile(req.profile)  # a typo or an impossible value: one line, before any cluster
    try:
        req.report_dir.mkdir(parents=True, exist_ok=True)
        probe = req.report_dir / ".pvchaos-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--report-dir {req.report_dir}: cannot write there ({exc.strerror})") from None


def pytest_argv(req: Options) -> list[str]:
    """The pytest command line for a request (pure, so it can be tested)."""
    lay = report.layout(req.report_dir)
    targets = [str(SUITES_DIR / f"test_{s}.py") for s in req.suites] or [str(SUITES_DIR)]
    argv = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-rfEs",
            f"--alluredir={lay.results}", f"--junitxml={lay.junit}", f"--backend={req.backend}"]
    n = effective_workers(req)
    if n > 0:
        argv += ["-n", str(n), "--dist", "loadgroup"]
    if req.keyword:
        argv += ["-k", req.keyword]
    from_schema = [a for a in _pytest_flags(req) if not a.startswith("--backend=")]
    return argv + from_schema + list(req.pytest_args)


def run(req: Options) -> int:
    """The main job; returns pytest's exit code (non-zero when anything failed)."""
    validate(req)
    engine = None
    if req.backend == "local":
        ensure_binaries(req.k8s_version or DEFAULT_K8S_VERSION)
    if req.backend == "kind":
        engine = prepare_kind(req)
    try:
        return _run_and_report(req)
    finally:
        if engine is not None:
            stop_engine(engine)


def backends_of(text: str) -> list[str]:
    """`local,kind` -> ["local", "kind"]; an unknown or repeated name is refused."""
    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in BACKENDS]
    if not names or unknown or len(set(names)) != len(names):
        raise UsageError(f"--backend {text!r}: give one or more of {', '.join(BACKENDS)}, comma-separated, each once")
    return names


def run_backends(req: Options) -> int:
    """The same suites on each backend in turn (each with a full report of its own under
    <report dir>/<backend>/), then one report with both and the verdict table."""
    backends = backends_of(req.backend)
    if len(backends) == 1:
        return run(req)
    runs = [replace(req, backend=b, report_dir=req.report_dir / b) for b in backends]
    for one in runs:
        validate(one)
    codes = [run(one) for one in runs]
    merged = report.layout(req.report_dir).results
    if merged.exists():
        shutil.rmtree(merged)
    by_backend = {}
    for one in runs:
        merge_into(merged, one.backend, report.layout(one.report_dir).results)
        by_backend[one.backend] = cmp.verdicts(report.load_results(report.layout(one.report_dir).results))
    rows = cmp.compare(by_backend)
    table = cmp.render_markdown(rows, backends)
    (req.report_dir / "backends.md").write_text(table)
    cmp.write_comparison_result(merged, rows, backends)
    html = report.build_report(req.report_dir, {**environment(replace(req, backend=backends[0])),
                                                "backend": " and ".join(backends)})
    print(table.splitlines()[-1])
    print(f"verdicts by backend: {req.report_dir / 'backends.md'}\nAllure report (both backends): {html}")
    return max(codes) or (1 if cmp.unexplained(rows) else 0)


def prepare_kind(req: Options) -> Engine | None:
    """Engine, kind and node image before pytest starts, so a missing piece is one line
    (and not one error per test); returns the engine, stopped at the end if ours."""
    backend = KindBackend.from_options(req)
    backend.prepare()
    return backend.engine


def _run_and_report(req: Options) -> int:
    lay = report.layout(req.report_dir)
    if lay.results.exists():
        for old in lay.results.iterdir():
            if old.is_file():
                old.unlink()
    lay.results.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    code = subprocess.call(pytest_argv(req), cwd=REPO_ROOT)
    elapsed = time.monotonic() - started
    if req.profile:
        _certification(req, lay.results)
    html = report.build_report(lay.root, environment(req))  # the same path the report tests check
    print(report.format_summary(report.summarize(lay.results)))
    print(f"suites wall time: {elapsed:.1f}s")
    print(f"Allure report: {html}\nJUnit XML: {lay.junit}")
    return code


def _certification(req: Options, results: Path) -> None:
    """For a driver run: the certification page, in the report and as Markdown."""
    profile = load_profile(req.profile or "")
    outcomes = results_from_allure(results)
    write_allure_summary(results, profile, outcomes)
    page = req.report_dir / "certification.md"
    page.write_text(render_certification(profile, outcomes))
    print(f"certification summary: {page}")


def environment(req: Options) -> dict[str, str]:
    """The report's environment page: what this run was, as the options say (never hard-coded)."""
    local = req.backend == "local"
    env = {
        "backend": req.backend,
        "kubernetes": req.k8s_version or (DEFAULT_K8S_VERSION if local else "cluster's own"),
        "feature gates": req.feature_gates or ("MutablePVNodeAffinity=true (local default)"
                                               if local else "as the cluster has them"),
        "zones": ",".join(Topology.parse(req.zones, req.nodes_per_zone).zones) if local else "discovered",
        "workers": req.workers,
        "driver profile": req.profile or "none (harness zonal test driver)",
    }
    if req.profile:
        profile = load_profile(req.profile)
        env["driver"] = profile.name
        env["driver capabilities"] = ", ".join(f"{k}={str(v).lower()}" for k, v in sorted(profile.capabilities.items()))
    return {**env, **feature_gates.environment()}  # each gate the suites depend on, per version

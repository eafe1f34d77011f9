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
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO_ROOT / "suites"
CLUSTER_MEMORY_MIB = 1100  # measured: ~850 MiB RSS for 3 zones x 2 nodes, plus headroom


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


@dataclass(frozen=True)
class RunRequest:
    backend: str = "local"
    k8s_version: str = ""
    suites: tuple[str, ...] = ()
    keyword: str | None = None
    workers: str = "auto"
    profile: str | None = None
    keep_cluster: bool = False
    report_dir: Path = REPO_ROOT / "reports"
    kubeconfig: str | None = None
    context: str | None = None
    allow_disruptive: bool = False
    allow_contexts: tuple[str, ...] = ()
    feature_gates: str = ""
    pytest_args: tuple[str, ...] = field(default_factory=tuple)


def effective_workers(req: RunRequest) -> int:
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


def validate(req: RunRequest) -> None:
    """Raise UsageError with one line for anything wrong, before any cluster starts."""
    unknown = [s for s in req.suites if s not in known_suites()]
    if unknown:
        raise UsageError(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(known_suites())}")
    n = worker_count(req.workers)
    if req.backend in ("kind", "existing") and n > 1 and req.workers != "auto":
        raise UsageError(f"--workers {n}: backend {req.backend} has one cluster; use --workers 1")
    if req.backend == "local":
        fits = max(1, available_memory_mib() // (2 * CLUSTER_MEMORY_MIB))
        if n > fits:
            raise UsageError(f"--workers {n}: this machine has memory for about {fits} workers' local clusters "
                             f"({available_memory_mib()} MiB available, ~{2 * CLUSTER_MEMORY_MIB} MiB each)")
    if req.backend == "existing" and not req.kubeconfig:
        raise UsageError("--backend existing needs --kubeconfig")
    if req.kubeconfig and not Path(req.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {req.kubeconfig}: no such file")
    if req.profile:
        from pvchaos.profiles import load_profile

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


def pytest_argv(req: RunRequest) -> list[str]:
    """The pytest command line for a request (pure, so it can be tested)."""
    results = req.report_dir / "allure-results"
    targets = [str(SUITES_DIR / f"test_{s}.py") for s in req.suites] or [str(SUITES_DIR)]
    argv = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-rfEs",
            f"--alluredir={results}", f"--junitxml={req.report_dir / 'junit.xml'}",
            f"--backend={req.backend}"]
    n = effective_workers(req)
    if n > 0:
        argv += ["-n", str(n), "--dist", "loadgroup"]
    if req.k8s_version:
        argv.append(f"--k8s-version={req.k8s_version}")
    if req.keyword:
        argv += ["-k", req.keyword]
    for flag, value in (("--profile", req.profile), ("--kubeconfig", req.kubeconfig), ("--context", req.context),
                        ("--feature-gates", req.feature_gates)):
        if value:
            argv.append(f"{flag}={value}")
    if req.keep_cluster:
        argv.append("--keep-cluster")
    if req.allow_disruptive:
        argv.append("--allow-disruptive")
    argv += [f"--allow-context={c}" for c in req.allow_contexts]
    return argv + list(req.pytest_args)


def run(req: RunRequest) -> int:
    """The main job; returns pytest's exit code (non-zero when anything failed)."""
    validate(req)
    engine = None
    if req.backend == "local":
        from tools.build import ensure_binaries
        from tools.versions import DEFAULT_K8S_VERSION

        ensure_binaries(req.k8s_version or DEFAULT_K8S_VERSION)
    if req.backend == "kind":
        engine = prepare_kind(req)
    try:
        return _run_and_report(req)
    finally:
        if engine is not None:
            from tools.docker_engine import stop_engine

            stop_engine(engine)


BACKENDS = ("local", "kind", "existing")


def backends_of(text: str) -> list[str]:
    """`local,kind` -> ["local", "kind"]; an unknown or repeated name is refused."""
    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in BACKENDS]
    if not names or unknown or len(set(names)) != len(names):
        raise UsageError(f"--backend {text!r}: give one or more of {', '.join(BACKENDS)}, comma-separated, each once")
    return names


def run_backends(req: RunRequest) -> int:
    """The same suites on each backend in turn (each with a full report of its own under
    <report dir>/<backend>/), then one report with both and the verdict table."""
    from pvchaos import compare_backends as cmp
    from pvchaos import report

    backends = backends_of(req.backend)
    if len(backends) == 1:
        return run(req)
    runs = [replace(req, backend=b, report_dir=req.report_dir / b) for b in backends]
    for one in runs:
        validate(one)
    codes = [run(one) for one in runs]
    merged = req.report_dir / "allure-results"
    if merged.exists():
        shutil.rmtree(merged)
    by_backend = {}
    for one in runs:
        cmp.merge_into(merged, one.backend, one.report_dir / "allure-results")
        by_backend[one.backend] = cmp.verdicts(cmp.load_results(one.report_dir / "allure-results"))
    rows = cmp.compare(by_backend)
    table = cmp.render_markdown(rows, backends)
    (req.report_dir / "backends.md").write_text(table)
    cmp.write_comparison_result(merged, rows, backends)
    html = report.build_report(req.report_dir, {**environment(req), "backend": " and ".join(backends)})
    print(table.splitlines()[-1])
    print(f"verdicts by backend: {req.report_dir / 'backends.md'}\nAllure report (both backends): {html}")
    return max(codes) or (1 if cmp.unexplained(rows) else 0)


def prepare_kind(req: RunRequest):  # type: ignore[no-untyped-def]
    """Engine, kind and node image before pytest starts, so a missing piece is one line
    (and not one error per test); returns the engine, stopped at the end if ours."""
    from clusters.kind import KindBackend
    from pvchaos.provider import Options

    backend = KindBackend.from_options(Options(backend="kind", k8s_version=req.k8s_version,
                                               feature_gates=req.feature_gates))
    backend.prepare()
    return backend.engine


def _run_and_report(req: RunRequest) -> int:
    from pvchaos import report

    results = req.report_dir / "allure-results"
    if results.exists():
        for old in results.iterdir():
            if old.is_file():
                old.unlink()
    results.mkdir(parents=True, exist_ok=True)
    report.restore_history(req.report_dir)
    started = time.monotonic()
    code = subprocess.call(pytest_argv(req), cwd=REPO_ROOT)
    elapsed = time.monotonic() - started
    report.write_environment(results, environment(req))
    report.write_categories(results)
    if req.profile:
        _certification(req, results)
    rows = report.summarize(results)
    print(report.format_summary(rows))
    print(f"suites wall time: {elapsed:.1f}s")
    report.write_summary_md(req.report_dir, rows)
    html = report.generate_html(req.report_dir)
    report.save_history(req.report_dir)
    print(f"Allure report: {html}\nJUnit XML: {req.report_dir / 'junit.xml'}")
    return code


def _certification(req: RunRequest, results: Path) -> None:
    """For a driver run: the certification page, in the report and as Markdown."""
    from pvchaos.certification import render_certification, results_from_allure, write_allure_summary
    from pvchaos.profiles import load_profile

    profile = load_profile(req.profile or "")
    outcomes = results_from_allure(results)
    write_allure_summary(results, profile, outcomes)
    page = req.report_dir / "certification.md"
    page.write_text(render_certification(profile, outcomes))
    print(f"certification summary: {page}")


def environment(req: RunRequest) -> dict[str, str]:
    from tools.versions import DEFAULT_K8S_VERSION

    env = {
        "backend": req.backend,
        "kubernetes": req.k8s_version or (DEFAULT_K8S_VERSION if req.backend == "local" else "cluster's own"),
        "feature gates": req.feature_gates or ("MutablePVNodeAffinity=true (local default)"
                                               if req.backend == "local" else "as the cluster has them"),
        "zones": "zone-a,zone-b,zone-c" if req.backend == "local" else "discovered",
        "workers": req.workers,
        "driver profile": req.profile or "none (harness zonal test driver)",
    }
    if req.profile:
        from pvchaos.profiles import load_profile

        profile = load_profile(req.profile)
        env["driver"] = profile.name
        env["driver capabilities"] = ", ".join(f"{k}={str(v).lower()}" for k, v in sorted(profile.capabilities.items()))
    return env

"""`pvchaos run`: check the request, build binaries, run the suites in parallel, report.

Input is validated before anything starts (unknown suites, an unwritable report
directory, more workers than the machine can hold clusters for), so a mistake costs
one line and no cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from pvchaos import compare_backends as cmp
from pvchaos import compare_runs, report, run_record, supervise, version_matrix
from pvchaos.certification import (
    render_certification,
    results_from_allure,
    write_allure_summary,
)
from pvchaos.clusters import providers
from pvchaos.clusters.common.gates import MUTABLE_PV_GATE, built_gate_environment, built_gate_states
from pvchaos.clusters.local.registry import list_clusters, sweep_orphans
from pvchaos.clusters.options import REPO_ROOT as REPO_ROOT  # re-exported (bench, tests)
from pvchaos.clusters.options import Options, check_feature_gates, check_options
from pvchaos.clusters.options import pytest_flags as _pytest_flags
from pvchaos.clusters.provider import Feature
from pvchaos.conformance import feature_gates
from pvchaos.drivers.profile import load_profile
from pvchaos.results import merge_into
from pvchaos.run_config import RunConfig, available_memory_mib, resolve, scale_problem  # the plugin refuses the same input
from pvchaos.shard import parse_shard
from pvchaos.tools.build import ensure_binaries, served_releases
from pvchaos.tools.shipped import builtin_suites, checkout_root, suites_dir
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

SUITES_DIR = suites_dir()  # the checkout's suites/, or the copy an installed wheel carries
CLUSTER_MEMORY_MIB = 1100  # a default cluster's resident memory plus headroom (docs/findings.md)
T = TypeVar("T")
RunRequest = Options  # what `pvchaos run` was asked: the one option schema (clusters.options)


class UsageError(ValueError):
    """Bad input to `pvchaos run`; the message is the one line the user sees."""


def known_suites() -> list[str]:
    return builtin_suites()


def effective_workers(req: Options) -> int:
    """`auto` is one worker per core on local clusters, and one for a single kind/existing cluster."""
    if not providers.has(req.backend, Feature.CLUSTER_PER_REQUEST) and req.workers == "auto":
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


def validate(req: Options) -> RunConfig:
    """Raise UsageError with one line for anything wrong, before any cluster starts; the
    options resolved (run_config.resolve: topology, gates, version, profile, scale shape)."""
    try:
        check_options(req)  # each option's own check, as the command line applies it
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    unknown = [s for s in req.suites if s not in known_suites()]
    if unknown:
        raise UsageError(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(known_suites()) or 'none'}")
    for path in req.paths:
        if not Path(path).exists():
            raise UsageError(f"{path}: no such file or directory (PATH takes your own suite files or directories)")
    if not req.paths and not known_suites():
        raise UsageError(f"no built-in suites in {SUITES_DIR} (this pvchaos was installed without them): "
                         "give your own, `pvchaos run PATH...`")
    n = worker_count(req.workers)
    one_cluster = req.backend in providers.names() and not providers.has(req.backend, Feature.CLUSTER_PER_REQUEST)
    if one_cluster and n > 1 and req.workers != "auto":
        raise UsageError(f"--workers {n}: backend {req.backend} has one cluster; use --workers 1")
    if req.profile and not Path(req.profile).is_file():
        raise UsageError(f"--profile {req.profile}: no such file")
    try:
        config = resolve(req)  # parsed once; a typo or an impossible value is one line, before any cluster
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if providers.has(req.backend, Feature.HOST_PROCESSES):
        fits = max(1, available_memory_mib() // (2 * CLUSTER_MEMORY_MIB))
        if n > fits:
            raise UsageError(f"--workers {n}: this machine has memory for about {fits} workers' local clusters "
                             f"({available_memory_mib()} MiB available, ~{2 * CLUSTER_MEMORY_MIB} MiB each)")
    if req.scale or "scale" in req.suites:
        if problem := scale_problem(req, available_memory_mib()):
            raise UsageError(problem)
    if req.backend in providers.names() and (problem := providers.provider(req.backend).problem(req)):
        raise UsageError(problem)
    if req.kubeconfig and not Path(req.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {req.kubeconfig}: no such file")
    problem = unwritable(req.report_dir)
    if problem:
        raise UsageError(f"--report-dir {req.report_dir}: cannot write there ({problem})")
    if req.shard:
        try:
            parse_shard(req.shard)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return config


def check_gates(req: Options) -> None:
    """Each --feature-gates name is known to the local clusters' version (needs its binaries)."""
    if providers.has(req.backend, Feature.HOST_PROCESSES) and req.feature_gates:
        try:
            check_feature_gates(req.feature_gates, req.k8s_version or DEFAULT_K8S_VERSION)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def unwritable(directory: Path) -> str | None:
    """Why a report could not be written to `directory`, or None; creates nothing, so a
    refused run leaves no empty report directory behind."""
    probe = directory
    while not probe.exists():
        if probe.parent == probe:
            return "no existing parent"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


def suite_targets(req: Options) -> list[str]:
    """What pytest collects: the named built-in suites, the user's PATHs (absolute, so
    the working directory does not matter), or every built-in suite when neither is given."""
    builtin = [str(SUITES_DIR / f"test_{s}.py") for s in req.suites]
    own = [str(Path(p).resolve()) for p in req.paths]
    return builtin + own or [str(SUITES_DIR)]


def working_directory(req: Options) -> Path:
    """Where pytest runs: the checkout for built-in suites (its conftest.py and
    pyproject.toml), the current directory for a user's own (their pytest.ini, conftest)
    and for an installed pvchaos (its suites carry their own pytest.ini)."""
    checkout = checkout_root()
    return Path.cwd() if (req.paths and not req.suites) or checkout is None else checkout


def pytest_argv(req: Options) -> list[str]:
    """The pytest command line for a request (pure, so it can be tested)."""
    lay = report.layout(req.report_dir)
    targets = suite_targets(req)
    argv = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-rfEs",
            f"--alluredir={lay.results}", f"--junitxml={lay.junit}", f"--backend={req.backend}",
            "--no-pvchaos-summary"]  # run prints the table itself, from the Allure results
    n = effective_workers(req)
    if n > 0:
        argv += ["-n", str(n), "--dist", "loadgroup"]
    if req.keyword:
        argv += ["-k", req.keyword]
    from_schema = [a for a in _pytest_flags(req) if not a.startswith("--backend=")]
    if "scale" in req.suites and not req.scale:  # asking for the scale suite by name is asking for it
        from_schema.append("--scale")
    from_schema.append(f"--selection-record={req.report_dir / run_record.SELECTION_FILE}")  # for run.json
    if req.shard:  # the split balanced by this report directory's history (CI: the previous night's)
        from_schema.append(f"--shard-durations={lay.history}")
    return argv + from_schema + list(req.pytest_args)


def run(req: Options) -> int:
    """The main job; returns pytest's exit code (non-zero when anything failed), or
    128 + the signal's number when a signal stopped it."""
    config = validate(req)
    for line in config.profile.warnings if config.profile else ():  # what upstream would pass over silently
        print(f"[pvchaos] warning: {line}", file=sys.stderr)
    backend = providers.provider(req.backend)
    stop = backend.prepare(req)  # built or started before pytest, so a missing piece is one line
    try:
        check_gates(req)
        return _run_and_report(req)
    finally:
        if stop is not None:
            stop()


def backends_of(text: str) -> list[str]:
    """`local,kind` -> ["local", "kind"]; an unknown or repeated name is refused."""
    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in providers.names()]
    if not names or unknown or len(set(names)) != len(names):
        raise UsageError(f"--backend {text!r}: give one or more of {', '.join(providers.names())}, "
                         "comma-separated, each once")
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
    codes = []
    for one in runs:
        codes.append(run(one))
        if codes[-1] in STOPPED_CODES:  # a signal stops the whole comparison, not one backend
            return codes[-1]
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


def run_request(req: Options) -> int:
    """`pvchaos run`: one run, or the same suites on several backends or several versions."""
    if "," in req.k8s_version:
        if "," in req.backend:
            raise UsageError("--backend and --k8s-version both list several: compare backends or versions, "
                             "one dimension per run")
        return run_versions(req)
    return run_backends(req)


def run_versions(req: Options) -> int:
    """The suites on each version in ascending order (each with a full report of its own
    under <report dir>/<version>/), then one report with every version, the test x version
    table and the behaviour changes between adjacent versions (<report dir>/versions.md)."""
    if not providers.has(req.backend, Feature.HOST_PROCESSES):
        raise UsageError(f"--k8s-version {req.k8s_version}: several versions need the local backend, which builds "
                         f"each; a {req.backend} cluster has the version it has")
    try:
        wanted = version_matrix.parse_versions(req.k8s_version)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    served = served_releases()
    missing = version_matrix.unserved(wanted, served)
    if missing:
        raise UsageError(f"--k8s-version: {', '.join(missing)} not served by the Go module proxy; "
                         f"served: {', '.join(served)}")
    runs = [replace(req, k8s_version=v, report_dir=req.report_dir / v) for v in wanted]
    for one in runs:
        validate(one)
    for n, version in enumerate(wanted, 1):  # every build before any suite: a failed build costs no run
        print(f"[pvchaos] matrix: binaries of {version} ({n}/{len(wanted)})", file=sys.stderr, flush=True)
        ensure_binaries(version)
    codes = []
    for n, one in enumerate(runs, 1):
        print(f"[pvchaos] matrix: suites on {one.k8s_version} ({n}/{len(runs)})", file=sys.stderr, flush=True)
        codes.append(run(one))
        if codes[-1] in STOPPED_CODES:
            return codes[-1]
    unexplained = report_versions(req, wanted)
    return max(codes) or (1 if unexplained else 0)


def report_versions(req: Options, wanted: list[str]) -> int:
    """The matrix report from the version runs under <report dir>/<version>/: merged
    results, versions.md and the HTML report; returns the number of unexplained verdict
    or message changes. Separate from the runs, so a report can be made again after the
    explanations change (`python -c` on existing run directories)."""
    loaded = [compare_runs.load_run(req.report_dir / v, v) for v in wanted]
    steps = version_matrix.steps(loaded)
    table = version_matrix.render_markdown(loaded, steps, {v: built_gate_states(v) for v in wanted})
    merged = report.layout(req.report_dir).results
    if merged.exists():
        shutil.rmtree(merged)
    for version in wanted:
        merge_into(merged, version, report.layout(req.report_dir / version).results, dimension="kubernetes")
    version_matrix.write_results(merged, steps, table)
    (req.report_dir / "versions.md").write_text(table, encoding="utf-8")
    env = {**environment(replace(req, k8s_version=wanted[0])), "kubernetes": ", ".join(wanted)}
    html = report.build_report(req.report_dir, env, categories=[version_matrix.CATEGORY])
    print(table.split("## Feature gates")[0].rstrip().splitlines()[-1])
    print(f"test x version table and behaviour changes: {req.report_dir / 'versions.md'}\n"
          f"Allure report (every version): {html}")
    return len(version_matrix.unexplained_behaviour(steps))


REPORT_LOST = 2  # pytest ran, but its report could not be written (pytest's own code wins when non-zero)


def os_error_text(exc: OSError) -> str:
    """An OSError as people read it: what failed and on which path, no errno number."""
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def _kept(lost: list[str], what: str, write: Callable[[], T]) -> T | None:
    """One step of writing the report; an OSError (the directory became unwritable, the
    disk filled) is noted in ``lost`` and the next step still runs."""
    try:
        return write()
    except OSError as exc:
        lost.append(f"{what}: {os_error_text(exc)}")
        return None


def _run_and_report(req: Options) -> int:
    lay = report.layout(req.report_dir)
    host = providers.has(req.backend, Feature.HOST_PROCESSES)
    if host:
        _sweep("before the run")
    if lay.results.exists():
        for old in lay.results.iterdir():
            if old.is_file():
                old.unlink()
    lay.results.mkdir(parents=True, exist_ok=True)
    (req.report_dir / run_record.SELECTION_FILE).unlink(missing_ok=True)
    outcome = supervise.run_owned(pytest_argv(req), working_directory(req))
    lost: list[str] = []  # report parts that could not be written: said in one line at the end
    _kept(lost, "run.json", lambda: _record_run(req, interrupted=outcome.interrupted_by is not None))
    left = _sweep("after the run") if host else []
    supervise.reap_zombie_children()  # cluster processes of a killed worker were reparented to us
    env = environment(req)
    note = None
    if outcome.interrupted_by is not None:
        note = interrupted_note(outcome)
        env["interrupted"] = note
        name = supervise.signal_name(outcome.interrupted_by)
        _kept(lost, "the interrupted run's marks", lambda: _mark_interrupted(lay.results, name))
    if req.profile:
        _kept(lost, "certification.md", lambda: _certification(req, lay.results))
    html = _kept(lost, "the Allure report", lambda: report.build_report(lay.root, env, note=note))
    summary = _kept(lost, "the summary", lambda: report.format_summary(report.summarize(lay.results)))
    print(summary if summary is not None else "no results could be read back: pytest's own lines above are "
                                              "the report of what ran")
    ran = _kept(lost, "what ran", lambda: report.what_ran(lay.results))
    for warning in ran.warnings if ran else []:  # a flag behind the harness's back, said once
        print(f"warning: {warning}")
    time_rows, wall = report.time_from_junit(lay.junit)
    if time_rows:  # where the suites' time went (cluster starts, Kubernetes timers, harness waits, bodies)
        print(report.format_time_spent(time_rows, wall))
    print(f"suites wall time: {outcome.seconds:.1f}s")
    if html is not None:
        print(f"Allure report: {html}\nJUnit XML: {lay.junit}", flush=True)
    if lost:
        print(f"pvchaos: the run finished (pytest exit {outcome.returncode}), but {req.report_dir} took no report: "
              + "; ".join(lost), file=sys.stderr, flush=True)
    if outcome.interrupted_by is None:
        return outcome.returncode or (REPORT_LOST if lost else 0)
    print(stopped_line(outcome, left, remaining_clusters()), file=sys.stderr)
    return supervise.exit_code_for(outcome.interrupted_by)


def _mark_interrupted(results: Path, name: str) -> None:
    report.write_executor(results, f"pvchaos run (interrupted by {name})")
    report.mark_unfinished(results, f"interrupted by {name} before it finished: no verdict")


def _record_run(req: Options, interrupted: bool) -> None:
    """run.json: what this report directory is a report of, so `pvchaos report merge` can
    refuse reports of different test sets or pvchaos versions (pvchaos/run_record.py)."""
    default = DEFAULT_K8S_VERSION if providers.has(req.backend, Feature.HOST_PROCESSES) else ""
    record = run_record.build(
        backend=req.backend, kubernetes=req.k8s_version or default,
        shard=req.shard, selection=run_record.read_selection(req.report_dir), suites=req.suites,
        keyword=req.keyword, interrupted=interrupted, commit=run_record.source_commit())
    run_record.write(req.report_dir, record)


STOPPED_CODES = (supervise.exit_code_for(signal.SIGINT), supervise.exit_code_for(signal.SIGTERM))


def interrupted_note(outcome: supervise.Outcome) -> str:
    """What the report says about a stopped run (pure)."""
    name = supervise.signal_name(outcome.interrupted_by or 0)
    how = "; teardown cut short by SIGKILL" if outcome.killed else ""
    return (f"interrupted by {name} after {outcome.seconds:.0f}s{how}: "
            "the results cover only the tests that ran")


def stopped_line(outcome: supervise.Outcome, swept: list[str], remaining: list[str]) -> str:
    """The one line an interrupted run ends with; it claims only what was checked (pure)."""
    name = supervise.signal_name(outcome.interrupted_by or 0)
    how = " (SIGKILLed after the teardown bound)" if outcome.killed else ""
    if outcome.stop_seconds is not None:
        how += f" {outcome.stop_seconds:.1f}s after the signal"
    cleaned = f"; removed leftover cluster(s) {', '.join(swept)}" if swept else ""
    if remaining:
        return (f"pvchaos: interrupted by {name}: pytest stopped{how}{cleaned}; still present: "
                f"{', '.join(remaining)} (pvchaos cluster down --all)")
    return f"pvchaos: interrupted by {name}: pytest and every cluster it started are stopped{how}{cleaned}"


def _sweep(when: str) -> list[str]:
    """Remove local clusters whose run died without tearing down, and say so on the terminal."""
    try:
        removed = sweep_orphans()
    except RuntimeError as exc:
        print(f"[pvchaos] orphan sweep {when}: {exc}", file=sys.stderr)
        return []
    if removed:
        print(f"[pvchaos] removed orphaned cluster(s) {when}: {', '.join(removed)}", file=sys.stderr)
    return removed


def remaining_clusters() -> list[str]:
    """Local clusters that belong to no live run and were not detached (none, normally)."""
    return [s.name for s in list_clusters() if not s.detached and not s.owner_alive()]


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
    config = resolve(req)
    local = providers.has(req.backend, Feature.HOST_PROCESSES)  # the options describe the cluster
    env = {
        "backend": req.backend,
        "kubernetes": req.k8s_version or (DEFAULT_K8S_VERSION if local else "cluster's own"),
        "feature gates": req.feature_gates or ("MutablePVNodeAffinity=true (local default)"
                                               if local else "as the cluster has them"),
        "zones": ",".join(config.topology.zones) if local else "discovered",
        "workers": req.workers,
        "driver profile": req.profile or "none (harness zonal test driver)",
    }
    if (profile := config.profile) is not None:
        env["driver"] = profile.name
        env["driver capabilities"] = ", ".join(f"{k}={str(v).lower()}" for k, v in sorted(profile.capabilities.items()))
        if profile.warnings:
            env["driver profile warnings"] = " | ".join(profile.warnings)
    if local:  # the gate the suites are about, as this run's own kube-apiserver describes it
        env.update(built_gate_environment(str(env["kubernetes"]), [MUTABLE_PV_GATE]))
    return {**env, **feature_gates.environment()}  # each gate the suites depend on, per version

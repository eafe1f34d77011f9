"""Two shards of a run, started at once and merged, give the verdicts and counts of one
unsharded run of the same selection: the steps of the nightly workflow
(.github/workflows/nightly.yml), here on one machine in separate processes.

Each run has its own PVCHAOS_STATE_DIR, so "no cluster left" means none of these runs'.
PVCHAOS_BREAK_SPLIT=1 loads tests/cluster/broken_split.py into the shards (a split that
drops one test), to see this test fail when the split is broken. The unsharded run is the
reference and must be a healthy one (exit 0, every test passed or skipped, some passed):
two runs that fail alike agree too, and prove nothing. PVCHAOS_BREAK=<breakage> loads
tests/selfcheck/broken_cluster.py into all three runs, to see that fail this test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pvchaos import report, run_record
from pvchaos.compare_backends import verdicts
from pvchaos.tools.build import REPO_ROOT, ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

pytestmark = pytest.mark.slow  # three real runs of a small selection: a few minutes
SELECTION = ["--suites", "reclaim,static_binding", "--workers", "1"]
RUN_TIMEOUT = 1500


def _start(report_dir: Path, state: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PVCHAOS_STATE_DIR": str(state)}
    plugins = ["tests.cluster.broken_split"] if os.environ.get("PVCHAOS_BREAK_SPLIT") == "1" and extra else []
    if os.environ.get("PVCHAOS_BREAK"):
        plugins.append("tests.selfcheck.broken_cluster")
    pytest_args = ["--", *[a for p in plugins for a in ("-p", p)]] if plugins else []
    cmd = [str(REPO_ROOT / "bin" / "pvchaos"), "run", *SELECTION, *extra, "--report-dir", str(report_dir), *pytest_args]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    return proc.returncode, out


def _counts(report_dir: Path) -> dict[str, tuple[int, int, int, int]]:
    return {r.suite: (r.passed, r.failed, r.broken, r.skipped)
            for r in report.summarize(report.layout(report_dir).results)}


def _failures(results: list[dict[str, object]]) -> str:
    """The first failure messages, so a mismatch says why a test failed."""
    failed = [f"{r.get('name')}: {str((r.get('statusDetails') or {}).get('message', ''))[:400]}"  # type: ignore[union-attr]
              for r in results if r.get("status") in ("failed", "broken")]
    return "\n".join(failed[:3])


def test_two_shards_merged_equal_one_unsharded_run(tmp_path: Path) -> None:
    ensure_binaries(DEFAULT_K8S_VERSION)
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    # The unsharded run needs nothing of the shards': all three start at once (one worker
    # each, like a `-n 3` run), so the test takes one run's time rather than two.
    procs = [_start(d, tmp_path / f"state-{k}", "--shard", f"{k}/2") for k, d in enumerate(shards, 1)]
    whole_proc = _start(tmp_path / "whole", tmp_path / "state-0")
    shard_runs = [_finish(p) for p in procs]
    whole_code, whole_out = _finish(whole_proc)
    for code, out in shard_runs:
        assert code in (0, 1), out[-3000:]
    whole = report.load_results(report.layout(tmp_path / "whole").results)
    passed = [r for r in whole if r.get("status") == "passed"]
    bad = [r for r in whole if r.get("status") not in ("passed", "skipped")]
    assert whole_code == 0 and passed and not bad, (
        f"the unsharded reference run must pass (exit {whole_code}, {len(passed)} passed, {len(bad)} not): two runs "
        f"that fail alike prove nothing\n{_failures(whole)}\n{whole_out[-2000:]}")

    records = [run_record.read(d) for d in shards]
    assert records[0].fingerprint == records[1].fingerprint == run_record.read(tmp_path / "whole").fingerprint
    assert all(r.tests for r in records), "each shard ran part of the selection"

    merge = subprocess.run([str(REPO_ROOT / "bin" / "pvchaos"), "report", "merge", str(tmp_path / "merged"),
                            *map(str, shards)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert merge.returncode in (0, 1), merge.stdout[-2000:] + merge.stderr[-2000:]
    merged = report.layout(tmp_path / "merged")
    assert (merged.html / "index.html").is_file()

    assert verdicts(report.load_results(merged.results)) == verdicts(whole), merge.stdout + merge.stderr + _failures(
        report.load_results(merged.results) + whole)
    assert _counts(tmp_path / "merged") == _counts(tmp_path / "whole")
    assert merge.returncode == whole_code, merge.stdout + merge.stderr
    for k in range(3):
        state = tmp_path / f"state-{k}"
        left = [d.name for d in state.iterdir() if (d / "state.json").exists()] if state.is_dir() else []
        assert not left, f"clusters left by run {k}: {left}"


def test_shards_share_one_existing_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """N jobs pointed at one staging cluster: two shards at once against one cluster they
    did not create (`--backend existing`). Names carry the shard (s1-, s2-), so neither
    trips over the other's objects or invariants: both pass, and the merge is complete."""
    from pvchaos.clusters.local.cluster import LocalCluster
    from pvchaos.clusters.local.config import LocalClusterConfig

    ensure_binaries(DEFAULT_K8S_VERSION)
    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(tmp_path / "shared-state"))
    cluster = LocalCluster(LocalClusterConfig(name="shared"))
    try:
        kubeconfig = cluster.up().kubeconfig
        shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
        procs = [_start(d, tmp_path / f"state-{k}", "--backend", "existing", "--kubeconfig", str(kubeconfig),
                        "--shard", f"{k}/2") for k, d in enumerate(shards, 1)]
        runs = [_finish(p) for p in procs]
    finally:
        cluster.down()
    for code, out in runs:
        assert code == 0, out[-3000:]
    for d in shards:
        results = report.load_results(report.layout(d).results)
        assert any(r.get("status") == "passed" for r in results), _failures(results)
    merge = subprocess.run([str(REPO_ROOT / "bin" / "pvchaos"), "report", "merge", str(tmp_path / "merged"),
                            *map(str, shards), "--no-html"], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=600, check=False)
    assert merge.returncode == 0, merge.stdout[-2000:] + merge.stderr[-2000:]

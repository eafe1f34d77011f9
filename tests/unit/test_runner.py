"""`pvchaos run` input checks and the pytest command line it builds (no cluster needed)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pvchaos import runner
from pvchaos.cli import parse as cli_parse
from pvchaos.clusters import options
from pvchaos.runner import RunRequest, UsageError
from pvchaos.tools import feature_gates as tools_gates

ROOT = Path(__file__).resolve().parents[2]


def test_known_suites_are_the_suite_files() -> None:
    names = runner.known_suites()
    assert "static_binding" in names and "pv_affinity_mutation" in names
    assert all((ROOT / "suites" / f"test_{n}.py").is_file() for n in names)


def test_unknown_suite_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        runner.validate(RunRequest(suites=("static_bindng",), report_dir=tmp_path))
    text = str(err.value)
    assert "static_bindng" in text and "static_binding" in text and "\n" not in text


def test_unwritable_report_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="--report-dir"):
        runner.validate(RunRequest(report_dir=blocker / "reports"))


def test_too_many_workers_for_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "available_memory_mib", lambda: 4000)
    with pytest.raises(UsageError, match="memory for about 1 workers"):
        runner.validate(RunRequest(workers="4", report_dir=tmp_path))
    runner.validate(RunRequest(workers="1", report_dir=tmp_path))


@pytest.mark.parametrize("text", ["many", "-1"])
def test_bad_worker_counts(text: str) -> None:
    with pytest.raises(UsageError):
        runner.worker_count(text)


def test_pytest_argv_carries_every_option(tmp_path: Path) -> None:
    req = RunRequest(suites=("reclaim",), keyword="retain", workers="2", k8s_version="v1.36.3",
                     report_dir=tmp_path, allow_disruptive=True, allow_contexts=("lab",),
                     pytest_args=("--maxfail=1",))
    argv = runner.pytest_argv(req)
    assert argv[argv.index("-n") + 1] == "2" and "--dist" in argv
    assert str(ROOT / "suites" / "test_reclaim.py") in argv
    assert f"--alluredir={tmp_path / 'allure-results'}" in argv and f"--junitxml={tmp_path / 'junit.xml'}" in argv
    assert argv[argv.index("-k") + 1] == "retain"
    assert {"--k8s-version=v1.36.3", "--allow-disruptive", "--allow-context=lab"} <= set(argv)
    assert argv[-1] == "--maxfail=1"
    assert "-n" not in runner.pytest_argv(RunRequest(workers="0", report_dir=tmp_path))


def test_cli_bad_input_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    env = dict(os.environ, PVCHAOS_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "pvchaos", "run", "--suites", "nope", "--report-dir",
                           str(tmp_path / "r")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "unknown suite" in done.stderr
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


def test_single_cluster_backends_run_one_worker(tmp_path: Path) -> None:
    argv = runner.pytest_argv(RunRequest(backend="kind", report_dir=tmp_path))
    assert argv[argv.index("-n") + 1] == "1"
    with pytest.raises(UsageError, match="one cluster"):
        runner.validate(RunRequest(backend="kind", workers="2", report_dir=tmp_path))


def test_options_round_trip_through_the_pytest_argv(tmp_path: Path) -> None:
    """One schema: what `pvchaos run` was told reaches the plugin unchanged."""
    for name in ("p.yaml", "kc"):
        (tmp_path / name).write_text("x")
    sent = runner.RunRequest(zones="zone-x,zone-y", nodes_per_zone=3, feature_gates="A=true", keep_cluster=True,
                             allow_disruptive=True, allow_contexts=("lab", "ci"), profile=str(tmp_path / "p.yaml"),
                             kubeconfig=str(tmp_path / "kc"), context="ctx", k8s_version="v1.36.3", report_dir=tmp_path)
    parser = argparse.ArgumentParser()
    options.add_options(parser.add_argument, pytest_side=True)
    parsed, _ = parser.parse_known_args(runner.pytest_argv(sent)[3:])
    got = options.from_values(vars(parsed).get, pytest_side=True)
    for f in dataclasses.fields(options.Options):
        if f.metadata.get("pytest"):
            assert getattr(got, f.name) == getattr(sent, f.name), f.name


def test_run_command_line_has_every_option() -> None:
    args = cli_parse(["run", "--zones", "zone-a,zone-b", "--suites", "reclaim,spreading",
                      "--allow-context", "lab", "--", "--maxfail=1"])
    got = options.from_values(vars(args).get, pytest_side=False)
    assert (got.zones, got.suites, got.allow_contexts, got.pytest_args, got.paths) == (
        "zone-a,zone-b", ("reclaim", "spreading"), ("lab",), ("--maxfail=1",), ())


def test_run_takes_paths_before_and_after_options_and_keeps_pytest_args_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "test_x.py").write_text("")
    monkeypatch.chdir(tmp_path)
    args = cli_parse(["run", "./tests", "more/test_x.py", "--zones", "2", "--", "-x", "./not-a-path"])
    got = options.from_values(vars(args).get, pytest_side=False)
    assert (got.paths, got.zones, got.pytest_args) == (("./tests", "more/test_x.py"), "2", ("-x", "./not-a-path"))


def test_paths_alone_run_only_them_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = tmp_path / "tests"
    suite.mkdir()
    monkeypatch.chdir(tmp_path)
    req = runner.RunRequest(paths=("tests",), report_dir=tmp_path / "r")
    runner.validate(req)
    assert runner.suite_targets(req) == [str(suite)]
    assert runner.working_directory(req) == tmp_path
    both = runner.RunRequest(paths=("tests",), suites=("reclaim",), report_dir=tmp_path / "r")
    assert runner.suite_targets(both) == [str(runner.SUITES_DIR / "test_reclaim.py"), str(suite)]
    assert runner.working_directory(both) == runner.REPO_ROOT
    assert "--no-pvchaos-summary" in runner.pytest_argv(req), "run prints the table itself"


def test_a_missing_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(runner.UsageError, match=r"nope: no such file or directory"):
        runner.validate(runner.RunRequest(paths=(str(tmp_path / "nope"),), report_dir=tmp_path / "r"))


def test_report_environment_names_the_zones_asked_for(tmp_path: Path) -> None:
    env = runner.environment(runner.RunRequest(zones="east,west", report_dir=tmp_path))
    assert env["zones"] == "east,west"


def test_report_environment_has_each_gate_the_suites_depend_on(tmp_path: Path) -> None:
    env = runner.environment(runner.RunRequest(report_dir=tmp_path))
    assert env["gate MutablePVNodeAffinity"] == (
        "v1.34.4 absent; v1.35.4 alpha, off; v1.36.3 alpha, off; v1.37.2 alpha, off; v1.38.0-beta.0 alpha, off")
    assert {k for k in env if k.startswith("gate ")} == {f"gate {g}" for g in tools_gates.GATES}

"""Signals to `pvchaos run` and its pytest processes, and option checks before anything
is written (pure parts and small processes; the real runs are in tests/cluster/test_run_signals.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pvchaos import cli, runner, supervise
from pvchaos.clusters.options import check_feature_gates
from pvchaos.plugin import interrupts
from pvchaos.runner import RunRequest
from pvchaos.tools.gates import parse_gate_list

ROOT = Path(__file__).resolve().parents[2]
HELP = """      --feature-gates colonSeparatedMultimapStringString   Comma-separated list of component:key=value pairs
                Options are:
                kube:APIResponseCompression=true|false (BETA - default=true)
                kube:AllAlpha=true|false (ALPHA - default=false)
                kube:MutablePVNodeAffinity=true|false (ALPHA - default=false)
                OldStyleGate=true|false (BETA - default=true)
      --goaway-chance float
"""
KNOWN = parse_gate_list(HELP)


def test_gate_list_is_read_from_apiserver_help() -> None:
    assert KNOWN == {"APIResponseCompression", "AllAlpha", "MutablePVNodeAffinity", "OldStyleGate"}


@pytest.mark.parametrize("text", ["Foo", "Foo=yes", "=true", "Foo=true,Bar"])
def test_malformed_gates_are_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="is not NAME=true|false") as err:
        check_feature_gates(text, "v1.35.4", known=lambda v: KNOWN)
    assert "\n" not in str(err.value)


def test_unknown_gate_names_the_version_and_a_close_match() -> None:
    with pytest.raises(ValueError) as err:
        check_feature_gates("MutablePVNodeAfinity=true", "v1.35.4", known=lambda v: KNOWN)
    text = str(err.value)
    assert "MutablePVNodeAfinity" in text and "v1.35.4" in text and "did you mean MutablePVNodeAffinity" in text


def test_known_gates_pass_and_no_gates_need_no_binary() -> None:
    assert check_feature_gates("MutablePVNodeAffinity=false", "v1.35.4", known=lambda v: KNOWN) == {
        "MutablePVNodeAffinity": False}
    assert check_feature_gates("", "v1.35.4", known=lambda v: pytest.fail("no gates: nothing to look up")) == {}


def test_validate_creates_no_report_directory(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "reports"
    runner.validate(RunRequest(report_dir=target, workers="0"))
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(("flags", "needle"), [
    (["--feature-gates", "Foo"], "--feature-gates"),
    (["--k8s-version", "1.35"], "not a Kubernetes release version"),
    (["--suites", "nope"], "unknown suite"),
])
def test_refused_run_is_one_line_exit_2_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str) -> None:
    reports = tmp_path / "reports"
    code = cli.main(["run", *flags, "--report-dir", str(reports), "--workers", "0"])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_unknown_gate_is_refused_after_the_build_and_before_any_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # no builds in a unit test: binaries, sidecars and the CSI driver (whose progress lines
    # would reach stderr whenever its source changed since the cached build)
    monkeypatch.setattr("pvchaos.clusters.local.provider.LocalProvider.prepare", lambda self, options: None)
    monkeypatch.setattr("pvchaos.clusters.common.gates.binary_gates", lambda version: KNOWN)
    monkeypatch.setattr(runner.supervise, "run_owned", lambda *a, **k: pytest.fail("pytest must not start"))
    code = cli.main(["run", "--feature-gates", "Foo=true", "--report-dir", str(tmp_path / "r"), "--workers", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "Foo: no such gate in Kubernetes" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_exit_codes_follow_the_shell_convention() -> None:
    assert supervise.exit_code_for(signal.SIGINT) == 130
    assert supervise.exit_code_for(signal.SIGTERM) == 143


def test_stopped_line_claims_only_what_was_checked() -> None:
    out = supervise.Outcome(returncode=2, seconds=4.2, signals=[signal.SIGTERM])
    clean = runner.stopped_line(out, swept=[], remaining=[])
    assert clean.startswith("pvchaos: interrupted by SIGTERM") and "every cluster it started are stopped" in clean
    dirty = runner.stopped_line(out, swept=["gw0-abc"], remaining=["gw1-def"])
    assert "stopped" in dirty and "still present: gw1-def" in dirty and "every cluster" not in dirty
    assert "removed leftover cluster(s) gw0-abc" in dirty
    assert runner.interrupted_note(out).startswith("interrupted by SIGTERM after 4s")


# -- the plugin's handlers --------------------------------------------------------------------

def _config(worker: bool, dsession: object | None = None) -> SimpleNamespace:
    cfg = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: dsession))
    if worker:
        cfg.workerinput = {}
    return cfg


def test_worker_stops_at_the_first_signal_and_ignores_its_copies() -> None:
    handler = interrupts._Handler(_config(worker=True))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, None)
    assert handler(signal.SIGTERM, None) is None and handler(signal.SIGINT, None) is None


def test_single_process_run_stops_at_the_first_signal() -> None:
    handler = interrupts._Handler(_config(worker=False))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        handler(signal.SIGTERM, None)


def test_xdist_controller_passes_the_first_signal_to_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(interrupts, "children_of", lambda pid: [111, 222])
    monkeypatch.setattr(interrupts.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    handler = interrupts._Handler(_config(worker=False, dsession=object()))  # type: ignore[arg-type]
    clock = [100.0]
    monkeypatch.setattr(interrupts.time, "monotonic", lambda: clock[0])
    assert handler(signal.SIGTERM, None) is None  # keeps listening until the workers report
    assert sent == [(111, signal.SIGTERM), (222, signal.SIGTERM)]
    clock[0] += 0.1
    assert handler(signal.SIGTERM, None) is None  # `timeout`'s copy to the process group
    assert len(sent) == 2
    clock[0] += 3
    with pytest.raises(KeyboardInterrupt):  # a second signal: stop now
        handler(signal.SIGINT, None)


def test_a_signal_is_a_repeat_only_after_a_pause() -> None:
    assert not supervise.is_repeat(None, 5.0)
    assert not supervise.is_repeat(5.0, 5.5)
    assert supervise.is_repeat(5.0, 7.5)


# -- run_owned in a real process: a stand-in runner whose child ignores nothing -------------

OWNER = """
import sys, pathlib
from pvchaos import supervise
child = [sys.executable, "-c", "import time, pathlib, os, signal; pathlib.Path(sys.argv[1]).write_text(str(os.getpid())); "
         "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.5), os._exit(7))); time.sleep(300)", sys.argv[1]]
child[2] = child[2].replace("sys.argv[1]", repr(sys.argv[1]))
out = supervise.run_owned(child[:3], pathlib.Path("."), teardown_seconds=float(sys.argv[2]))
print(out.returncode, out.signals, out.killed, flush=True)
"""


def _start_owner(tmp_path: Path, teardown: float = 10.0) -> tuple[subprocess.Popen[str], int]:
    pidfile = tmp_path / "child.pid"
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(pidfile), str(teardown)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not (pidfile.is_file() and pidfile.read_text()):
        assert time.monotonic() < deadline, "the owned child never started"
        time.sleep(0.05)
    return owner, int(pidfile.read_text())


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if ") Z " in stat:
            return True
        time.sleep(0.05)
    return False


def test_sigterm_to_the_owner_alone_reaches_the_child_and_waits_for_it(tmp_path: Path) -> None:
    owner, child = _start_owner(tmp_path)
    os.kill(owner.pid, signal.SIGTERM)
    out, _ = owner.communicate(timeout=20)
    assert out.split()[0] == "7" and "15" in out and out.split()[-1] == "False"  # the child's own exit, not a kill
    assert _gone(child, 1)


def test_two_signals_at_once_are_one_interrupt(tmp_path: Path) -> None:
    """`timeout` signals the runner and then its process group: no SIGKILL for that."""
    owner, child = _start_owner(tmp_path)
    os.kill(owner.pid, signal.SIGTERM)
    os.kill(owner.pid, signal.SIGTERM)
    out, _ = owner.communicate(timeout=20)
    assert out.split()[0] == "7" and out.split()[-1] == "False", out


def test_teardown_bound_ends_in_sigkill(tmp_path: Path) -> None:
    owner, child = _start_owner(tmp_path, teardown=0.1)  # the child needs 0.5 s; the bound is shorter
    os.kill(owner.pid, signal.SIGTERM)
    out, _ = owner.communicate(timeout=20)
    assert out.split()[0] == "-9" and out.split()[-1] == "True"
    assert _gone(child, 1)


def test_sigkill_to_the_owner_takes_the_child(tmp_path: Path) -> None:
    owner, child = _start_owner(tmp_path)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=5)
    assert _gone(child, 5), f"child {child} outlived its SIGKILLed owner"


def test_plugin_refuses_malformed_gates_once_not_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one(cluster):\n    pass\n")
    result = pytester.runpytest_inprocess("--feature-gates=Foo", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--feature-gates: 'Foo' is not NAME=true|false*"])


def test_tests_cut_short_get_the_reason_and_real_skips_keep_theirs(tmp_path: Path) -> None:
    import json

    from pvchaos import report
    (tmp_path / "a-result.json").write_text(json.dumps({"name": "cut", "status": "skipped"}))
    real = {"name": "skip", "status": "skipped", "statusDetails": {"message": "backend kind: no disruption"}}
    (tmp_path / "b-result.json").write_text(json.dumps(real))
    (tmp_path / "c-result.json").write_text(json.dumps({"name": "ok", "status": "passed"}))
    assert report.mark_unfinished(tmp_path, "interrupted by SIGTERM before it finished") == ["cut"]
    assert json.loads((tmp_path / "a-result.json").read_text())["statusDetails"]["message"].startswith("interrupted")
    assert json.loads((tmp_path / "b-result.json").read_text()) == real

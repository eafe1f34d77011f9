"""An OSError while `pvchaos run` writes its report (the report directory became
unwritable during the run, a full disk) ends in one line on stderr, the report of what
ran wherever it can still go (the terminal), and a non-zero exit: never a traceback
(issue #39). pytest itself is stubbed: the runner's own steps are what is tested."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pvchaos import cli, report, runner, supervise
from pvchaos.runner import RunRequest

RESULT = {"name": "test_demo", "fullName": "suites.test_demo#test_demo", "status": "passed", "uuid": "u1",
          "historyId": "h1", "start": 0, "stop": 1500, "labels": [{"name": "suite", "value": "test_demo"}]}


def _request(tmp_path: Path) -> RunRequest:
    return RunRequest(report_dir=tmp_path / "reports", workers="0", backend="existing")


def _stub_pytest(monkeypatch: pytest.MonkeyPatch, req: RunRequest, then: str, code: int = 0) -> None:
    """pytest "runs": one passed result, then the report directory breaks as ``then`` says."""
    def run_owned(argv: list[str], cwd: Path, **kw: object) -> supervise.Outcome:
        results = report.layout(req.report_dir).results
        (results / "u1-result.json").write_text(json.dumps(RESULT))
        if then == "file":  # the directory is gone, a file in its place: every write fails, root or not
            shutil.rmtree(req.report_dir)
            req.report_dir.write_text("")
        return supervise.Outcome(returncode=code, seconds=1.0)
    monkeypatch.setattr(runner.supervise, "run_owned", run_owned)


def _deny(*args: object, **kwargs: object) -> None:
    raise PermissionError(13, "Permission denied", "reports/allure-results/environment.properties")


def test_unwritable_report_is_one_line_the_summary_and_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    req = _request(tmp_path)
    _stub_pytest(monkeypatch, req, then="readonly")
    monkeypatch.setattr(runner.run_record, "write", _deny)  # readable, not writable (chmod means nothing to root)
    monkeypatch.setattr(runner.report, "build_report", _deny)
    code = runner._run_and_report(req)
    out, err = capsys.readouterr()
    assert code == runner.REPORT_LOST
    assert "test_demo" in out and "suites wall time" in out  # what ran, on the terminal
    assert "Allure report:" not in out  # no claim of a report that was not written
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "run.json: Permission denied" in err and "the Allure report: Permission denied" in err
    assert str(req.report_dir) in err


def test_a_failed_run_keeps_pytests_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    req = _request(tmp_path)
    _stub_pytest(monkeypatch, req, then="readonly", code=1)
    monkeypatch.setattr(runner.run_record, "write", _deny)
    monkeypatch.setattr(runner.report, "build_report", _deny)
    assert runner._run_and_report(req) == 1


def test_report_directory_replaced_by_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    req = _request(tmp_path)
    _stub_pytest(monkeypatch, req, then="file")
    code = runner._run_and_report(req)
    out, err = capsys.readouterr()
    assert code == runner.REPORT_LOST
    assert err.count("\n") == 1 and "Traceback" not in err and "run.json: Not a directory" in err
    assert "suites wall time" in out


def test_cli_turns_any_oserror_into_one_line(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def broken(req: object) -> int:
        raise OSError(28, "No space left on device", str(tmp_path / "reports" / "run.json"))
    monkeypatch.setattr(cli, "run_request", broken)
    code = cli.main(["run", "--report-dir", str(tmp_path / "reports"), "--workers", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err == f"pvchaos: run: No space left on device: {tmp_path / 'reports' / 'run.json'}\n"

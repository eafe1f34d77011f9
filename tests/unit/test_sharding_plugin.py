"""`--shard K/N` in the pytest plugin (pvchaos/plugin/sharding.py), in-process through
pytester: the shards of one selection run every test once, after `-k`; a group stays
together; a malformed value is a usage error; the selection record; names carry the shard."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SUITE = """
    import os
    import pytest

    @pytest.mark.parametrize("i", range(5))
    def test_plain(i):
        pass

    @pytest.mark.xdist_group("gate-off")
    def test_grouped_a():
        pass

    @pytest.mark.xdist_group("gate-off")
    def test_grouped_b():
        pass

    def test_named():
        from pvchaos.kube import naming
        print("NAME", naming.unique("sc"))
"""


def _passed(result: pytest.RunResult) -> set[str]:
    return {line.split("::", 1)[1].split(" ")[0] for line in result.outlines if " PASSED" in line}


def test_shards_cover_the_selection_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SUITE)
    whole = _passed(pytester.runpytest("-p", "no:cacheprovider", "-v"))
    parts = [_passed(pytester.runpytest("-p", "no:cacheprovider", "-v", f"--shard={k}/3")) for k in (1, 2, 3)]
    assert len(whole) == 8 and sorted(t for p in parts for t in p) == sorted(whole)
    assert sum({"test_grouped_a", "test_grouped_b"} <= p for p in parts) == 1  # the group in one shard


def test_shard_applies_after_k(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SUITE)
    parts = [_passed(pytester.runpytest("-p", "no:cacheprovider", "-v", "-k", "plain", f"--shard={k}/2"))
             for k in (1, 2)]
    assert sorted(t for p in parts for t in p) == [f"test_plain[{i}]" for i in range(5)]
    assert {len(p) for p in parts} == {2, 3}


@pytest.mark.parametrize("value", ["0/3", "4/3", "a/b"])
def test_malformed_shard_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(test_s=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--shard" in err and value in err, err


def test_selection_record_and_names(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the inner session is not an xdist worker
    pytester.makepyfile(test_s=SUITE)
    out = tmp_path / "selection.json"
    pytester.runpytest("-p", "no:cacheprovider", "-k", "named or plain", "--shard=2/2", f"--selection-record={out}")
    record = json.loads(out.read_text())
    assert record["shard"] == "2/2" and len(record["selected"]) == 6
    assert set(record["tests"]) < set(record["selected"]) and record["fingerprint"]
    named = pytester.runpytest("-p", "no:cacheprovider", "-s", "-k", "named", "--shard=1/1")
    assert "NAME pvchaos-s1-main-sc-" in named.stdout.str(), named.stdout.str()
    assert "PVCHAOS_SHARD" not in os.environ  # the in-process session restored the environment


@pytest.mark.parametrize("value", ["0/3", "4/3", "a/b"])
def test_run_refuses_a_malformed_shard_in_one_line(value: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before any build or cluster: `validate` is the first thing `run` does, and nothing is written."""
    from pvchaos.cli import main
    try:
        code = main(["run", "--suites", "reclaim", "--shard", value, "--report-dir", str(tmp_path / "r")])
    except SystemExit as exc:  # refused while parsing the command line
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "--shard" in err and value in err and "\n" not in err, err
    assert not (tmp_path / "r").exists()


def test_run_passes_the_shard_and_its_durations(tmp_path: Path) -> None:
    from pvchaos import runner
    argv = runner.pytest_argv(runner.RunRequest(shard="2/3", report_dir=tmp_path))
    assert "--shard=2/3" in argv and f"--shard-durations={tmp_path / 'history'}" in argv
    assert f"--selection-record={tmp_path / 'selection.json'}" in argv
    assert not any(a.startswith("--shard") for a in runner.pytest_argv(runner.RunRequest(report_dir=tmp_path)))


def test_xdist_workers_agree_on_the_split(pytester: pytest.Pytester) -> None:
    """Under xdist every worker collects and splits on its own; xdist refuses workers that
    collected different tests, so a run at -n 2 finishing with the shard's tests shows they agree."""
    pytester.makepyfile(test_s=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--shard=1/2", "-v")
    result.assert_outcomes(passed=4)

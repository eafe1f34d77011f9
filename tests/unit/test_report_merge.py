"""`pvchaos report merge` (pvchaos/report_merge.py): what may be merged (the pure plan),
the JUnit merge, and a merge of made-up shard directories without HTML (no Allure CLI)."""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pvchaos import report, run_record
from pvchaos.compare_backends import verdicts
from pvchaos.report_merge import MergeError, Source, merge, merge_junit, plan
from pvchaos.run_record import RunRecord
from pvchaos.shard import Case, fingerprint, split

SELECTED = tuple(f"test_reclaim::test_{i}" for i in range(5))
FAILING = "test_reclaim::test_3"


def _record(shard: str | None = None, tests: tuple[str, ...] = SELECTED, **kw: object) -> RunRecord:
    base = dict(pvchaos="0.1.0", commit="abc", backend="local", kubernetes="v1.35.4", shard=shard,
                fingerprint=fingerprint(SELECTED), selected=SELECTED, tests=tests, split_key="k")
    return RunRecord(**{**base, **kw})  # type: ignore[arg-type]


def _shards(total: int, **kw: object) -> list[Source]:
    parts = split([Case(t) for t in SELECTED], total)
    return [Source(Path(f"s{k}"), _record(f"{k}/{total}", tuple(p), **kw)) for k, p in enumerate(parts, 1)]


def test_plan_of_shards_is_one_group() -> None:
    got = plan(_shards(3))
    assert [len(g.sources) for g in got.groups] == [3] and not got.problems
    assert got.backends == ("local",) and got.versions == ("v1.35.4",)


def test_missing_shard_is_a_problem_not_a_refusal() -> None:
    got = plan(_shards(3)[:2])
    assert got.problems == ("local v1.35.4: shard(s) 3/3 missing",)


def test_a_test_no_shard_ran_is_a_problem() -> None:
    """A broken split that drops a test: every shard is there, yet a test never ran."""
    shards = _shards(2)
    dropped = Source(shards[1].directory, _record("2/2", shards[1].record.tests[1:]))
    assert "1 selected test(s) ran in no shard" in plan([shards[0], dropped]).problems[0]


@pytest.mark.parametrize("change, words", [
    (dict(pvchaos="0.2.0"), "different versions of pvchaos"),
    (dict(commit="def"), "different commits of pvchaos"),
    (dict(fingerprint="0" * 16), "different test selections"),
    (dict(fingerprint=None), "recorded no test selection"),
])
def test_refused_in_one_line(change: dict[str, object], words: str) -> None:
    shards = _shards(2)
    other = Source(shards[1].directory, _record("2/2", shards[1].record.tests, **change))
    with pytest.raises(MergeError, match=words) as err:
        plan([shards[0], other])
    assert "\n" not in str(err.value)


def test_refused_shard_mixes() -> None:
    one, two = _shards(2)
    with pytest.raises(MergeError, match="shard 1/2 twice"):
        plan([one, one])
    with pytest.raises(MergeError, match="different N"):
        plan([one, _shards(3)[1]])
    with pytest.raises(MergeError, match="whole run and other runs"):
        plan([one, Source(Path("whole"), _record())])
    with pytest.raises(MergeError, match="ran in two shards"):
        plan([one, Source(two.directory, _record("2/2", two.record.tests + one.record.tests[:1]))])
    with pytest.raises(MergeError, match="nothing to merge"):
        plan([])


def test_backends_and_versions_are_groups() -> None:
    sources = [Source(Path(f"{b}{v}"), _record(backend=b, kubernetes=v))
               for b in ("local", "kind") for v in ("v1.35.4", "v1.36.3")]
    got = plan(sources)
    assert got.backends == ("kind", "local") and got.versions == ("v1.35.4", "v1.36.3") and len(got.groups) == 4


def test_junit_merge_recounts() -> None:
    a = ET.fromstring('<testsuites><testsuite name="pytest" tests="2"><testcase classname="m" name="a" time="1.5"/>'
                      '<testcase classname="m" name="b" time="2"><failure message="x"/></testcase></testsuite></testsuites>')
    b = ET.fromstring('<testsuites><testsuite name="pytest"><testcase classname="m" name="c" time="0.5">'
                      '<skipped/></testcase></testsuite></testsuites>')
    suite = merge_junit([("", a), ("", b)]).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("errors"), suite.get("time")) == (
        "3", "1", "1", "0", "4.000")


# --- a merge of made-up report directories ----------------------------------------------------------

def _result(test: str) -> dict[str, object]:
    module, name = test.split("::")
    status = "failed" if test == FAILING else "passed"
    return {"uuid": str(uuid.uuid4()), "name": name, "fullName": f"suites.{module}#{name}", "status": status,
            "historyId": f"h-{name}", "start": 1000, "stop": 3000, "labels": [{"name": "suite", "value": module}],
            "statusDetails": {"message": "AssertionError: no"} if status == "failed" else {}}


def _report_dir(root: Path, record: RunRecord) -> Path:
    results = report.layout(root).results
    results.mkdir(parents=True)
    cases = []
    for test in record.tests:
        (results / f"{uuid.uuid4()}-result.json").write_text(json.dumps(_result(test)))
        fail = '<failure message="no"/>' if test == FAILING else ""
        cases.append(f'<testcase classname="suites.test_reclaim" name="{test.split("::")[1]}" time="2">{fail}</testcase>')
    report.layout(root).junit.write_text(f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>')
    run_record.write(root, record)
    return root


def test_merged_shards_give_the_whole_runs_verdicts(tmp_path: Path) -> None:
    whole = _report_dir(tmp_path / "whole", _record())
    dirs = [_report_dir(tmp_path / f"s{k}", s.record) for k, s in enumerate(_shards(2), 1)]
    code = merge(tmp_path / "out", dirs, html=False)
    assert code == 1  # test_3 failed
    merged = report.load_results(report.layout(tmp_path / "out").results)
    assert verdicts(merged) == verdicts(report.load_results(report.layout(whole).results))
    junit = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert junit is not None and (junit.get("tests"), junit.get("failures")) == ("5", "1")
    assert "| total | 4 | 1 | 0 | 0 |" in (tmp_path / "out" / "summary.md").read_text()


def test_merge_refuses_before_writing(tmp_path: Path) -> None:
    one = _report_dir(tmp_path / "a", _record())
    other = _report_dir(tmp_path / "b", _record(backend="kind", pvchaos="9.9"))
    with pytest.raises(MergeError, match="different versions of pvchaos"):
        merge(tmp_path / "out", [one, other], html=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(MergeError, match="no run.json"):
        merge(tmp_path / "out", [one, tmp_path], html=False)


def test_merge_of_two_backends_tags_and_tables(tmp_path: Path) -> None:
    dirs = [_report_dir(tmp_path / b, _record(backend=b)) for b in ("local", "kind")]
    assert merge(tmp_path / "out", dirs, html=False) == 1
    table = (tmp_path / "out" / "backends.md").read_text()
    assert "0 of 5 tests differ; 0 unexplained." in table
    keys = verdicts(report.load_results(report.layout(tmp_path / "out").results))
    assert f"{FAILING} (backend=kind)" in keys and f"{FAILING} (backend=local)" in keys


def test_merge_of_two_versions_in_shards_writes_the_version_table(tmp_path: Path) -> None:
    """The nightly shape: shards of each version, merged into one test x version table."""
    dirs = [_report_dir(tmp_path / f"{v}-s{k}", _record(f"{k}/2", s.record.tests, kubernetes=v))
            for v in ("v1.35.4", "v1.36.3") for k, s in enumerate(_shards(2), 1)]
    assert merge(tmp_path / "out", dirs, html=False) == 1
    table = (tmp_path / "out" / "versions.md").read_text()
    assert "| test | v1.35.4 | v1.36.3 |" in table and "0 changes between adjacent versions" in table
    keys = verdicts(report.load_results(report.layout(tmp_path / "out").results))
    assert f"{FAILING} (kubernetes=v1.36.3)" in keys and len(keys) == 2 * len(SELECTED)
    assert not (tmp_path / "out" / "backends.md").exists()

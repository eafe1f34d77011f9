"""The local-vs-kind verdict table: keys, differences, explanations, merged results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvchaos import compare_backends as cmp
from pvchaos.results import merge_into
from pvchaos.runner import UsageError, backends_of


def result(name: str, status: str, module: str = "test_zone_outage", stop: int = 1) -> dict:
    return {"name": name, "fullName": f"suites.{module}#{name.split('[')[0]}", "status": status, "stop": stop,
            "historyId": "h-" + name, "testCaseId": "c-" + name,
            "parameters": [{"name": "backend", "value": "'local'", "excluded": True}]}


def test_same_verdicts_do_not_differ_and_known_differences_are_explained() -> None:
    local = cmp.verdicts([result("test_a", "passed"), result("test_all_zones_down_evicts_nothing", "passed")])
    kind = cmp.verdicts([result("test_a", "passed"), result("test_all_zones_down_evicts_nothing", "skipped")])
    rows = cmp.compare({"local": local, "kind": kind})
    assert [r.differs for r in rows] == [False, True]
    assert rows[1].explanation and "control-plane" in rows[1].explanation
    assert cmp.unexplained(rows) == []
    assert "0 unexplained" in cmp.render_markdown(rows, ["local", "kind"])


def test_an_unknown_difference_is_unexplained_and_named() -> None:
    rows = cmp.compare({"local": {"test_x::test_b": "passed"}, "kind": {"test_x::test_b": "failed"}})
    assert [r.test for r in cmp.unexplained(rows)] == ["test_x::test_b"]
    table = cmp.render_markdown(rows, ["local", "kind"])
    assert "**UNEXPLAINED**" in table and "1 unexplained: test_x::test_b" in table
    assert cmp.compare({"local": {"t::a": "passed"}, "kind": {}})[0].verdicts["kind"] == "absent"


def test_parametrized_tests_keep_their_ids_and_the_last_attempt_counts() -> None:
    got = cmp.verdicts([result("test_m[access-mode]", "failed", "test_static_binding", stop=1),
                        result("test_m[access-mode]", "passed", "test_static_binding", stop=2)])
    assert got == {"test_static_binding::test_m[access-mode]": "passed"}


def test_merged_results_are_distinct_per_backend(tmp_path: Path) -> None:
    for backend in ("local", "kind"):
        src = tmp_path / backend
        src.mkdir()
        (src / "u1-result.json").write_text(json.dumps(result("test_a", "passed")))
        (src / "a1-attachment.txt").write_text("evidence")
        merge_into(tmp_path / "merged", backend, src)
    merged = [json.loads(p.read_text()) for p in (tmp_path / "merged").glob("*-result.json")]
    assert len(merged) == 2 and len({m["historyId"] for m in merged}) == 2
    assert {m["parameters"][0]["value"] for m in merged} == {"'local'", "'kind'"}
    assert all("excluded" not in m["parameters"][0] for m in merged)
    path = cmp.write_comparison_result(tmp_path / "merged", cmp.compare({"local": {"t::a": "passed"},
                                                                           "kind": {"t::a": "failed"}}), ["local", "kind"])
    data = json.loads(path.read_text())
    assert data["status"] == "failed" and "t::a" in data["statusDetails"]["message"]
    assert (tmp_path / "merged" / data["attachments"][0]["source"]).read_text().startswith("# Verdicts by backend")


def test_backend_lists_are_checked() -> None:
    assert backends_of("local,kind") == ["local", "kind"]
    for bad in ("", "local,local", "locl", "local,,minikube"):
        with pytest.raises(UsageError, match="--backend"):
            backends_of(bad)

"""The version matrix: parsing the list, the test x version table, which changes between
adjacent versions are found and which are explained, and the refusals of `pvchaos run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvchaos import runner, version_matrix
from pvchaos.clusters.local.cluster import missing_details
from pvchaos.clusters.local.config import LocalClusterConfig, gates_for_version
from pvchaos.clusters.options import Options
from pvchaos.compare_runs import Run


def _result(status: str, message: str = "", duration_ms: int = 4000) -> dict[str, Any]:
    res: dict[str, Any] = {"status": status, "start": 1000, "stop": 1000 + duration_ms, "parameters": []}
    if message:
        res["statusDetails"] = {"message": message}
    return res


def _run(version: str, **results: dict[str, Any]) -> Run:
    return Run(version, Path(f"/r/{version}"), {k.replace("__", "::"): v for k, v in results.items()})


def test_versions_are_sorted_and_checked() -> None:
    assert version_matrix.parse_versions("v1.37.2, v1.34.4,v1.35.4") == ["v1.34.4", "v1.35.4", "v1.37.2"]
    assert version_matrix.parse_versions("v1.35.10,v1.35.9") == ["v1.35.9", "v1.35.10"]


@pytest.mark.parametrize("text, says", [
    ("v1.35.4,,v1.36.3", "an empty item"),
    ("v1.35.4,1.36", "1.36 is not a release version"),
    ("v1.35.4,v1.35.4", "given twice"),
])
def test_malformed_lists_are_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as exc:
        version_matrix.parse_versions(text)
    assert "\n" not in str(exc.value)


def test_unserved_versions_are_named() -> None:
    assert version_matrix.unserved(["v1.35.4", "v1.35.9"], ["v1.35.4", "v1.36.3"]) == ["v1.35.9"]
    assert version_matrix.unserved(["v1.35.9"], []) == []  # the proxy could not be asked: the build says


def test_table_has_every_test_and_version() -> None:
    runs = [_run("v1.34.4", a__x=_result("skipped")), _run("v1.35.4", a__x=_result("passed"), b__y=_result("passed"))]
    assert version_matrix.verdict_table(runs) == {
        "a::x": {"v1.34.4": "skipped", "v1.35.4": "passed"},
        "b::y": {"v1.34.4": "absent", "v1.35.4": "passed"}}


def test_a_gate_appearing_explains_mutation_tests_starting_to_run() -> None:
    runs = [_run("v1.34.4", test_pv_affinity_mutation__t=_result("skipped")),
            _run("v1.35.4", test_pv_affinity_mutation__t=_result("passed"))]
    (step,) = version_matrix.steps(runs)
    (change,) = step.changes
    assert "MutablePVNodeAffinity" in (step.explanation(change) or "")
    assert not version_matrix.unexplained(version_matrix.steps(runs))


def test_a_regression_between_versions_is_unexplained_and_fails_the_summary(tmp_path: Path) -> None:
    runs = [_run("v1.35.4", test_static_binding__t=_result("passed")),
            _run("v1.36.3", test_static_binding__t=_result("failed", "claim stayed Pending"))]
    steps = version_matrix.steps(runs)
    bad = version_matrix.unexplained_behaviour(steps)
    assert [c.test for _, c in bad] == ["test_static_binding::t"]
    table = version_matrix.render_markdown(runs, steps)
    assert "**UNEXPLAINED**" in table and "claim stayed Pending" in table
    version_matrix.write_results(tmp_path, steps, table)
    written = [json.loads(p.read_text()) for p in tmp_path.glob("*-result.json")]
    summary = next(r for r in written if r["fullName"] == "pvchaos.versions#summary")
    assert summary["status"] == "failed" and "test_static_binding::t (v1.35.4 -> v1.36.3)" in summary["statusDetails"]["message"]
    change = next(r for r in written if r["fullName"] != "pvchaos.versions#summary")
    assert change["statusDetails"]["message"].startswith(version_matrix.CHANGE_PREFIX)


def test_no_change_says_so_and_passes(tmp_path: Path) -> None:
    runs = [_run("v1.35.4", a__x=_result("passed")), _run("v1.36.3", a__x=_result("passed"))]
    steps = version_matrix.steps(runs)
    table = version_matrix.render_markdown(runs, steps)
    assert "### v1.35.4 -> v1.36.3\n\nno change" in table
    assert "0 changes between adjacent versions; 0 unexplained." in table
    version_matrix.write_results(tmp_path, steps, table)
    (summary,) = [json.loads(p.read_text()) for p in tmp_path.glob("*-result.json")]
    assert summary["status"] == "passed"


def test_a_duration_alone_is_reported_but_not_judged() -> None:
    runs = [_run("v1.35.4", a__x=_result("passed", duration_ms=4000)),
            _run("v1.36.3", a__x=_result("passed", duration_ms=40000))]
    steps = version_matrix.steps(runs)
    assert steps[0].changes and not version_matrix.unexplained_behaviour(steps)


def test_matrix_table_shows_gates_per_version() -> None:
    runs = [_run("v1.34.4", a__x=_result("passed")), _run("v1.35.4", a__x=_result("passed"))]
    table = version_matrix.render_markdown(runs, version_matrix.steps(runs))
    assert "| MutablePVNodeAffinity | absent | alpha, off |" in table


def test_run_refuses_two_dimensions_and_other_backends() -> None:
    with pytest.raises(runner.UsageError, match="one dimension per run"):
        runner.run_request(Options(backend="local,kind", k8s_version="v1.35.4,v1.36.3"))
    with pytest.raises(runner.UsageError, match="several versions need the local backend"):
        runner.run_request(Options(backend="existing", k8s_version="v1.35.4,v1.36.3"))


def test_unserved_version_in_a_matrix_lists_the_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "served_releases", lambda: ["v1.35.4", "v1.36.3"])
    with pytest.raises(runner.UsageError, match=r"v1\.35\.9 not served .*; served: v1\.35\.4, v1\.36\.3"):
        runner.run_request(Options(k8s_version="v1.35.9,v1.36.3"))


def test_a_gate_asked_off_is_dropped_where_the_version_lacks_it() -> None:
    assert gates_for_version({"MutablePVNodeAffinity": False}, 34) == {}
    assert gates_for_version({"MutablePVNodeAffinity": False}, 35) == {"MutablePVNodeAffinity": False}
    assert gates_for_version({"MutablePVNodeAffinity": True}, 34) == {"MutablePVNodeAffinity": True}


def test_a_skip_on_1_34_names_the_missing_gate() -> None:
    old = missing_details(LocalClusterConfig(name="a", k8s_version="v1.34.4"))
    assert old["mutable-pv-affinity"] == "Kubernetes v1.34.4 has no MutablePVNodeAffinity gate; it is first in 1.35"
    off = missing_details(LocalClusterConfig(name="a", feature_gates={"MutablePVNodeAffinity": False}))
    assert off["mutable-pv-affinity"] == "feature gate MutablePVNodeAffinity is off"
    assert missing_details(LocalClusterConfig(name="a")) == {}  # the stack runs a csi-resizer


def test_a_prerelease_sorts_after_the_minor_before_it_and_before_its_release() -> None:
    from pvchaos.tools import versions
    assert version_matrix.parse_versions("v1.38.0-beta.0,v1.37.2,v1.34.4") == ["v1.34.4", "v1.37.2", "v1.38.0-beta.0"]
    assert sorted(["v1.38.0", "v1.38.0-rc.1", "v1.38.0-beta.0", "v1.38.0-alpha.2"], key=versions.order_key) == [
        "v1.38.0-alpha.2", "v1.38.0-beta.0", "v1.38.0-rc.1", "v1.38.0"]
    assert versions.minor_of("v1.38.0-beta.0", release_only=True) == 38 and versions.is_prerelease("v1.38.0-beta.0")
    assert versions.minor_of("v1.35.4-gke.1", release_only=True) is None  # a vendor's build, not one we make
    assert versions.skew_refusal("v1.37.2", "v1.38.0-beta.0") is None


def test_only_a_go_line_newer_than_the_machine_s_asks_for_the_approved_toolchain() -> None:
    from pvchaos.tools import versions
    assert versions.go_toolchain_for("1.25.0") is None and versions.go_toolchain_for("1.26.8") is None
    assert versions.go_toolchain_for("1.27.0") == versions.NEWER_GO_TOOLCHAIN == "go1.27.3"
    said = "k8s.io/kubernetes@v1.38.0-beta.0 requires go \\u003e= 1.27.0 (running go 1.26.8; GOTOOLCHAIN=local)"
    assert versions.toolchain_for_error(said) == "go1.27.3"
    assert versions.toolchain_for_error(said.replace("\\u003e", ">")) == "go1.27.3"
    assert versions.toolchain_for_error("403 Forbidden") is None


def test_a_skip_naming_a_gate_the_older_version_lacks_explains_the_test_starting_to_run() -> None:
    """Any suite's test, not only the mutation suite's: the older version's skip reason is the evidence."""
    why = ("Skipped: backend local: no mutable-pv-affinity (Kubernetes v1.34.4 has no MutablePVNodeAffinity gate; "
           "it is first in 1.35)")
    runs = [_run("v1.34.4", test_attach_detach__t=_result("skipped", why)),
            _run("v1.35.4", test_attach_detach__t=_result("passed"))]
    (step,) = version_matrix.steps(runs)
    assert "MutablePVNodeAffinity" in (step.explanation(step.changes[0]) or "")
    plain = [_run("v1.34.4", test_attach_detach__t=_result("skipped", "not applicable")),
             _run("v1.35.4", test_attach_detach__t=_result("passed"))]
    assert version_matrix.unexplained(version_matrix.steps(plain)), "a skip for another reason stays unexplained"


def test_an_upstream_race_reproduced_on_one_version_only_is_explained_as_a_race() -> None:
    xfail = "XFAIL kubernetes #95911 reproduced: v1.34.4 (local): 4 of 4 waiting pods placed on the joined node"
    runs = [_run("v1.34.4", test_csi_faults__t=_result("skipped", xfail)),
            _run("v1.35.4", test_csi_faults__t=_result("passed"))]
    (step,) = version_matrix.steps(runs)
    why = step.explanation(step.changes[0]) or ""
    assert "kubernetes #95911" in why and "v1.34.4" in why
    failed = [_run("v1.34.4", test_csi_faults__t=_result("passed")),
              _run("v1.35.4", test_csi_faults__t=_result("failed", "kubernetes #95911 reproduced"))]
    assert version_matrix.unexplained(version_matrix.steps(failed)), "a real failure is never a race explained away"


def test_a_measurement_known_to_move_on_any_version_is_explained_and_another_is_not() -> None:
    def timed(version: str, test: str, name: str, value: str) -> Run:
        res = _result("passed")
        res["parameters"] = [{"name": name, "value": repr(value)}]
        return _run(version, **{test: res})
    known = "test_component_restart__test_controller_manager_restart_mid_binding"
    runs = [timed("v1.34.4", known, "recovery seconds", "0.7"), timed("v1.35.4", known, "recovery seconds", "5.5")]
    (step,) = version_matrix.steps(runs)
    assert step.changes and "resync" in (step.explanation(step.changes[0]) or "")
    other = [timed("v1.34.4", "a__x", "recovery seconds", "0.7"), timed("v1.35.4", "a__x", "recovery seconds", "5.5")]
    assert version_matrix.unexplained(version_matrix.steps(other))

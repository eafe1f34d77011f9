"""The pure parts of `pvchaos upgrade`: the version-skew rule, the upgrade plan and the
command lines it ends with, the stability comparison, and the one-line refusals of the
command (nothing is built or started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pvchaos import cli
from pvchaos.clusters.local import config as flags
from pvchaos.clusters.local.config import MUTABLE_PV_GATE, LocalClusterConfig
from pvchaos.clusters.local.upgrade_plan import (
    CONTROL_PLANE_ORDER,
    NODES,
    plan_upgrade,
    unknown_gates,
    upgraded_argv,
)
from pvchaos.conformance import stability
from pvchaos.conformance.invariants import Snapshot
from pvchaos.tools.versions import RULE_NO_DOWNGRADE, RULE_ONE_MINOR, release, skew_refusal
from pvchaos.upgrade_command import check_versions, request

D = Path("/state/c1")


# ---- the skew rule --------------------------------------------------------------------------

@pytest.mark.parametrize(("start", "to"), [("v1.35.4", "v1.36.3"), ("v1.36.3", "v1.37.2"), ("v1.35.0", "v1.35.4"),
                                           ("v1.34.4", "v1.35.0")])
def test_one_minor_or_a_patch_up_is_allowed(start: str, to: str) -> None:
    assert skew_refusal(start, to) is None


@pytest.mark.parametrize(("start", "to", "rule"), [
    ("v1.36.3", "v1.35.4", RULE_NO_DOWNGRADE),
    ("v1.35.4", "v1.35.2", RULE_NO_DOWNGRADE),
    ("v1.35.4", "v1.37.2", RULE_ONE_MINOR),
    ("v1.34.4", "v1.37.2", RULE_ONE_MINOR),
])
def test_forbidden_skew_names_its_rule_in_one_line(start: str, to: str, rule: str) -> None:
    refusal = skew_refusal(start, to)
    assert refusal is not None and rule in refusal and "\n" not in refusal
    assert start in refusal and to in refusal


def test_two_minors_say_which_minor_is_skipped() -> None:
    assert "skips 1.35, 1.36" in (skew_refusal("v1.34.4", "v1.37.2") or "")


def test_same_version_is_nothing_to_upgrade() -> None:
    assert "nothing to upgrade" in (skew_refusal("v1.35.4", "v1.35.4") or "")


@pytest.mark.parametrize("bad", ["1.36.3", "v1.36", "v2.0.0", "v1.36.3-gke.1", "latest", ""])
def test_malformed_versions_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes release version"):
        release(bad)


# ---- the plan -----------------------------------------------------------------------------------

def test_plan_follows_the_skew_policy_order() -> None:
    plan = plan_upgrade(LocalClusterConfig(name="c1", k8s_version="v1.35.4"), "v1.36.3")
    assert plan.steps == ("kube-apiserver", "kube-controller-manager", "kube-scheduler", NODES)
    assert plan.steps[:3] == CONTROL_PLANE_ORDER
    assert dict(plan.new_gates) == {MUTABLE_PV_GATE: True} and not plan.forced
    assert "etcd kept" in plan.describe()


def test_plan_refuses_a_forbidden_skew_unless_forced() -> None:
    cfg = LocalClusterConfig(name="c1", k8s_version="v1.35.4")
    with pytest.raises(ValueError, match="--force-skew"):
        plan_upgrade(cfg, "v1.37.2")
    forced = plan_upgrade(cfg, "v1.37.2", force_skew=True)
    assert forced.forced and "forced past the version-skew policy" in forced.describe()
    with pytest.raises(ValueError, match="nothing to upgrade"):  # forcing cannot make a no-op an upgrade
        plan_upgrade(cfg, "v1.35.4", force_skew=True)


def test_plan_keeps_user_gates_and_refuses_those_the_new_version_lacks() -> None:
    cfg = LocalClusterConfig(name="c1", k8s_version="v1.35.4", feature_gates={"OldGate": True})
    plan = plan_upgrade(cfg, "v1.36.3")
    assert dict(plan.new_gates) == {MUTABLE_PV_GATE: True, "OldGate": True}
    assert unknown_gates(plan, frozenset({MUTABLE_PV_GATE})) == ["OldGate"]


def test_upgraded_argv_changes_only_the_binary_and_the_gates() -> None:
    cfg = LocalClusterConfig(name="c1", k8s_version="v1.35.4")
    old = ("/bin/v1.35.4/kube-apiserver", *flags.apiserver_args(cfg, D, 2379, 6443))
    plan = plan_upgrade(cfg, "v1.36.3")
    new = upgraded_argv("kube-apiserver", old, Path("/bin/v1.36.3/kube-apiserver"), plan)
    assert new[0] == "/bin/v1.36.3/kube-apiserver"
    assert new[1:] == old[1:]  # same ports, data, flags; the gate list is the same for 1.35 -> 1.36


def test_upgraded_argv_adds_a_gate_flag_where_the_old_version_had_none() -> None:
    cfg = LocalClusterConfig(name="c1", k8s_version="v1.34.4")
    old = ("/bin/kube-scheduler", *flags.scheduler_args(cfg, D, 10259))
    assert not any(a.startswith("--feature-gates=") for a in old)
    new = upgraded_argv("kube-scheduler", old, Path("/new/kube-scheduler"), plan_upgrade(cfg, "v1.35.4"))
    assert new[-1] == f"--feature-gates={MUTABLE_PV_GATE}=true"


def test_a_broken_plan_drops_a_controller_from_the_new_controller_manager_only() -> None:
    from dataclasses import replace
    cfg = LocalClusterConfig(name="c1", k8s_version="v1.35.4", disabled_controllers=("x-controller",))
    plan = replace(plan_upgrade(cfg, "v1.36.3"), kcm_disabled_controllers=("persistentvolume-binder-controller",))
    kcm = ("/bin/kcm", *flags.controller_manager_args(cfg, D, 10257))
    new = upgraded_argv("kube-controller-manager", kcm, Path("/new/kcm"), plan)
    assert "--controllers=*,-x-controller,-persistentvolume-binder-controller" in new
    sched = ("/bin/sched", *flags.scheduler_args(cfg, D, 10259))
    assert upgraded_argv("kube-scheduler", sched, Path("/new/sched"), plan)[1:] == sched[1:]
    assert "without persistentvolume-binder-controller" in plan.describe()


# ---- stability (pure) ------------------------------------------------------------------------

NS = "t"


def _pv(name: str, phase: str, claim: str | None, uid: str = "u1") -> dict[str, Any]:
    ref = {"namespace": NS, "name": claim, "uid": uid} if claim else None
    return {"metadata": {"name": name}, "spec": {"claimRef": ref} if ref else {}, "status": {"phase": phase}}


def _claim(name: str, volume: str | None, phase: str = "Bound") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"volumeName": volume}, "status": {"phase": phase}}


def _pod(name: str, uid: str = "p1", node: str = "n1", phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta = {"name": name, "namespace": NS, "uid": uid, **({"deletionTimestamp": "now"} if deleting else {})}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def _snap(pvs: list[Any], claims: list[Any], pods: list[Any]) -> Snapshot:
    return Snapshot(pods=list(pods), claims=list(claims), volumes=list(pvs))


BEFORE = _snap([_pv("pv1", "Bound", "c1"), _pv("pv2", "Released", "gone"), _pv("other", "Available", None)],
               [_claim("c1", "pv1"), _claim("w", None, "Pending")], [_pod("a"), _pod("b", "p2", phase="Pending")])


def test_baseline_takes_the_namespace_s_claimed_pvs_bound_claims_and_running_pods() -> None:
    base = stability.baseline(BEFORE, NS)
    assert set(base.volumes) == {"pv1", "pv2"} and base.bound == {"c1": "pv1"} and set(base.running) == {"a"}
    assert stability.disturbances(base, BEFORE) == []


@pytest.mark.parametrize(("after", "expected"), [
    (_snap([_pv("pv1", "Released", "c1"), _pv("pv2", "Released", "gone")], [_claim("c1", "pv1")], [_pod("a")]),
     "PV pv1 changed phase Bound -> Released"),
    (_snap([_pv("pv1", "Bound", "c1", uid="u2"), _pv("pv2", "Released", "gone")], [_claim("c1", "pv1")], [_pod("a")]),
     "PV pv1 changed claimRef"),
    (_snap([_pv("pv1", "Bound", "c1")], [_claim("c1", "pv1")], [_pod("a")]), "PV pv2 (Released"),
    (_snap([_pv("pv1", "Bound", "c1"), _pv("pv2", "Released", "gone")], [], [_pod("a")]), "claim t/c1 (Bound to pv1) is lost"),
    (_snap([_pv("pv1", "Bound", "c1"), _pv("pv2", "Released", "gone")], [_claim("c1", "pv9")], [_pod("a")]),
     "claim t/c1 was Bound to pv1, now Bound to 'pv9'"),
    (_snap([_pv("pv1", "Bound", "c1"), _pv("pv2", "Released", "gone")], [_claim("c1", "pv1")], [_pod("a", deleting=True)]),
     "is being evicted"),
    (_snap([_pv("pv1", "Bound", "c1"), _pv("pv2", "Released", "gone")], [_claim("c1", "pv1")], [_pod("a", uid="p9")]),
     "was deleted or replaced"),
    (_snap([_pv("pv1", "Bound", "c1"), _pv("pv2", "Released", "gone")], [_claim("c1", "pv1")], [_pod("a", node="n2")]),
     "now Running on n2"),
])
def test_each_disturbance_is_named(after: Snapshot, expected: str) -> None:
    problems = stability.disturbances(stability.baseline(BEFORE, NS), after)
    assert any(expected in p for p in problems), problems


def test_a_claim_that_binds_later_may_not_be_bound_twice() -> None:
    base = stability.baseline(BEFORE, NS)
    later = _snap(BEFORE.volumes, [_claim("c1", "pv1"), _claim("w", "pv3")], BEFORE.pods)
    base = stability.with_new_bindings(base, later)
    assert base.bound["w"] == "pv3"
    rebound = _snap(BEFORE.volumes, [_claim("c1", "pv1"), _claim("w", "pv4")], BEFORE.pods)
    assert any("w was Bound to pv3" in p for p in stability.disturbances(base, rebound))


# ---- the command's refusals -------------------------------------------------------------------

def test_check_versions_refuses_in_one_line() -> None:
    with pytest.raises(ValueError, match="^--to: not a Kubernetes release version"):
        check_versions("v1.35.4", "1.36", force=False)
    with pytest.raises(ValueError, match="^--from: "):
        check_versions("v1.35", "v1.36.3", force=False)
    with pytest.raises(Exception, match=RULE_ONE_MINOR):
        check_versions("v1.35.4", "v1.37.2", force=False)
    check_versions("v1.35.4", "v1.37.2", force=True)  # forced: allowed (a test of exactly that)


@pytest.mark.parametrize(("argv", "expected"), [
    (["upgrade", "--to", "v1.37.2"], RULE_ONE_MINOR),
    (["upgrade", "--from", "v1.36.3", "--to", "v1.35.4"], RULE_NO_DOWNGRADE),
    (["upgrade", "--to", "v1.36"], "--to: 'v1.36' is not a Kubernetes release version"),
    (["upgrade", "--from", "v1.35.4", "--to", "v1.35.4"], "nothing to upgrade"),
])
def test_cli_refusals_exit_2_with_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    code = cli.main([*argv, "--report-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_request_runs_only_the_upgrade_suite_in_one_worker() -> None:
    args = cli.parser().parse_args(["upgrade", "--to", "v1.36.3", "--force-skew", "--", "-k", "live"])
    req = request(args)
    assert req.suites == ("upgrade",) and req.workers == "0" and req.k8s_version == "v1.35.4"
    assert req.pytest_args == ("--upgrade-to=v1.36.3", "--upgrade-force-skew", "-k", "live")


# ---- the plugin: the upgrade suite is not part of a default run ---------------------------

UPGRADE_TEST = """
    import pytest

    @pytest.mark.upgrade
    def test_upgrade():
        pass

    def test_other():
        pass
"""


def test_upgrade_tests_are_deselected_without_upgrade_to(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_up=UPGRADE_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=1)
    result = pytester.runpytest("-p", "no:cacheprovider", "--upgrade-to=v1.36.3")
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(("flags", "expected"), [
    (["--upgrade-to=v1.37.2"], RULE_ONE_MINOR),
    (["--upgrade-from=v1.36.3", "--upgrade-to=v1.35.4"], RULE_NO_DOWNGRADE),
    (["--upgrade-to=1.36"], "not a Kubernetes release version"),
    (["--upgrade-from=v1.35.4", "--k8s-version=v1.36.3", "--upgrade-to=v1.37.2"], "differ"),
])
def test_plugin_refuses_bad_upgrade_options_in_one_line(pytester: pytest.Pytester, flags: list[str],
                                                        expected: str) -> None:
    pytester.makepyfile(test_up=UPGRADE_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", *flags)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in result.stderr.str()


def test_forced_skew_is_accepted_by_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_up=UPGRADE_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "--upgrade-to=v1.37.2", "--upgrade-force-skew")
    result.assert_outcomes(passed=2)

"""What the control plane really ran with: effective flags (the last wins), gates, and
warnings where the command line contradicts itself or what the cluster declares."""

from __future__ import annotations

import json
from pathlib import Path

from pvchaos import report
from pvchaos.conformance import command_lines as cl

KCM = ["kube-controller-manager", "--kubeconfig=/x/kc", "--secure-port=10257", "--node-monitor-grace-period=8s",
       "--node-monitor-period=1s", "--feature-gates=MutablePVNodeAffinity=true", "--controllers", "*,-foo"]


def test_effective_flags_take_the_last_occurrence_and_both_spellings() -> None:
    argv = [*KCM, "--node-monitor-grace-period=40s"]
    flags = cl.effective_flags(argv)
    assert flags["node-monitor-grace-period"] == "40s" and flags["controllers"] == "*,-foo"
    assert cl.feature_gates(argv) == {"MutablePVNodeAffinity": True}
    shown = cl.configuration_flags(argv)
    assert "kubeconfig" not in shown and "secure-port" not in shown and shown["node-monitor-period"] == "1s"


def test_a_flag_behind_the_harness_back_is_a_warning() -> None:
    declared = {"node-monitor-grace-period": "8s", "node lease": "4s"}
    assert cl.warnings("kube-controller-manager", KCM, declared) == []
    late = cl.warnings("kube-controller-manager", [*KCM, "--node-monitor-grace-period=40s"], declared)
    assert any("twice: 8s then 40s" in w for w in late) and any("declares 8s" in w for w in late), late


def test_the_summary_and_environment_show_what_ran(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    results.mkdir()
    for name, grace in (("gw0-a", "8s"), ("gw1-b", "8s")):
        argv = [*KCM, f"--node-monitor-grace-period={grace}"] if name == "gw1-b" else KCM
        data = {"cluster": name, "components": {"kube-controller-manager": {
            "flags": cl.configuration_flags(argv), "gates": cl.feature_gates(argv)}},
            "warnings": cl.warnings("kube-controller-manager", [*KCM, "--node-monitor-grace-period=40s"],
                                    {"node-monitor-grace-period": "8s"}) if name == "gw1-b" else []}
        (results / f"pvchaos-ran-{name}.json").write_text(json.dumps(data))
    ran = report.what_ran(results)
    assert ran.configurations["kube-controller-manager"][0].count("--node-monitor-grace-period=8s") == 1
    assert len(ran.configurations["kube-controller-manager"]) == 1, "identical configurations count once"
    env = report.ran_environment(ran)
    assert "--node-monitor-period=1s" in env["kube-controller-manager flags (as run)"]
    assert "40s" in env["command-line warnings"]
    summary = report.write_summary_md(tmp_path, [], ran=ran).read_text()
    assert "## What ran" in summary and "**Warning:** gw1-b: kube-controller-manager gets" in summary


def test_the_environment_names_the_provisioner_each_cluster_ran(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    results.mkdir()
    csi = {"provisioner": "csi.pvchaos.dev (pvchaos-csi) via external-provisioner v6.4.0",
           "external-attacher": "v4.13.0"}
    for name, storage in (("gw0-a", csi), ("gw1-b", csi), ("gw1-c", {"provisioner": "test double"})):
        (results / f"pvchaos-ran-{name}.json").write_text(json.dumps(
            {"cluster": name, "components": {}, "warnings": [], "storage": storage}))
    env = report.ran_environment(report.what_ran(results))
    assert env["provisioner"] == f"{csi['provisioner']} | test double"
    assert env["external-attacher"] == "v4.13.0"


def test_the_summary_names_the_drivers_limit_and_capacity(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    results.mkdir()
    (results / "pvchaos-ran-gw0-a.json").write_text(json.dumps(
        {"cluster": "gw0-a", "components": {}, "warnings": [],
         "storage": {"csi volume limit": "no volume limit (0: unlimited)", "csi capacity": "not tracked"}}))
    summary = report.write_summary_md(tmp_path, [], ran=report.what_ran(results)).read_text()
    assert "- csi volume limit: `no volume limit (0: unlimited)`" in summary
    assert "- csi capacity: `not tracked`" in summary


def test_timing_flags_as_run_name_upstreams_default_where_absent() -> None:
    timing = cl.timing_settings("kube-controller-manager", [*KCM, "--node-monitor-grace-period=40s"])
    assert timing["node-monitor-grace-period"] == "40s" and timing["node-monitor-period"] == "1s"
    assert timing["pvclaimbinder-sync-period"] == "15s (default)"
    attacher = cl.timing_settings("csi-attacher", ["csi-attacher", "--retry-interval-start=250ms"])
    assert attacher["retry-interval-start"] == "250ms" and attacher["timeout"] == "15s (default)"


def test_the_schedulers_effective_plugins_come_from_its_profile() -> None:
    config = {"podMaxBackoffSeconds": 3, "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "multiPoint": {"disabled": [{"name": "VolumeZone"}]}, "score": {"disabled": [{"name": "ImageLocality"}]}}}]}
    (profile,) = cl.scheduler_profiles(config).values()
    assert "VolumeZone" not in profile["enabled"] and "VolumeBinding" in profile["enabled"]
    assert profile["disabled"] == ["VolumeZone", "ImageLocality@score"]
    assert cl.scheduler_profiles(None)["default-scheduler"]["enabled"] == list(cl.DEFAULT_SCHEDULER_PLUGINS)
    assert cl.scheduler_profiles({"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [
        {"name": "NodeName"}]}}}]})["default-scheduler"]["enabled"] == ["NodeName"]
    timing = cl.scheduler_timing(config)
    assert timing["podMaxBackoffSeconds"] == "3" and timing["podInitialBackoffSeconds"] == "1 (default)"


def test_every_flag_the_harness_did_not_set_is_a_warning() -> None:
    assert cl.unset_flags("kube-controller-manager", KCM, KCM) == []
    late = cl.unset_flags("kube-controller-manager", [*KCM, "--node-monitor-grace-period=40s", "--v=9"], KCM)
    assert late == ["kube-controller-manager runs with --node-monitor-grace-period=40s; the harness set 8s",
                    "kube-controller-manager runs with --v=9, which the harness did not set"]


def test_the_summary_shows_timing_and_the_schedulers_plugins(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    results.mkdir()
    scheduler = {"flags": {}, "gates": {}, "timing": {}, "config": "--config /x/scheduler.yaml",
                 "profiles": cl.scheduler_profiles({"profiles": [{"plugins": {"multiPoint": {
                     "disabled": [{"name": "VolumeBinding"}]}}}]}),
                 "scheduler timing": cl.scheduler_timing(None)}
    kcm = {"flags": cl.configuration_flags(KCM), "gates": {}, "timing": cl.timing_settings("kube-controller-manager",
                                                                                             KCM)}
    (results / "pvchaos-ran-gw0-a.json").write_text(json.dumps(
        {"cluster": "gw0-a", "components": {"kube-scheduler": scheduler, "kube-controller-manager": kcm},
         "warnings": ["kube-controller-manager runs with --v=9, which the harness did not set"]}))
    ran = report.what_ran(results)
    summary = report.write_summary_md(tmp_path, [], ran=ran).read_text()
    assert "default-scheduler: disabled VolumeBinding; runs SchedulingGates" in summary
    assert "podInitialBackoffSeconds=1 (default)" in summary and "node-monitor-grace-period=8s" in summary
    assert "**Warning:** gw0-a: kube-controller-manager runs with --v=9, which the harness did not set" in summary
    env = report.ran_environment(ran)
    assert "VolumeBinding" in env["kube-scheduler plugins (as run)"]
    assert "pvclaimbinder-sync-period=15s (default)" in env["kube-controller-manager timing (as run)"]


def test_without_config_the_scheduler_runs_the_default_profile_and_unreadable_is_unknown() -> None:
    from pvchaos.plugin import what_ran
    default = what_ran._scheduler(["kube-scheduler", "--kubeconfig=/x"])
    assert default["profiles"] == {"default-scheduler": {"enabled": list(cl.DEFAULT_SCHEDULER_PLUGINS), "disabled": []}}
    unknown = what_ran._scheduler(["kube-scheduler", "--config=/etc/kubernetes/nowhere.yaml"])
    assert unknown["profiles"] == "unknown" and "not readable here" in str(unknown["config"])

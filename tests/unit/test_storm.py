"""The PVC storm's pure parts: its judge, the apiserver histogram arithmetic, the growth
exponent, the plan's shape and objects, and the refusal of sizes the machine cannot hold."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pvchaos import runner
from pvchaos.clusters.local.config import LocalClusterConfig, controller_manager_args, scheduler_config_yaml
from pvchaos.clusters.options import Options
from pvchaos.conformance import storm as judge
from pvchaos.conformance.invariants import Snapshot
from pvchaos.kit import storm_plan as plan
from pvchaos.run_config import scale_problem

ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str) -> dict:
    return {"metadata": {"name": name, "labels": {ZONE: zone, "kubernetes.io/hostname": name}}}


def pv(name: str, zone: str, claim: str) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "claimRef": {"namespace": "ns", "name": claim},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": [zone]}]}]}}}}


def claim(name: str, volume: str | None, phase: str = "Bound", selected: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "ns"}
    if selected:
        meta["annotations"] = {judge.SELECTED_NODE: selected}
    return {"metadata": meta, "spec": {"volumeName": volume} if volume else {}, "status": {"phase": phase}}


def pod(name: str, node_name: str | None, claims: tuple[str, ...], phase: str = "Running") -> dict:
    spec: dict = {"volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": {"phase": phase}}


NODES = [node("a-1", "zone-a"), node("b-1", "zone-b")]


def test_a_healthy_storm_has_no_violation() -> None:
    snap = Snapshot([pod("p", "a-1", ("c",))], [claim("c", "v")], [pv("v", "zone-a", "c")], NODES)
    assert judge.storm_violations(snap, "ns") == []


def test_each_storm_rule_fires() -> None:
    snap = Snapshot(
        pods=[pod("p", "b-1", ("c",)), pod("q", None, ("d",), "Pending")],
        claims=[claim("c", "v"), claim("d", None, "Pending"), claim("e", "v")],
        volumes=[pv("v", "zone-a", "c")], nodes=NODES)
    text = "\n".join(judge.storm_violations(snap, "ns"))
    assert "[pod-on-pv-affinity] pod ns/p runs on node b-1" in text
    assert "[claimed-twice] PV v is claimed by 2 PVCs" in text
    assert "[claim-not-bound] 1 of 3 claims are not Bound" in text and "PV controller" in text
    assert "[pod-not-running] 1 pods are not Running: ns/q (Pending, node -)" in text


def test_pods_a_zone_outage_strands_are_excused_and_no_others() -> None:
    stranded = pod("on-down", "b-1", (), "Pending")
    needs_b = pod("needs-b", None, ("c",), "Pending")
    free = pod("free", None, (), "Pending")
    snap = Snapshot([stranded, needs_b, free], [claim("c", "v")], [pv("v", "zone-b", "c")], NODES)
    assert judge.unable_to_run(stranded, snap, {"b-1"}) == "on stopped node b-1"
    assert "reachable only from stopped nodes" in (judge.unable_to_run(needs_b, snap, {"b-1"}) or "")
    assert judge.unable_to_run(free, snap, {"b-1"}) is None
    lines = judge.storm_violations(snap, "ns", {"b-1"})
    assert len(lines) == 1 and "ns/free" in lines[0] and "needs-b" not in lines[0]
    assert "3 pods are not Running" in judge.storm_violations(snap, "ns")[0]  # without the outage all three count


def test_undecided_pods_and_claims_must_avoid_the_lost_zone() -> None:
    before_pods = [pod("early", "b-1", ()), pod("late", None, ("c",), "Pending")]
    before_claims = [claim("c", None, "Pending"), claim("chosen", None, "Pending", selected="b-1")]
    pods, claims = judge.unscheduled(before_pods, before_claims)
    assert (pods, claims) == ({"ns/late"}, {"ns/c"})  # a selected node counts as decided
    good = Snapshot([pod("late", "a-1", ("c",))], [claim("c", "v")], [pv("v", "zone-a", "c")], NODES)
    assert judge.landed_outside(good, "zone-b", pods, claims) == []
    bad = Snapshot([pod("late", "b-1", ("c",))], [claim("c", "v")], [pv("v", "zone-b", "c")], NODES)
    assert judge.landed_outside(bad, "zone-b", pods, claims) == [
        "claim ns/c bound to PV v in zone-b", "pod ns/late on b-1"]


METRICS = """# HELP apiserver_request_duration_seconds x
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="0.1"} 10
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="0.5"} 18
apiserver_request_duration_seconds_bucket{verb="POST",resource="pods",le="+Inf"} 20
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",le="0.1"} 0
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",le="+Inf"} 99
apiserver_request_duration_seconds_bucket{verb="GET",resource="nodes",le="0.1"} 5
apiserver_request_duration_seconds_bucket{verb="GET",resource="nodes",le="0.5"} 5
apiserver_request_duration_seconds_bucket{verb="GET",resource="nodes",le="+Inf"} 5
apiserver_request_duration_seconds_count{verb="POST",resource="pods"} 20
"""


def test_histogram_leaves_out_watches_and_sums_label_sets() -> None:
    assert judge.histogram(METRICS) == {0.1: 15, 0.5: 23, math.inf: 25}
    assert judge.histogram(METRICS, verbs=("POST",)) == {0.1: 10, 0.5: 18, math.inf: 20}


def test_quantile_interpolates_like_prometheus() -> None:
    before = {0.1: 0, 0.5: 0, math.inf: 0}
    d = judge.delta(judge.histogram(METRICS, verbs=("POST",)), before)
    assert judge.quantile(0.5, d) == pytest.approx(0.1)
    assert judge.quantile(0.7, d) == pytest.approx(0.1 + 0.4 * (14 - 10) / 8)
    assert judge.quantile(0.99, d) == 0.5  # in the +Inf bucket: the last finite bound
    assert judge.quantile(0.5, {0.1: 0, math.inf: 0}) is None
    with pytest.raises(ValueError):
        judge.quantile(1.5, d)


def test_fitted_exponent() -> None:
    assert judge.fitted_exponent([100, 300, 1000], [2, 6, 20]) == pytest.approx(1.0)
    assert judge.fitted_exponent([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        judge.fitted_exponent([5, 5], [1, 2])


def test_shape_rounds_zones_up_and_mixes_kinds() -> None:
    shape = plan.StormShape(nodes=1000, zones=plan.zone_names(3), pods=2000)
    assert (shape.nodes_per_zone, shape.node_count) == (334, 1002)
    assert shape.counts() == {"wffc": 800, "immediate": 400, "local": 400, "sts": 400}


@pytest.mark.parametrize(("nodes", "zones", "pods", "text"), [
    (0, 3, 10, "0 nodes: a storm needs at least one node"),
    (2, 3, 10, "3 zones for 2 nodes"),
    (3, 3, 0, "0 pods"),
])
def test_bad_shapes_are_one_line(nodes: int, zones: int, pods: int, text: str) -> None:
    with pytest.raises(ValueError, match=text) as err:
        plan.StormShape(nodes=nodes, zones=plan.zone_names(zones), pods=pods)
    assert "\n" not in str(err.value)


def test_memory_refusal_compares_the_estimate_with_what_is_available() -> None:
    shape = plan.StormShape(nodes=1000, zones=plan.zone_names(3), pods=2000)
    cost = judge.Cost(base_mib=500, per_node_mib=10, per_pod_mib=0.5)
    need = cost.estimate(1002, 4000) * plan.HEADROOM
    assert plan.memory_refusal(shape, need + 1, cost) is None
    line = plan.memory_refusal(shape, need - 1, cost) or ""
    assert "needs about" in line and "MemAvailable" in line and "\n" not in line


def test_build_makes_every_kind_with_its_claims() -> None:
    shape = plan.StormShape(nodes=6, zones=("zone-a", "zone-b"), pods=20, extra_claim_every=4, sts_replicas=3)
    nodes = [plan.NodeRef(f"n{i}", f"h{i}", "zone-a" if i < 3 else "zone-b") for i in range(6)]
    classes = {z: {"metadata": {"name": f"imm-{z}"}} for z in shape.zones}
    objs = plan.build(shape, nodes, {"metadata": {"name": "wffc"}}, classes, "loc", {"t": "x"})
    assert shape.counts() == {"wffc": 8, "immediate": 4, "local": 4, "sts": 4}
    assert len(objs.local_volumes) == 8 and len(objs.baseline_pods) == 20
    assert [s["spec"]["replicas"] for s in objs.statefulsets] == [3, 1]
    assert objs.expected_pods == 20 and objs.expected_claims == 8 + 2 + 4 + 4 + 4
    kinds = sorted(set(objs.kind_of_pod.values()))
    assert kinds == ["immediate:zone-a", "immediate:zone-b", "local", "wffc"]
    halves = objs.batches(2)
    assert sum(len(p) for _, p, _ in halves) == len(objs.pods)
    for claims, pods, _ in halves:  # each half carries its own pods' claims
        assert {v["persistentVolumeClaim"]["claimName"] for p in pods for v in p["spec"]["volumes"]} == {
            c["metadata"]["name"] for c in claims}


def test_client_qps_and_burst_reach_both_components() -> None:
    cfg = LocalClusterConfig(name="x", client_qps=300, client_burst=500)
    args = controller_manager_args(cfg, Path("/d"), 1)
    assert "--kube-api-qps=300" in args and "--kube-api-burst=500" in args
    assert "  qps: 300\n  burst: 500\n" in scheduler_config_yaml(cfg, Path("/d"))
    plain = LocalClusterConfig(name="x")
    plain_args = controller_manager_args(plain, Path("/d"), 1)
    assert [a for a in plain_args if "kube-api" in a] == ["--kube-api-qps=500", "--kube-api-burst=1000"]
    assert "qps" not in scheduler_config_yaml(plain, Path("/d"))


def test_the_suites_storm_cluster_carries_the_storm_scheduler_settings() -> None:
    from pvchaos.clusters.options import Options as PoolOptions
    from pvchaos.clusters.pool import ClusterPool, ClusterRequest
    from pvchaos.kit.storm_plan import STORM_NODES_TO_SCORE, cluster_marker_options, suite_shape
    request = ClusterRequest.from_marker(cluster_marker_options(suite_shape("300x600", ("zone-a", "zone-b", "zone-c"))))
    cfg = _config_for(ClusterPool(PoolOptions()), request)
    assert (cfg.client_qps, cfg.nodes_to_score_percent) == (300, STORM_NODES_TO_SCORE)
    assert cfg.topology.node_count == 300


def test_scale_input_is_checked_before_anything_starts(tmp_path: Path) -> None:
    assert scale_problem(Options(scale=True, scale_size="60x120"), 1e9) is None
    assert "NODESxPODS" in (scale_problem(Options(scale=True, scale_size="lots"), 1e9) or "")
    assert "0 nodes" in (scale_problem(Options(scale=True, scale_size="0x10"), 1e9) or "")
    assert "4 zones for 2 nodes" in (scale_problem(Options(scale=True, scale_size="2x10", zones="4"), 1e9) or "")
    assert "needs about" in (scale_problem(Options(scale=True, scale_size="100000x10"), 8000) or "")
    with pytest.raises(runner.UsageError, match=r"--scale-size 0x5: .* both at least 1"):  # the option's own check
        runner.validate(runner.RunRequest(scale=True, scale_size="0x5", report_dir=tmp_path))
    assert "--scale" in runner.pytest_argv(runner.RunRequest(suites=("scale",), report_dir=tmp_path))
    assert "--scale" not in runner.pytest_argv(runner.RunRequest(report_dir=tmp_path))


@pytest.mark.parametrize("argv", [["--nodes", "0"], ["--zones", "5", "--nodes", "3"], ["--curve", "10x20,bad"],
                                  ["--nodes", "100000", "--pods", "10"], ["--nodes-to-score", "101"],
                                  ["--qps", "-1"]])
def test_bench_refuses_bad_input_in_one_line_and_starts_nothing(argv: list[str], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from bench import storm as bench

    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(bench, "ensure_binaries", lambda *a, **k: pytest.fail("got past the input check"))
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench.storm: ") and err.count("\n") == 1
    assert not (tmp_path / "state").exists()


def test_last_bound_per_kind_says_which_path_paces_the_storm() -> None:
    from pvchaos.kit.storm import _bound_by_kind

    shape = plan.StormShape(nodes=3, zones=("zone-a",), pods=10, sts_replicas=2)
    objs = plan.build(shape, [plan.NodeRef("n", "n", "zone-a")], {"metadata": {"name": "w"}},
                      {"zone-a": {"metadata": {"name": "i"}}}, "loc", {})
    claims = {o["metadata"]["name"]: objs.kind_of_pod[o["metadata"]["name"].rsplit("-", 1)[0]] for o in objs.claims}
    reached = {f"ns/{c}": 100.0 + (5 if k == "local" else 1) for c, k in claims.items()}
    reached["ns/data-s-set-0-0"] = 109.0
    assert _bound_by_kind(objs, "ns", reached, 100.0) == {"immediate": 1.0, "local": 5.0, "sts": 9.0, "wffc": 1.0}


def test_requests_by_resource_counts_only_the_given_verbs() -> None:
    text = "\n".join([
        '# TYPE apiserver_request_total counter',
        'apiserver_request_total{code="201",resource="events",verb="POST",version="v1"} 7',
        'apiserver_request_total{code="200",resource="events",verb="PATCH",version="v1"} 3',
        'apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH",version="v1"} 5',
        'apiserver_request_total{code="200",resource="pods",verb="LIST",version="v1"} 100',
        'apiserver_request_duration_seconds_bucket{resource="events",verb="POST",le="1"} 9',
    ])
    assert judge.requests_by_resource(text, ("POST", "PATCH")) == {"events": 10.0, "pods/status": 5.0}
    before = {"events": 4.0}
    assert judge.delta(judge.requests_by_resource(text, ("POST", "PATCH")), before) == {"events": 6.0, "pods/status": 5.0}


def _config_for(pool, request):  # type: ignore[no-untyped-def]
    """The local cluster configuration the pool's provider makes for a request."""
    from pvchaos.clusters.local.provider import PROVIDER
    return PROVIDER.config_for(request, pool.defaults, pool.hooks)

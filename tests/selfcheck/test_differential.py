"""Differential test of the oracle against the real kube-scheduler (issue 3).

The suites trust `conformance.affinity.node_matches_pv_affinity` to say where a pod
using a PV may run. Here it is checked against kube-scheduler itself: nodes get random
label sets, static PVs get random node affinities, and for every (PV, node) pair a pod
using the PV's claim is pinned to that node by its hostname label (a nodeSelector, so
the scheduler runs; spec.nodeName would bypass it). The nodes where the scheduler
placed pods must be exactly the nodes the oracle calls feasible.

The pods of one case share one ReadWriteOnce claim: the scheduler does not keep RWO
pods on one node (only ReadWriteOncePod is enforced, by VolumeRestrictions), and the
test asserts that claims did get pods on several nodes, so a change there shows up as
a disagreement rather than passing unseen.

Pure `random.Random(seed)`: the seed is printed; `PVCHAOS_SEED=<n>` replays a run
(same node labels, same affinities, same verdicts).
"""

from __future__ import annotations

import os
import secrets
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from random import Random

import allure
import pytest
import yaml

from pvchaos.chaos.labels import set_node_labels
from pvchaos.clusters.topology import HOSTNAME_KEY, ZONE_KEY
from pvchaos.conformance import messages
from pvchaos.conformance.affinity import node_matches_pv_affinity
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import State, wait_for_state

pytestmark = [
    allure.epic("Self-verification"),
    allure.feature("Oracle against kube-scheduler"),
    pytest.mark.disruptive,  # relabels nodes: a fresh cluster of its own
    # The PV controller binds 50 pre-bound pairs a round with ~5 writes each: the default
    # 20 QPS would make the client's rate limit most of a round.
    pytest.mark.cluster(extra_kcm_flags=("--kube-api-qps=500", "--kube-api-burst=1000")),
    pytest.mark.slow,
    pytest.mark.needs("node-labels", "static-pv"),
]

SEED_ENV = "PVCHAOS_SEED"
ROUNDS = 4
CASES_PER_ROUND = 50
KEYS = ("pvchaos.dev/k1", "pvchaos.dev/k2", "pvchaos.dev/k3")
WORDS = ("a", "b", "c")
NUMBERS = ("1", "2", "5", "10", "007")  # "007" parses as 7 for Gt/Lt, as upstream's ParseInt does
ROUND_KEY = "pvchaos.dev/round"
CASE_KEY = "pvchaos.dev/case"
PROBE_KEY = "pvchaos.dev/probe"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
WAIT_SECONDS = 120.0


# ---- generation (pure) --------------------------------------------------------------

def random_node_labels(rng: Random) -> dict[str, str | None]:
    """A merge-patch of the vocabulary keys: each set to a value, or removed (None)."""
    return {k: (None if rng.random() < 0.3 else rng.choice(WORDS + NUMBERS)) for k in KEYS}


def _order_value(rng: Random) -> str:
    """One integer for Gt/Lt. API validation also requires it to be a label value, so
    no sign; a leading zero ("007") is allowed and parses as 7, as upstream's ParseInt does."""
    return "007" if rng.random() < 0.08 else str(rng.randint(0, 11))


def random_expression(rng: Random, hostnames: list[str], zones: list[str]) -> Obj:
    """A NodeSelectorRequirement valid per API validation, over the vocabulary."""
    roll = rng.random()
    if roll < 0.15:
        key, domain = HOSTNAME_KEY, hostnames
    elif roll < 0.22:
        key, domain = ZONE_KEY, zones
    else:
        key, domain = rng.choice(KEYS), [*WORDS, *NUMBERS, "zz"]
    op = rng.choice(OPERATORS)
    expr: Obj = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = rng.sample(domain, rng.randint(1, min(3, len(domain))))
    elif op in ("Gt", "Lt"):
        expr["values"] = [_order_value(rng)]
    return expr


def random_affinity(rng: Random, hostnames: list[str], zones: list[str]) -> Obj:
    """1-3 ORed terms of 1-3 ANDed expressions."""
    terms = [{"matchExpressions": [random_expression(rng, hostnames, zones) for _ in range(rng.randint(1, 3))]}
             for _ in range(rng.randint(1, 3))]
    return {"required": {"nodeSelectorTerms": terms}}


# ---- verdicts ---------------------------------------------------------------------------

@dataclass
class Verdicts:
    """What oracle and scheduler said for one case (one PV) on each node."""

    case: str
    pv: Obj
    nodes: dict[str, Obj]  # as they were labelled in this case's round
    oracle: dict[str, bool] = field(default_factory=dict)
    scheduler: dict[str, bool] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)

    def disagreeing_nodes(self) -> list[str]:
        return [n for n in self.oracle if self.oracle[n] != self.scheduler.get(n)]


def _pod_verdict(pod: Obj) -> tuple[bool, str] | None:
    """(scheduled, message) once the scheduler decided; None while undecided.

    "unbound immediate PersistentVolumeClaims" is not a decision about affinity: the
    scheduler may still see a claim as unbound, and requeues the pod when it binds."""
    if (pod.get("spec") or {}).get("nodeName"):
        return True, ""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            message = cond.get("message") or ""
            if any(text in message for text in messages.any_of("UNBOUND_IMMEDIATE")):
                return None
            return False, message
    return None


def _format_case(v: Verdicts) -> str:
    lines = [f"case {v.case} (PV {v.pv['metadata']['name']}), nodeAffinity:",
             yaml.safe_dump(v.pv["spec"]["nodeAffinity"], sort_keys=False, width=120).rstrip()]
    for name, node in v.nodes.items():
        labels = node["metadata"].get("labels") or {}
        shown = {k: labels[k] for k in (*KEYS, HOSTNAME_KEY, ZONE_KEY) if k in labels}
        mark = "  <-- disagree" if name in v.disagreeing_nodes() else ""
        lines.append(f"  {name}: oracle={'feasible' if v.oracle[name] else 'infeasible'} "
                     f"scheduler={'scheduled' if v.scheduler.get(name) else 'unschedulable'} "
                     f"labels={shown}{mark}")
        if mark and v.messages.get(name):
            lines.append(f"      FailedScheduling: {v.messages[name]}")
    return "\n".join(lines)


# ---- one round on the cluster -----------------------------------------------------------

def _report(request: pytest.FixtureRequest, text: str) -> None:
    """Show a line even when output is captured (the seed must always be visible)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:  # e.g. an xdist worker: captured, shown on failure
        print(text)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(text)


def _relabel(ws: Workspace, rng: Random, nodes: list[Obj], round_value: str) -> dict[str, Obj]:
    """Random vocabulary labels (and the round marker) on every node, each restored at
    cleanup (registered before the patch), then the nodes as they now are."""
    for node in nodes:
        set_node_labels(ws, node["metadata"]["name"],
                        {**random_node_labels(rng), ROUND_KEY: round_value})
    return {n["metadata"]["name"]: n for n in sorted(kinds.list_objects(ws.kube, "Node")[0], key=lambda n: n["metadata"]["name"])}


def _create_all(ws: Workspace, objs: list[Obj]) -> None:
    """Create many pods at once; the API server is the bottleneck, not the order."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda o: kinds.create(ws.kube, o, ws.namespace), objs))


def _all_decided(expected: int) -> Callable[[State], dict[str, Obj] | None]:
    """`wait_for_state` condition: every one of `expected` pods has a verdict."""
    def until(state: State) -> dict[str, Obj] | None:
        if len(state) < expected or any(_pod_verdict(o) is None for o in state.values()):
            return None
        return {o["metadata"]["name"]: o for o in state.values()}
    return until


def _all_scheduled(expected: int) -> Callable[[State], bool | None]:
    return lambda s: True if len(s) == expected and all((o.get("spec") or {}).get("nodeName")
                                                         for o in s.values()) else None


def _all_bound(expected: int) -> Callable[[State], bool | None]:
    return lambda s: True if len(s) == expected and all((o.get("status") or {}).get("phase") == "Bound"
                                                        for o in s.values()) else None


def _hostname(node: Obj) -> str:
    return (node["metadata"].get("labels") or {}).get(HOSTNAME_KEY) or node["metadata"]["name"]


def _pinned_pod(name: str, node: Obj, labels: dict[str, str], claim: str | None = None,
                round_value: str | None = None) -> Obj:
    """A pod the scheduler may only put on `node` (nodeSelector on its hostname label)."""
    selector = {HOSTNAME_KEY: _hostname(node), **({ROUND_KEY: round_value} if round_value else {})}
    return b.pod(name, (claim,) if claim else (), node_selector=selector, labels=labels)


def run_round(ws: Workspace, rng: Random, r: int, cases: int) -> list[Verdicts]:
    """Relabel, create the cases, schedule one pinned pod per (case, node), compare."""
    round_value = f"r{r}"
    before = sorted(kinds.list_objects(ws.kube, "Node")[0], key=lambda n: n["metadata"]["name"])
    nodes = _relabel(ws, rng, before, round_value)
    hostnames = [_hostname(n) for n in nodes.values()]
    zones = sorted({(n["metadata"].get("labels") or {}).get(ZONE_KEY, "") for n in nodes.values()} - {""})
    in_round = {ROUND_KEY: round_value}
    probe_sel = f"{ROUND_KEY}={round_value},{PROBE_KEY}=yes"
    case_sel = f"{ROUND_KEY}={round_value},{PROBE_KEY}=no"

    # Probes: one volume-less pod per node, pinned by hostname AND the new round label.
    # Once all are scheduled, the scheduler's cache holds every node's new labels (each
    # node's labels change in one patch), so no case pod is judged on stale labels.
    probe_labels = {**ws.labels, **in_round, PROBE_KEY: "yes"}
    _create_all(ws, [_pinned_pod(f"probe-{round_value}-{n}", node, probe_labels, round_value=round_value)
                     for n, node in nodes.items()])

    pvs: dict[str, Obj] = {}
    for i in range(cases):
        case = f"{round_value}-c{i:02d}"
        pv = b.persistent_volume(ws.name(f"diff-{case}"), "1Gi", "", affinity=random_affinity(rng, hostnames, zones),
                                 labels={CASE_KEY: f"{ws.namespace[-20:]}-{case}"}, claim_ref=(ws.namespace, case))
        pvs[case] = ws.create(pv)
        ws.create(b.persistent_volume_claim(case, "1Gi", "", volume_name=pv["metadata"]["name"], labels=in_round))

    wait_for_state(ws.kube, "Pod", _all_scheduled(len(nodes)),
                   f"{len(nodes)} probe pods scheduled (the scheduler sees round {round_value}'s labels)",
                   ws.namespace, WAIT_SECONDS, label_selector=probe_sel)
    wait_for_state(ws.kube, "PersistentVolumeClaim", _all_bound(cases), f"{cases} pre-bound claims Bound",
                   ws.namespace, WAIT_SECONDS, label_selector=f"{ROUND_KEY}={round_value}")

    case_labels = {**ws.labels, **in_round, PROBE_KEY: "no"}
    where = {f"{case}-{n}": (case, n) for case in pvs for n in nodes}
    _create_all(ws, [_pinned_pod(pod, nodes[n], case_labels, claim=case) for pod, (case, n) in where.items()])
    decided = wait_for_state(ws.kube, "Pod", _all_decided(len(where)),
                             f"all {len(where)} case pods scheduled or Unschedulable", ws.namespace, WAIT_SECONDS,
                             label_selector=case_sel)

    verdicts = {case: Verdicts(case, pv, nodes, {n: node_matches_pv_affinity(node, pv) for n, node in nodes.items()})
                for case, pv in pvs.items()}
    for pod_name, pod in decided.items():
        case, n = where[pod_name]
        placed, message = _pod_verdict(pod) or (False, "")
        on = (pod.get("spec") or {}).get("nodeName")
        if placed and on != n:  # cannot happen with a hostname nodeSelector; fail loudly if it does
            placed, message = False, f"pinned to {n} but placed on {on}"
        verdicts[case].scheduler[n] = placed
        verdicts[case].messages[n] = message
    _delete_round(ws, round_value)
    return list(verdicts.values())


def _delete_round(ws: Workspace, round_value: str) -> None:
    """Pods of a finished round go before the next relabelling: the invariants checked
    after the test must not see pods whose nodes were relabelled under them."""
    selector = f"{ROUND_KEY}={round_value}"
    ws.kube.core.delete_collection_namespaced_pod(ws.namespace, label_selector=selector, grace_period_seconds=0)
    wait_for_state(ws.kube, "Pod", lambda s: True if not s else None, f"pods of round {round_value} deleted",
                   ws.namespace, WAIT_SECONDS, label_selector=selector)


# ---- the test ---------------------------------------------------------------------------

def test_oracle_agrees_with_scheduler_on_pv_node_affinity(ws: Workspace, request: pytest.FixtureRequest) -> None:
    seed = int(os.environ.get(SEED_ENV) or secrets.randbits(32))
    _report(request, f"[pvchaos] differential test seed={seed} (replay: {SEED_ENV}={seed})")
    allure.dynamic.parameter("seed", seed)
    rng = Random(seed)
    started = time.monotonic()

    results: list[Verdicts] = []
    for r in range(1, ROUNDS + 1):
        with allure.step(f"round {r}: relabel nodes, {CASES_PER_ROUND} PVs x every node"):
            results += run_round(ws, rng, r, CASES_PER_ROUND)
        # The pods of a round are deleted before the next; the nodes keep the last labels.

    pairs = [(v, n) for v in results for n in v.oracle]
    feasible = sum(v.oracle[n] for v, n in pairs)
    shared = sum(1 for v in results if sum(v.scheduler.values()) >= 2)
    ops = Counter(e["operator"] for v in results
                  for t in v.pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
                  for e in t["matchExpressions"])
    _report(request, f"[pvchaos] differential: {len(results)} cases, {len(pairs)} pods, "
                     f"{feasible} feasible / {len(pairs) - feasible} not, {shared} RWO claims used by pods on "
                     f"2+ nodes, operators {dict(ops)}, {time.monotonic() - started:.1f}s (seed={seed})")

    wrong = [v for v in results if v.disagreeing_nodes()]
    if wrong:
        shown = "\n\n".join(_format_case(v) for v in wrong[:10])
        pytest.fail(f"oracle and kube-scheduler disagree on {len(wrong)} of {len(results)} cases "
                    f"(seed={seed}, replay with {SEED_ENV}={seed}):\n\n{shown}", pytrace=False)
    assert len(results) >= 200
    assert shared > 0, "no claim was used by pods on two nodes: ReadWriteOnce sharing went untested"

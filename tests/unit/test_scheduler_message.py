"""Reading kube-scheduler's FailedScheduling message into counts by reason."""

from pvchaos.conformance.scheduler_message import parse


def test_histogram_with_preemption_tail() -> None:
    m = parse("0/6 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity, 4 node(s) had "
              "untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/6 nodes are available: 6 "
              "Preemption is not helpful for scheduling.", 35)
    assert m.total == 6
    assert m.counts == {"NODE_AFFINITY_CONFLICT": 2, "UNTOLERATED_TAINT": 4}
    assert m.pod_wide is None and not m.unknown


def test_taints_of_several_keys_add_up() -> None:
    m = parse("0/3 nodes are available: 1 node(s) had untolerated taint {a: }, 2 node(s) had untolerated taint(s).")
    assert m.counts == {"UNTOLERATED_TAINT": 3}


def test_pod_wide_prefilter_message() -> None:
    m = parse("0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/6 nodes "
              "are available: 6 Preemption is not helpful for scheduling.", 35)
    assert (m.total, m.pod_wide_key, m.counts) == (6, "UNBOUND_IMMEDIATE", {})


def test_wording_by_minor() -> None:
    old = "0/2 nodes are available: 2 node(s) had volume node affinity conflict."
    assert parse(old, 32).counts == {"NODE_AFFINITY_CONFLICT": 2}
    assert parse(old, 35).unknown == {"node(s) had volume node affinity conflict": 2}
    assert parse(old).counts == {"NODE_AFFINITY_CONFLICT": 2}  # version unknown: any wording


def test_unknown_reasons_are_kept() -> None:
    m = parse("0/3 nodes are available: 1 Too many pods, 2 node(s) didn't find available persistent volumes to bind.")
    assert m.counts == {"NO_PV_TO_BIND": 2}
    assert m.unknown == {"Too many pods": 1}
    assert parse("0/3 nodes are available: 3 Insufficient cpu.").counts == {"INSUFFICIENT_CPU": 3}


def test_not_a_filter_message() -> None:
    m = parse('running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded')
    assert m.total is None and m.pod_wide_key is None


def test_postfilter_reports_are_not_reasons() -> None:
    m = parse("0/6 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity, 4 node(s) didn't "
              "match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/6 nodes are "
              "available: 6 Preemption is not helpful for scheduling.", 35)
    assert m.counts == {"NODE_AFFINITY_CONFLICT": 2, "POD_AFFINITY_MISMATCH": 4} and not m.unknown

"""broken_cluster.py on kind: each breakage changes the KindBackend about to start as it
says (pure), and a breakage a backend cannot make is refused in one line."""

from __future__ import annotations

import pytest

from pvchaos.clusters import csi, kind_csi
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.kind import KindBackend, render_yaml
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.storage import HarnessStorage
from pvchaos.clusters.topology import Topology
from tests.selfcheck import broken_cluster as bc


def _backend(**kw: object) -> KindBackend:
    return KindBackend(cluster="x", **kw)  # type: ignore[arg-type]


def test_a_disabled_controller_keeps_kubeadms_own_and_the_harness_flags() -> None:
    broken = bc.break_kind(_backend(), "attach-detach")
    assert broken.kcm_flags == {"node-monitor-grace-period": "8s", "node-monitor-period": "1s",
                                "controllers": "*,bootstrapsigner,tokencleaner,-persistentvolume-attach-detach-controller"}
    assert "controllers: '*,bootstrapsigner,tokencleaner,-persistentvolume-attach-detach-controller'" in render_yaml(
        broken.config())


@pytest.mark.parametrize(("what", "field"), [("no-mount", "fault_no_mount"), ("fsgroup-ignored", "fault_ignore_mount_group"),
                                             ("csi-proxy-inert", "proxy_rules"), ("wrong-zone", "fault_misplace")])
def test_csi_breakages_switch_the_stack_options(what: str, field: str) -> None:
    broken = bc.break_kind(_backend(), what)
    assert isinstance(broken.storage, HarnessStorage)
    assert getattr(broken.storage.csi, field) != getattr(csi.CsiOptions(), field)


def test_the_node_plugin_and_csidriver_carry_the_node_faults() -> None:
    spec = Topology().nodes()[0]
    opts = csi.CsiOptions(fault_no_mount=True, fault_ignore_mount_group=True)
    args = kind_csi.node_plugin_args(spec, opts)
    assert "--fault-no-mount" in args and "--fault-ignore-mount-group" in args
    assert "--fault-no-mount" not in kind_csi.node_plugin_args(spec, csi.CsiOptions())
    assert csi.csi_driver_object(opts)["spec"]["fsGroupPolicy"] == "File"
    assert csi.csi_driver_object(csi.CsiOptions())["spec"]["fsGroupPolicy"] == "File"  # pvchaos-csi's own, too
    asked_none = csi.CsiOptions(fs_group_policy="None")
    assert bc.break_csi(asked_none, "fs-group-policy-file").fs_group_policy == "File"
    assert "--fault-block-file" in kind_csi.node_plugin_args(spec, bc.break_csi(csi.CsiOptions(), "block-file"))


def test_gate_on_only_where_the_cluster_asked_for_it_off() -> None:
    off = _backend(feature_gates={bc.GATE: False})
    assert bc.break_kind(off, "gate-on").feature_gates == {bc.GATE: True}
    assert bc.break_kind(_backend(), "gate-on").feature_gates is None


def test_a_csi_breakage_on_the_test_double_is_refused() -> None:
    with pytest.raises(ClusterError, match="does not run pvchaos-csi"):
        bc.break_kind(_backend(storage=HarnessStorage(test_double=True)), "no-mount")


def test_refusals_name_the_backend_and_what_it_can_make() -> None:
    assert bc.refusal("no-mount", "kind") is None and bc.refusal("attach-detach", "local") is None
    assert "needs real kubelets" in str(bc.refusal("no-mount", "local"))
    assert "kind backend cannot make" in str(bc.refusal("volumebinding", "kind"))
    assert "attaches to" in str(bc.refusal("no-mount", "kind", "mine"))
    assert "starts no cluster" in str(bc.refusal("pv-binder", "existing"))
    assert set(bc.KIND_BREAKAGES) <= set(bc.BREAKAGES)


def test_nodevolumelimits_gives_a_limitless_stack_a_limit_and_keeps_an_asked_one() -> None:
    plain = bc.break_config(LocalClusterConfig(name="a"), "nodevolumelimits")
    assert plain.csi.max_volumes_per_node == bc.BREAKAGE_VOLUME_LIMIT
    assert "NodeVolumeLimits" in plain.disabled_scheduler_plugins
    asked = LocalClusterConfig(name="b", csi=csi.CsiOptions(max_volumes_per_node=1))
    assert bc.break_config(asked, "nodevolumelimits").csi.max_volumes_per_node == 1
    assert bc.break_config(LocalClusterConfig(name="c"), "volumezone").csi.max_volumes_per_node == 0

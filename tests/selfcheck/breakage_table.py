"""Every suite test and the breakage that must make it fail (issue 15).

A test that passes whatever the cluster does proves nothing, so each suite test names
the one breakage of exactly what it checks; `test_breakage_matrix.py` runs every test
under its breakage and requires it to fail, and `tests/unit/test_breakage_table.py`
requires every collected suite test to be listed here and the table in
docs/self-verification.md to be this one. A test no switch can break says why.

Breakages come from two plugins: `broken_cluster.py` (PVCHAOS_BREAK: the cluster is
started broken, or broken right after it starts) and `chaos_breakage.py`
(PVCHAOS_CHAOS_BREAK: kube-controller-manager loses a controller mid-life, or the
expectation table is wrong).

Tests that need real kubelets run on kind only; their entries say `backend="kind"` and
`test_kind_breakage_matrix.py` (tier `kind-matrix`) runs them on kind clusters broken the
same way, while `test_breakage_matrix.py` runs the local ones.
"""

from __future__ import annotations

from dataclasses import dataclass

BROKEN_CLUSTER = ("tests.selfcheck.broken_cluster", "PVCHAOS_BREAK")
CHAOS_BREAKAGE = ("tests.selfcheck.chaos_breakage", "PVCHAOS_CHAOS_BREAK")

# breakage -> (plugin module, environment variable)
PLUGIN_OF: dict[str, tuple[str, str]] = {
    **{b: BROKEN_CLUSTER for b in ("volumebinding", "pv-binder", "provisioner", "nodeaffinity",
                                   "noderesourcesfit", "volumerestrictions", "volumezone", "attach-detach",
                                   "no-capacity-tracking", "csi-no-topology", "nodevolumelimits", "csi-proxy-inert", "pod-gc",
                                   "zone-threshold", "slow-node-monitor", "gate-on", "apiserver-gate-off",
                                   "no-reschedule", "wrong-zone", "no-copies", "no-resize-admission", "no-mount",
                                   "fsgroup-ignored", "node-plugin-returns", "block-file", "fs-group-policy-file",
                                   "no-inline", "pv-affinity-denied", "pv-affinity-defaulted",
                                   "attach-anyway", "resizer", "resizer-no-modify", "no-distributed-snapshotting")},
    **{b: CHAOS_BREAKAGE for b in ("node-lifecycle", "taint-eviction", "wrong-mutation-table", "wrong-kubelet-table",
                                   "wrong-fs-group-change-table")},
}
BACKENDS = ("local", "kind")


@dataclass(frozen=True)
class Entry:
    """What must make one test fail, or why nothing can."""

    breakage: str | None
    why: str
    backend: str = "local"  # where the matrix breaks it: "kind" for tests that need real kubelets
    package: str | None = None  # a vendor package the kind run installs (--driver-package), for vendor-only cases

    @property
    def run(self) -> str | None:
        """The matrix's name of the run that breaks it: the breakage, and the package if any."""
        if self.breakage is None:
            return None
        return f"{self.breakage}@{self.package}" if self.package else self.breakage


def _e(breakage: str, why: str) -> Entry:
    return Entry(breakage, why)


def _k(breakage: str, why: str) -> Entry:
    """A kind-only test (real kubelets): broken and run on kind (tier kind-matrix)."""
    return Entry(breakage, why, "kind")


def _kp(breakage: str, package: str, why: str) -> Entry:
    """A case only a vendor's driver reaches: broken and run on kind with that package."""
    return Entry(breakage, why, "kind", package)


def split_run(run: str) -> tuple[str, str | None]:
    """A matrix run's name back into its breakage and package (Entry.run)."""
    breakage, _, package = run.partition("@")
    return breakage, package or None


def _none(why: str) -> Entry:
    return Entry(None, why)


BM, CR, LC, LV = "test_binding_modes", "test_component_restart", "test_label_changes", "test_local_volumes"
NF, PM, RK, RC = "test_node_failure", "test_pv_affinity_mutation", "test_real_kubelet", "test_reclaim"
SP, SB, ZO = "test_spreading", "test_static_binding", "test_zone_outage"
VP, AD, CA, CT = "test_volume_plugins", "test_attach_detach", "test_capacity", "test_csi_topology"
RS, KV = "test_rescheduling", "test_kubelet_volume_affinity"
CF = "test_csi_faults"
SN = "test_snapshots"
BV = "test_block_volumes"
_NO_SNAPSHOTS = ("a driver that advertises no CREATE_DELETE_SNAPSHOT, with no csi-snapshotter: the VolumeSnapshot "
                 "never becomes readyToUse")
_INERT = "the CSI fault proxy ignoring its rules: the injected fault never happens, and the test sees that"
IE = "test_inline_ephemeral"
_KIND_NO_INLINE = ("a CSIDriver that lists the Persistent lifecycle mode only: the kubelet refuses the inline volume, "
                   "FailedMount 'volume mode \"Ephemeral\" not supported', the pod never runs")

_STATIC_CASES = ("smallest-fit-wins", "100Gi-never-satisfies-120Gi", "1Ti-satisfies-100Gi", "rwo-pv-refuses-rwx-claim",
                 "rox-claim-binds-multi-mode-pv", "rox-pv-refuses-rwo-claim", "block-pv-refuses-filesystem-claim",
                 "block-claim-binds-block-pv", "class-mismatch-stays-pending", "selector-picks-labelled-pv",
                 "selector-excludes-every-pv")
_KIND_INERT = ("the nodes' CSI fault proxy ignoring its rules: the NodeStage/NodePublish fault never happens, no "
               "FailedMount with the driver's message")
_WRONG_KUBELET = ("the expectation is a table (conformance/kubelet_admission.py); a wrong one (every kubelet refuses) "
                  "must show as a failure against what the real kubelet does")
_BLOCK_FILE = ("the node plugin publishing a block volume's backing file as it is (no loop device): the container "
               "runtime refuses the pod's volumeDevices, \"not a device node\"")
_BLOCK_BINDING = ("the VolumeBinding plugin decides which volume a WaitForFirstConsumer claim gets (and selects the node "
                  "the driver provisions for); without it the claim is never given a node, nor a volume")
_MISMATCH_CASES = ("too-small", "class", "volume-mode", "access-mode")
_PV_BINDER_WHY = "the PV controller decides static binding and reports mismatches; without it nothing binds or is reported"
_GATE_WHY = "the update needs the gate in the API server; without it the API rejects the mutation"
_DENIED_WHY = ("Kubernetes' validation accepts this update with the gate off; a cluster whose admission refuses "
               "PV affinity changes (a policy engine's rule) must fail the test, not pass it")
_VALIDATION_WHY = ("Kubernetes' validation rejects an empty nodeAffinity with the gate on (the gate relaxes "
                   "immutability, not the shape); a cluster whose admission repairs the update before validation "
                   "(a defaulting policy removing the empty affinity) accepts it, and the test must fail, not pass")

TABLE: dict[str, Entry] = {
    f"{BV}::test_bytes_written_to_the_device_are_read_by_the_next_pod": _k("block-file", _BLOCK_FILE),
    f"{BV}::test_restore_of_a_block_snapshot_holds_the_source_bytes": _k("block-file", _BLOCK_FILE),
    f"{BV}::test_block_claim_is_provisioned_in_the_selected_nodes_domain": _e("volumebinding", _BLOCK_BINDING),
    **{f"{BV}::test_a_claim_never_binds_a_volume_of_the_other_mode[{case}]": _e("volumebinding", _BLOCK_BINDING)
       for case in ("block-claim-filesystem-volume", "filesystem-claim-block-volume")},
    f"{IE}::test_inline_volume_is_written_read_and_unpublished_with_its_pod": _k("no-inline", _KIND_NO_INLINE),
    f"{IE}::test_kubelet_publishes_the_inline_volume_as_ephemeral_and_unpublishes_it": _k("no-inline", _KIND_NO_INLINE),
    f"{IE}::test_inline_volumes_do_not_count_against_the_node_volume_limit": _e(
        "nodevolumelimits", "without NodeVolumeLimits the full node takes the pod with one more claim, so the test "
        "cannot tell the inline volumes were left out of the count (on kind, no-inline fails it too: the inline pod "
        "never runs)"),
    f"{SN}::test_node_local_snapshot_is_cut_and_restored_on_its_node": _k(
        "no-distributed-snapshotting", "the snapshot-controller's distributed snapshotting alone labels the content "
        "with its node; without it no node's csi-snapshotter takes the content and the snapshot is never ready"),
    f"{SN}::test_restore_has_the_source_bytes_and_its_pod_follows_the_volume": _e("no-copies", _NO_SNAPSHOTS),
    f"{SN}::test_restore_for_a_pod_pinned_elsewhere": _e("no-copies", _NO_SNAPSHOTS),
    f"{SN}::test_clone_for_a_pod_pinned_elsewhere": _e(
        "no-copies", "a driver that advertises no CLONE_VOLUME: the external-provisioner refuses the claim's "
                     "dataSource, so the clone is never provisioned where its source is"),
    f"{SN}::test_snapshot_outlives_its_source": _e("no-copies", _NO_SNAPSHOTS),
    f"{SN}::test_deleting_a_snapshot_removes_its_content": _e("no-copies", _NO_SNAPSHOTS),
    f"{SN}::test_snapshot_class_deleted_midway_strands_nothing": _e("no-copies", _NO_SNAPSHOTS),
    f"{SN}::test_delete_snapshot_failing_keeps_the_snapshot_until_restore": _e("csi-proxy-inert", _INERT),
    f"{SN}::test_clone_has_the_source_bytes_and_its_pod_follows_the_volume": _e(
        "no-copies", "a driver without CLONE_VOLUME: the external-provisioner refuses the claim's dataSource, the "
                     "clone is never Bound"),
    f"{CF}::test_controller_publish_error_then_attached_after_restore": _e("csi-proxy-inert", _INERT),
    f"{CF}::test_slow_attach_delays_the_pod_by_the_delay": _e("csi-proxy-inert", _INERT),
    f"{CF}::test_node_call_error_holds_the_pod_until_restore[NodeStageVolume]": _k("csi-proxy-inert", _KIND_INERT),
    f"{CF}::test_node_call_error_holds_the_pod_until_restore[NodePublishVolume]": _k("csi-proxy-inert", _KIND_INERT),
    f"{CF}::test_create_volume_exhausted_on_one_node_moves_the_pod": _e("csi-proxy-inert", _INERT),
    f"{CF}::test_delete_volume_failing_keeps_the_pv_until_restore": _e("csi-proxy-inert", _INERT),
    f"{CF}::test_deregistered_driver_does_not_let_the_node_take_more_volumes": _e(
        "nodevolumelimits", "NodeVolumeLimits is what keeps the node's count once the driver is registered again "
        "(the pod must stay Unschedulable with MAX_VOLUME_COUNT)"),
    f"{CF}::test_node_that_joins_is_not_filled_past_its_limit": _e(
        "nodevolumelimits", "NodeVolumeLimits reads the joined node's CSINode count; without it every waiting pod "
        "lands there, and the volume-limit invariant reports the node too"),
    f"{BM}::test_immediate_binding_strands_pod_in_other_zone": _e(
        "volumebinding", "the VolumeBinding plugin is what rejects a node outside the bound PV's affinity"),
    f"{BM}::test_wait_for_first_consumer_provisions_in_pod_zone": _e(
        "wrong-zone", "a driver that ignores the selected node's topology puts the volume in another zone"),
    f"{BM}::test_allowed_topologies_limit_immediate_provisioning": _e(
        "provisioner", "Immediate provisioning is the provisioner's alone"),
    f"{BM}::test_pod_pinned_outside_allowed_topologies_fails": _e(
        "volumebinding", "the VolumeBinding plugin rejects nodes outside the class's allowedTopologies"),
    f"{BM}::test_unbound_immediate_claim_blocks_pod": _e(
        "volumebinding", "the VolumeBinding plugin holds pods with unbound Immediate claims"),
    f"{BM}::test_ephemeral_storage_beyond_any_node_stays_pending": _e(
        "noderesourcesfit", "NodeResourcesFit keeps a pod off nodes without the ephemeral storage it requests"),
    f"{CR}::test_scheduler_restart_mid_binding": _e(
        "volumebinding", "after the restart, WaitForFirstConsumer claims bind through the VolumeBinding plugin"),
    f"{CR}::test_controller_manager_restart_mid_binding": _e(
        "pv-binder", "after the restart, the PV controller binds the waiting claims"),
    f"{LC}::test_running_pod_stays_new_pods_follow_new_labels": _e(
        "nodeaffinity", "the NodeAffinity plugin makes new pods follow nodeSelector labels (three new pods must all "
        "land on storage=ssd nodes and one on the relabelled node: a scheduler ignoring labels passes that by chance "
        "about once in 160 runs)"),
    f"{LC}::test_node_without_zone_label_gets_no_zonal_pods": _e(
        "volumebinding", "the VolumeBinding plugin rejects a node whose labels no longer match the PV's affinity"),
    f"{LV}::test_statefulset_on_local_pvs": _e(
        "volumebinding", "local PVs bind through the VolumeBinding plugin when the pod is placed"),
    f"{LV}::test_statefulset_on_dynamic_local_volumes": _e(
        "volumebinding", "the VolumeBinding plugin selects the node a local volume is provisioned on"),
    f"{NF}::test_node_failure_taints_and_evicts_on_schedule": _e(
        "taint-eviction", "the taint-eviction controller evicts on the toleration schedule"),
    f"{NF}::test_statefulset_zonal_volume_moves_within_zone": _e(
        "node-lifecycle", "the node-lifecycle controller marks the lost node unreachable, which the test waits for "
        "before it force-deletes the replica"),
    f"{NF}::test_generic_ephemeral_volume_follows_its_pod_off_a_lost_node": _e(
        "taint-eviction", "the taint-eviction controller evicts the pod from the lost node; without it no replacement "
                          "(and no claim of its own) is ever made"),
    f"{NF}::test_statefulset_on_a_node_pinned_volume_waits_for_its_node": _e(
        "volumebinding", "the VolumeBinding plugin keeps the replacement off nodes its node-pinned volume excludes "
                         "(and without it the claim is never provisioned)"),
    f"{NF}::test_statefulset_local_volume_waits_for_its_node": _e(
        "volumebinding", "the VolumeBinding plugin keeps the replacement off nodes its local PV excludes"),
    f"{NF}::test_out_of_service_taint_moves_replica": _e(
        "pod-gc", "the pod garbage collector force-deletes pods of a node with the out-of-service taint"),
    f"{PM}::test_gate_off_update[change-existing-rejected]": _e(
        "gate-on", "with the gate on the API accepts the change the gate-off cluster must reject"),
    f"{PM}::test_gate_off_update[set-where-none-accepted]": _e("pv-affinity-denied", _DENIED_WHY),
    f"{PM}::test_gate_off_update[beta-to-ga-key-accepted]": _e("pv-affinity-denied", _DENIED_WHY),
    f"{PM}::test_seed_kubectl_merge_patch_is_accepted": _e("apiserver-gate-off", _GATE_WHY),
    f"{PM}::test_mutation_keeps_pv_bound_refuting_available_and_rebind_claim": _e(
        "wrong-mutation-table", "the expected outcome comes from the expectation table; a wrong table must show as a diff"),
    f"{PM}::test_relax_add_zone_schedules_pending_pod": _e("apiserver-gate-off", _GATE_WHY),
    f"{PM}::test_relax_zone_to_region_schedules_pending_pod": _e("apiserver-gate-off", _GATE_WHY),
    f"{PM}::test_dynamic_volume_moved_stays_bound_and_new_pods_follow[provisioned]": _e(
        "apiserver-gate-off", "the update needs the gate in the API server; without it the API rejects the mutation"),
    f"{PM}::test_dynamic_volume_moved_stays_bound_and_new_pods_follow[restored]": _e(
        "apiserver-gate-off", "the update of the restored volume's PV needs the gate in the API server; without it the "
                              "API rejects the mutation"),
    f"{PM}::test_tightening_race_is_measured": _e("apiserver-gate-off", _GATE_WHY),
    f"{PM}::test_gate_on_still_validates[empty-affinity]": _e("pv-affinity-defaulted", _VALIDATION_WHY),
    f"{PM}::test_gate_on_still_validates[empty-terms]": _e("pv-affinity-defaulted", _VALIDATION_WHY),
    f"{PM}::test_retain_workflow_after_mutation": _e("apiserver-gate-off", _GATE_WHY),
    f"{RK}::test_local_volume_data_survives_node_crash_and_return": _k(
        "no-mount", "a node plugin that gives the pod scratch space instead of its volume: after the node's reboot the "
                    "new container reads no marker (it writes a new one)"),
    f"{RK}::test_moved_volume_brings_the_pod_back_with_the_same_bytes": _k(
        "no-mount", "the bytes the pod reads must be the ones in its volume's directory; a node plugin that never "
                    "mounts the volume leaves them elsewhere"),
    f"{RK}::test_moved_volume_without_the_gate_leaves_the_pod_pending": _k(
        "gate-on", "with the gate on the API accepts the affinity change the gate-off cluster must refuse"),
    f"{RK}::test_move_without_the_copy_fails_the_mount_and_is_explained": _k(
        "no-mount", "a node plugin that stages without looking lets the pod run where the volume's data is not: "
                    "no FailedMount"),
    f"{RK}::test_node_plugin_gone_leaves_the_pod_in_container_creating": _k(
        "node-plugin-returns", "a node plugin its node starts again registers again and the second pod starts (the "
                               "fault does not hold): the test must see the pod run, not stay ContainerCreating"),
    f"{RC}::test_delete_policy_removes_volume": _e("provisioner", "the provisioner deletes a released dynamic volume"),
    f"{RC}::test_retain_policy_released_until_claim_ref_cleared": _e(
        "pv-binder", "the PV controller moves a PV to Released and back to Available"),
    f"{RC}::test_switch_to_retain_keeps_volume": _e("pv-binder", "the PV controller releases and keeps the volume"),
    f"{RS}::test_wait_for_first_consumer_failure_reschedules_the_same_pod_elsewhere": _e(
        "no-reschedule", "the provisioner gives the claim back (removes selected-node) so the scheduler can pick again"),
    f"{RS}::test_immediate_failure_is_retried_without_a_selected_node": _e(
        "provisioner", "the provisioner's own retries bind the claim after the failures the class asks for"),
    f"{SP}::test_topology_spread_puts_replicas_and_volumes_in_distinct_zones": _e(
        "volumebinding", "the VolumeBinding plugin provisions each replica's volume in its pod's zone"),
    f"{SP}::test_per_zone_classes_with_anti_affinity": _e(
        "volumebinding", "the VolumeBinding plugin provisions each volume where its class and pod allow"),
    **{f"{SB}::test_static_binding[{case}]": _e("pv-binder", _PV_BINDER_WHY) for case in _STATIC_CASES},
    f"{SB}::test_class_name_typo_is_reported": _e("pv-binder", _PV_BINDER_WHY),
    f"{SB}::test_volume_name_binds_that_pv_not_the_smallest": _e("pv-binder", _PV_BINDER_WHY),
    **{f"{SB}::test_volume_name_mismatch_is_reported[{case}]": _e("pv-binder", _PV_BINDER_WHY)
       for case in _MISMATCH_CASES},
    f"{CT}::test_selected_node_without_the_driver_has_no_topology": _e(
        "csi-no-topology", "without the Topology gate the provisioner never looks at CSINode and provisions anyway"),
    f"{CT}::test_no_node_with_the_driver_means_no_available_topology": _e(
        "csi-no-topology", "without the Topology gate an Immediate claim is provisioned with no requirements"),
    f"{CT}::test_strict_topology_narrows_the_requisite[default]": _e(
        "csi-no-topology", "without the Topology gate CreateVolume carries no requisite at all"),
    f"{CT}::test_strict_topology_narrows_the_requisite[strict]": _e(
        "csi-no-topology", "without the Topology gate CreateVolume carries no requisite at all"),
    f"{CT}::test_node_at_its_volume_limit_takes_no_more": _e(
        "nodevolumelimits", "NodeVolumeLimits is what reads the CSINode allocatable count"),
    f"{CT}::test_the_drivers_own_volume_limit_is_enforced": _e(
        "nodevolumelimits", "the breakage gives pvchaos-csi a limit of 4 (it reports none by default, and the test "
                            "then skips as not applicable); without NodeVolumeLimits the fifth pod runs on the full "
                            "node"),
    "test_fs_group::test_fs_group_follows_the_drivers_policy[driver]": _k(
        "fsgroup-ignored", "fsGroupPolicy File, but a node plugin that takes the fsGroup (VOLUME_MOUNT_GROUP) and "
                           "ignores it: the volume's root keeps its group"),
    "test_fs_group::test_fs_group_follows_the_drivers_policy[None]": _k(
        "fs-group-policy-file", "the test asked for fsGroupPolicy None; a CSIDriver that says File instead makes the "
                                "kubelet give the volume the group"),
    "test_fs_group::test_on_root_mismatch_skips_a_volume_whose_root_matches": _k(
        "wrong-fs-group-change-table", "the expected ownership comes from the fsGroupChangePolicy oracle "
        "(conformance/fs_group_change.py); a wrong one (the kubelet walks whatever the policy) must show as the "
        "file's group against what the real kubelet does"),
    f"{CA}::test_capacity_objects_follow_the_driver": _e(
        "no-capacity-tracking", "the external-provisioner publishes CSIStorageCapacity only with capacity tracking on"),
    f"{CA}::test_full_zone_is_filtered_out": _e(
        "no-capacity-tracking", "without capacity objects the scheduler cannot tell the zone is full"),
    f"{CA}::test_every_zone_full_leaves_the_pod_pending": _e(
        "no-capacity-tracking", "without capacity objects no capacity reason is ever given"),
    f"{CA}::test_stale_capacity_reschedules_to_another_zone": _e(
        "no-capacity-tracking", "without capacity objects the scheduler keeps choosing the preferred full zone"),
    f"{AD}::test_volume_attachment_timeline": _e(
        "attach-detach", "the attach/detach controller creates the VolumeAttachment the attacher attaches"),
    f"{AD}::test_lost_node_keeps_the_volume_until_the_out_of_service_taint": _k(
        "attach-detach", "the attach/detach controller attaches, keeps and (after the taint) detaches the volume; "
                         "without it the writer's volume is never attached and the writer never runs"),
    f"{AD}::test_returning_node_clears_the_stale_volume_attachment": _k(
        "attach-detach", "the attach/detach controller keeps and (after the node's return) detaches the stale "
                         "attachment; without it the writer's volume is never attached and the writer never runs"),
    f"{AD}::test_a_driver_without_attach_makes_no_volume_attachment[driver]": _kp(
        "attach-anyway", "examples/vendor-node-local",
        "runs only with a driver whose CSIDriver says attachRequired false (pvchaos-csi attaches): with the node-local "
        "example package, its CSIDriver replaced by one saying true makes the attach/detach controller wait on a "
        "VolumeAttachment nobody answers"),
    f"{AD}::test_a_driver_without_attach_makes_no_volume_attachment[asked]": _e(
        "attach-anyway", "the test asked pvchaos-csi for attachRequired false; a CSIDriver that says true instead "
                         "makes the attach/detach controller create a VolumeAttachment"),
    f"{AD}::test_attach_the_driver_refuses_is_explained": _e(
        "attach-detach", "the attach/detach controller makes the attach the driver refuses and reports FailedAttachVolume"),
    f"{VP}::test_read_write_once_pod_claim_admits_one_pod": _e(
        "volumerestrictions", "VolumeRestrictions is what keeps a second pod off a ReadWriteOncePod claim in use"),
    f"{VP}::test_higher_priority_pod_preempts_the_read_write_once_pod_holder": _e(
        "volumerestrictions", "without VolumeRestrictions the urgent pod schedules beside the holder, nothing is preempted"),
    f"{VP}::test_zone_labels_without_node_affinity_place_the_pod[anywhere]": _e(
        "volumezone", "VolumeZone is what keeps the pods in the zone their PV is labelled with (without it they follow "
        "their soft preference for another zone, every run)"),
    f"{VP}::test_zone_labels_without_node_affinity_place_the_pod[pinned-to-another-zone]": _e(
        "volumezone", "VolumeZone rejects nodes outside the PV's zone label"),
    f"{KV}::test_affinity_tightened_before_the_kubelet_starts_the_pod": _k("wrong-kubelet-table", _WRONG_KUBELET),
    f"{KV}::test_affinity_tightened_then_the_pod_restarts_on_its_node": _k("wrong-kubelet-table", _WRONG_KUBELET),
    f"{ZO}::test_replica_on_a_volume_of_the_down_zone_waits_for_it": _e(
        "volumebinding", "the VolumeBinding plugin keeps the replacement off nodes its bound volume's affinity "
                         "excludes (and without it the replica's claim is never provisioned)"),
    f"{ZO}::test_generic_ephemeral_volume_is_made_anew_outside_the_down_zone": _e(
        "taint-eviction", "the taint-eviction controller evicts the pod from the down zone; without it no replacement "
                          "(and no claim of its own in a healthy zone) is ever made"),
    f"{ZO}::test_single_zone_outage_evicts_that_zone": _e(
        "taint-eviction", "the taint-eviction controller evicts the down zone's pods"),
    f"{ZO}::test_all_zones_down_evicts_nothing": _e(
        "node-lifecycle", "the node-lifecycle controller must see every node Unknown and enter master disruption "
        "mode; no switch makes it evict in that mode, so the test is proven on its first half"),
    f"{ZO}::test_partial_zone_disruption_stops_tainting": _e(
        "zone-threshold", "the node-lifecycle controller's unhealthy-zone threshold is what stops the tainting"),
    "test_expansion::test_a_claim_of_a_class_without_expansion_cannot_grow": _e(
        "no-resize-admission", "PersistentVolumeClaimResize admission is what refuses to grow a claim of a class "
                               "without allowVolumeExpansion; validation alone accepts it"),
    "test_expansion::test_a_bound_claim_grows_with_its_volume": _e(
        "resizer", "the external-resizer alone calls ControllerExpandVolume and grows the PV: for a CSI volume that is "
                   "not migrated it needs nothing from kube-controller-manager (it matches the PV's spec.csi.driver, "
                   "external-resizer v2.3.0 CanSupport; the suite passes without the expand controller)"),
    "test_expansion::test_a_bound_claim_takes_a_volume_attributes_class": _e(
        "resizer-no-modify", "the external-resizer's modify controller alone calls ControllerModifyVolume and sets the "
                             "claim's currentVolumeAttributesClassName; a resizer without its VolumeAttributesClass "
                             "gate still grows volumes and leaves the claim's class unapplied"),
    "test_volume_stress::test_pods_with_volumes_on_one_node": _e(
        "provisioner", "the provisioner creates every volume the pods wait for, and deletes each one after its claim"),
}


def by_breakage(backend: str = "local") -> dict[str, list[str]]:
    """Breakage -> the suite test ids (suites/<file>.py::<test>) that must fail under it
    on this backend's matrix."""
    out: dict[str, list[str]] = {}
    for test, entry in TABLE.items():
        if entry.run is not None and entry.backend == backend:
            module, name = test.split("::", 1)
            out.setdefault(entry.run, []).append(f"suites/{module}.py::{name}")
    return out


def markdown() -> str:
    """The table as it stands in docs/self-verification.md."""
    lines = ["| suite test | breakage that must make it fail | why |", "| --- | --- | --- |"]
    for test, entry in sorted(TABLE.items()):
        where = (f" (kind, `--driver-package {entry.package}`)" if entry.package
                 else " (kind)" if entry.backend == "kind" else "")
        lines.append(f"| `{test.removeprefix('test_')}` | {f'`{entry.breakage}`{where}' if entry.breakage else 'none'} "
                     f"| {entry.why} |")
    return "\n".join(lines)

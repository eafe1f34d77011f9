// Package driver is pvchaos-csi: a small CSI driver that does what the CSI spec says, so
// the harness can put the upstream external-provisioner and external-attacher in the loop.
//
// The contract other code relies on:
//
//   - Volume modes, from the class parameter pvchaos.dev/topology: "zone" (default;
//     accessible_topology [{topology.kubernetes.io/zone: Z}], or none without
//     requirements) and "node" (node-local; [{kubernetes.io/hostname: H}]).
//   - volume_context: pvchaos.dev/topology, pvchaos.dev/zone, pvchaos.dev/node (when
//     known), pvchaos.dev/capacity-bytes. publish_context: pvchaos.dev/attached-to.
//   - The failure knob: pvchaos.dev/fail-{times,nodes,zones,first-node,code,action,reason,delay}
//     (knob.go); any other pvchaos.dev/ key is INVALID_ARGUMENT.
//   - --control-dir/capacity.json: {"<zone>": "<quantity>"}, read on every call.
//   - The state file (state.go): {"volumes": {id: {...,"published": {node: {...}},
//     "source_snapshot"|"source_volume"}}, "snapshots": {id: {...}}, "node_zones":
//     {hostname: zone}, "knob_attempts": {name: {"failed", "first_node"}}}.
//   - Snapshots and clones (controller_snapshot.go, controller_source.go): a snapshot is a
//     copy of its source's bytes in <data-root>/snapshots/<id>; a restore or clone copies
//     them into the new volume, which keeps the source's mode, zone and node.
//   - The calls log (callslog.go): one JSON object per line with time, service, method,
//     request, code ("OK", a gRPC code name, or "Crash"), message, duration_ms, response.
//   - Node backing directories: <data-root>/zone/<id> (the zone's shared directory) and
//     <data-root>/local/<id>; a block volume's data is the file "block" inside it, which
//     NodeStage attaches a loop device over and NodePublish bind-mounts (loop.go).
//   - Inline ephemeral volumes (ephemeral.go): a NodePublishVolume whose volume_context has
//     csi.storage.k8s.io/ephemeral=true (the kubelet adds it with podInfoOnMount) needs no
//     staging path; its data is <data-root>/ephemeral/<the kubelet's csi-<sha256> id>, made
//     at publish and removed at NodeUnpublishVolume. Attributes: pvchaos.dev/size (a
//     quantity the node's free space must hold); any other pvchaos.dev/ key is INVALID_ARGUMENT.
package driver

package driver

// The rules of ControllerPublishVolume, as a pure function over the volume's recorded
// attachments, so they can be tested without a server.

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PublishRequest is what the rules need to know about one call.
type PublishRequest struct {
	NodeID     string
	Hostname   string // the node's hostname (= NodeID unless the controller knows the node)
	AccessMode csi.VolumeCapability_AccessMode_Mode
	Readonly   bool
	MaxVolumes int64 // the node's max_volumes_per_node when known, 0: no limit
}

// CheckPublish returns nil when the volume may be attached to the node (already == true
// when it is attached there compatibly: the idempotent repeat), else the status the spec
// names for the conflict.
func CheckPublish(v *Volume, attachedToNode int, r PublishRequest) (already bool, err error) {
	if a := v.Published[r.NodeID]; a != nil {
		if a.AccessMode == r.AccessMode.String() && a.Readonly == r.Readonly {
			return true, nil
		}
		return false, status.Errorf(codes.AlreadyExists,
			"volume %s is already published to node %s as %s readonly=%v, not %s readonly=%v",
			v.ID, r.NodeID, a.AccessMode, a.Readonly, r.AccessMode, r.Readonly)
	}
	if v.Mode == ModeNode && v.Node != r.Hostname {
		// A node-local volume exists on one node only: attaching it elsewhere cannot work.
		return false, status.Errorf(codes.FailedPrecondition,
			"volume %s is local to node %s and cannot be published to node %s", v.ID, v.Node, r.NodeID)
	}
	for other, a := range v.Published {
		otherMode := csi.VolumeCapability_AccessMode_Mode(csi.VolumeCapability_AccessMode_Mode_value[a.AccessMode])
		if singleNode(r.AccessMode) || singleNode(otherMode) {
			// As a cloud disk: a single-node volume is attached to one node at a time; the
			// spec's "Volume published to another node", naming that node.
			return false, status.Errorf(codes.FailedPrecondition,
				"volume %s is published to another node %s (%s); cannot publish to node %s", v.ID, other, a.AccessMode, r.NodeID)
		}
	}
	if r.MaxVolumes > 0 && int64(attachedToNode) >= r.MaxVolumes {
		return false, status.Errorf(codes.ResourceExhausted,
			"node %s already has %d volumes attached (max_volumes_per_node %d); cannot publish volume %s",
			r.NodeID, attachedToNode, r.MaxVolumes, v.ID)
	}
	return false, nil
}

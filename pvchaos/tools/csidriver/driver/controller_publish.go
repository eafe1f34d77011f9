package driver

// ControllerPublishVolume and ControllerUnpublishVolume: attachments recorded in the
// state file, with the rules of publish.go.

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CtxAttachedTo is the publish_context key: the node the volume was attached to.
const CtxAttachedTo = ParamPrefix + "attached-to"

func (c *Controller) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	id, node := req.GetVolumeId(), req.GetNodeId()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	case node == "":
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: node_id missing", id)
	case req.GetVolumeCapability() == nil:
		return nil, status.Errorf(codes.InvalidArgument, "volume %s node %s: volume_capability missing", id, node)
	}
	if c.cfg.FaultNeverAttach {
		c.log.Eventf("never attaching volume %s to node %s (--fault-never-attach): waiting for the caller to give up", id, node)
		<-ctx.Done()
		return nil, status.Errorf(codes.DeadlineExceeded, "volume %s node %s: attach did not complete", id, node)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st.Volumes[id]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist (node %s)", id, node)
	}
	if why := CheckCapability(req.GetVolumeCapability(), v.Mode); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s node %s: %s", id, node, why)
	}
	r := PublishRequest{NodeID: node, Hostname: node, AccessMode: req.GetVolumeCapability().GetAccessMode().GetMode(), Readonly: req.GetReadonly()}
	if len(c.cfg.Nodes) > 0 {
		known, ok := c.knownNode(node)
		if !ok {
			return nil, status.Errorf(codes.NotFound, "node %s does not exist (volume %s)", node, id)
		}
		r.Hostname, r.MaxVolumes = known.Hostname, known.MaxVolumes
	}
	moves, err := VolumeMoves(c.cfg.ControlDir)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, node, err)
	}
	if from := v.Node; ApplyMove(v, moves) {
		if err := c.save(); err != nil {
			v.Node = from
			return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, node, err)
		}
		c.log.Eventf("volume %s moved by the operator from node %s to node %s (%s)", id, from, v.Node, MovesFile)
	}
	already, err := CheckPublish(v, c.st.AttachedTo(node), r)
	if err != nil {
		return nil, err
	}
	if n := c.st.AttachedTo(node); !already && c.cfg.FaultAttachLimit > 0 && n >= c.cfg.FaultAttachLimit {
		return nil, status.Errorf(codes.ResourceExhausted, "volume %s node %s: %d volumes attached already, the storage attaches at most %d per node (--fault-attach-limit)",
			id, node, n, c.cfg.FaultAttachLimit)
	}
	if !already {
		if v.Published == nil {
			v.Published = map[string]*Attachment{}
		}
		v.Published[node] = &Attachment{AccessMode: r.AccessMode.String(), Readonly: r.Readonly}
		if err := c.save(); err != nil {
			delete(v.Published, node)
			return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, node, err)
		}
		c.log.Eventf("published volume %s to node %s (%s readonly=%v)", id, node, r.AccessMode, r.Readonly)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{CtxAttachedTo: node}}, nil
}

// ControllerUnpublishVolume is idempotent: an unknown volume, or a node it is not
// published to, is OK (the spec: the volume "can be safely regarded as ControllerUnpublished
// from the node"). No node_id means every node, as the spec says.
func (c *Controller) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id, node := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st.Volumes[id]
	if v == nil || len(v.Published) == 0 || (node != "" && v.Published[node] == nil) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	removed := map[string]*Attachment{}
	for n, a := range v.Published {
		if node == "" || n == node {
			removed[n] = a
			delete(v.Published, n)
		}
	}
	if err := c.save(); err != nil {
		for n, a := range removed {
			v.Published[n] = a
		}
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, node, err)
	}
	c.log.Eventf("unpublished volume %s from node(s) %v", id, sortedKeys(removed))
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

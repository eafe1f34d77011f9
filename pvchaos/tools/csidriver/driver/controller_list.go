package driver

// The read-only controller RPCs: ListVolumes, GetCapacity, ValidateVolumeCapabilities.

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ListVolumes pages through the volumes in id order (pagination.go), each with the nodes
// it is published to.
func (c *Controller) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, next, err := pageStatus(c.st.SortedIDs(), req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	out := &csi.ListVolumesResponse{NextToken: next}
	for _, id := range ids {
		v := c.st.Volumes[id]
		out.Entries = append(out.Entries, &csi.ListVolumesResponse_Entry{
			Volume: c.csiVolume(v),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: v.PublishedNodes()},
		})
	}
	return out, nil
}

// pageStatus is Page with its errors as the list RPCs answer them: a token this driver
// never handed out is ABORTED (the spec's "Invalid starting_token"), a negative
// max_entries INVALID_ARGUMENT.
func pageStatus(sortedIDs []string, token string, maxEntries int32) ([]string, string, error) {
	ids, next, err := Page(sortedIDs, token, maxEntries)
	if errors.Is(err, ErrBadToken) {
		return nil, "", status.Error(codes.Aborted, err.Error())
	}
	if err != nil {
		return nil, "", status.Error(codes.InvalidArgument, err.Error())
	}
	return ids, next, nil
}

// GetCapacity answers for one segment: its zone (the zone key, else the zone learnt for
// its hostname) minus what live volumes there hold; a zone without configured capacity,
// or a segment whose zone is unknown, is unlimited.
func (c *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if _, err := ParseParams(req.GetParameters()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	capacities, err := ZoneCapacities(c.cfg.ControlDir)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "control file: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seg := FromWire(req.GetAccessibleTopology().GetSegments(), c.cfg.NodeKey)
	zone := seg[ZoneKey]
	if zone == "" && seg[HostnameKey] != "" {
		zone = c.st.NodeZones[seg[HostnameKey]]
	}
	free, _ := Remaining(capacities, zone, c.st.UsedInZone(zone))
	return &csi.GetCapacityResponse{AvailableCapacity: free, MaximumVolumeSize: wrapperspb.Int64(free)}, nil
}

// ValidateVolumeCapabilities confirms the capabilities when the volume's mode supports
// all of them; otherwise it answers without confirmation and says why.
func (c *Controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_capabilities missing", id)
	}
	c.mu.Lock()
	v := c.st.Volumes[id]
	c.mu.Unlock()
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if why := CheckCapabilities(req.GetVolumeCapabilities(), v.Mode); why != "" {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: why}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters: req.GetParameters(), MutableParameters: req.GetMutableParameters(),
	}}, nil
}

package driver

// ControllerExpandVolume and ControllerModifyVolume: what upstream's csi-resizer calls when
// a bound claim grows or moves to another VolumeAttributesClass.

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MutableTier is the one mutable parameter (a VolumeAttributesClass's parameters): a
// volume's service tier. The driver only records it, which is all a test can check through
// Kubernetes (the claim's currentVolumeAttributesClassName); an unknown key or value is
// INVALID_ARGUMENT, as a real driver refuses a class it cannot honour.
const MutableTier = "pvchaos.dev/tier"

// MutableTiers are the values MutableTier takes.
var MutableTiers = map[string]bool{"standard": true, "fast": true}

// CheckMutable says why mutable parameters are unusable ("" when they are fine).
func CheckMutable(params map[string]string) string {
	var why []string
	for _, k := range sortedKeys(params) {
		switch {
		case k != MutableTier:
			why = append(why, fmt.Sprintf("mutable parameter %q is unknown (known: %s)", k, MutableTier))
		case !MutableTiers[params[k]]:
			why = append(why, fmt.Sprintf("%s=%q: want one of %s", k, params[k], strings.Join(tierNames(), ", ")))
		}
	}
	return strings.Join(why, "; ")
}

func tierNames() []string {
	out := make([]string, 0, len(MutableTiers))
	for t := range MutableTiers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// ControllerExpandVolume grows a volume's recorded size, checking its zone's capacity like
// CreateVolume. A filesystem volume is a directory, which has no size of its own, so no node
// step is needed (node_expansion_required false: the resizer then finishes the claim itself).
// A block volume's backing file and loop device live on the node, so it asks for the node's
// step (NodeExpandVolume, node_expand.go). Shrinking is never done (the CO never asks; asked,
// the size stays).
func (c *Controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	size, err := VolumeSize(required, limit)
	if err != nil {
		return nil, status.Errorf(codes.OutOfRange, "volume %s: %v", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st.Volumes[id]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if size <= v.CapacityBytes { // already that big (a retry, or a request below the size)
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.CapacityBytes}, nil
	}
	capacities, err := ZoneCapacities(c.cfg.ControlDir)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: control file: %v", id, err)
	}
	growth := size - v.CapacityBytes
	if free, limited := Remaining(capacities, v.Zone, c.st.UsedInZone(v.Zone)); limited && free < growth {
		return nil, status.Errorf(codes.OutOfRange,
			"volume %s: zone %q has %d bytes free (capacity %d, provisioned %d), growing to %d needs %d more",
			id, v.Zone, free, capacities[v.Zone], c.st.UsedInZone(v.Zone), size, growth)
	}
	before := v.CapacityBytes
	v.CapacityBytes = size
	if err := c.save(); err != nil {
		v.CapacityBytes = before
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	block := req.GetVolumeCapability().GetBlock() != nil
	c.log.Eventf("expanded volume %s from %d to %d bytes (node step: %v)", id, before, size, block)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: block}, nil
}

// ControllerModifyVolume records a volume's new mutable parameters (merged over the old
// ones, as the spec says a key left out keeps its value).
func (c *Controller) ControllerModifyVolume(_ context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	}
	if why := CheckMutable(req.GetMutableParameters()); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %s", id, why)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st.Volumes[id]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	before := maps.Clone(v.Mutable)
	if v.Mutable == nil {
		v.Mutable = map[string]string{}
	}
	maps.Copy(v.Mutable, req.GetMutableParameters())
	if err := c.save(); err != nil {
		v.Mutable = before
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	c.log.Eventf("modified volume %s: mutable parameters %v", id, v.Mutable)
	return &csi.ControllerModifyVolumeResponse{}, nil
}

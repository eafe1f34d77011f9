package driver

// Expansion and modification through the RPCs: the zone's capacity bounds a growth, a
// restart keeps the new size and parameters, a block volume asks for the node's step.

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func expandReq(id string, bytes int64) *csi.ControllerExpandVolumeRequest {
	return &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
		VolumeCapability: mountCap(snw)}
}

func TestExpandWithinTheZoneCapacity(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.capacity(`{"z1": "10Mi"}`)
	created, err := f.c.CreateVolume(ctx, createReq("a", 4*Mi, nil, seg("z1", "n1")))
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()
	got, err := f.c.ControllerExpandVolume(ctx, expandReq(id, 8*Mi))
	if err != nil || got.GetCapacityBytes() != 8*Mi || got.GetNodeExpansionRequired() {
		t.Fatalf("expand to 8Mi: %v %v", got, err)
	}
	_, err = f.c.ControllerExpandVolume(ctx, expandReq(id, 12*Mi))
	wantCode(t, err, codes.OutOfRange, `zone "z1"`, "2097152 bytes free", "needs 4194304 more")
	if again, err := f.c.ControllerExpandVolume(ctx, expandReq(id, 6*Mi)); err != nil || again.GetCapacityBytes() != 8*Mi {
		t.Fatalf("a smaller request keeps 8Mi: %v %v", again, err)
	}
	blockReq := expandReq(id, 9*Mi)
	blockReq.VolumeCapability = blockCap(snw)
	if got, err := f.c.ControllerExpandVolume(ctx, blockReq); err != nil || !got.GetNodeExpansionRequired() {
		t.Fatalf("a block volume needs the node's step: %v %v", got, err)
	}
	f.restart()
	if v := f.c.st.Volumes[id]; v == nil || v.CapacityBytes != 9*Mi {
		t.Fatalf("after a restart: %+v", v)
	}
	if gc, _ := f.c.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: seg("z1", "n1")}}); gc.GetAvailableCapacity() != Mi {
		t.Fatalf("the grown volume counts against z1: %v", gc)
	}
}

func TestExpandRefusesBadRequests(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.c.ControllerExpandVolume(ctx, expandReq("nope", Mi))
	wantCode(t, err, codes.NotFound, "nope")
	block := &csi.ControllerExpandVolumeRequest{VolumeId: "x", CapacityRange: &csi.CapacityRange{RequiredBytes: Mi},
		VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw}}}
	_, err = f.c.ControllerExpandVolume(ctx, block)
	wantCode(t, err, codes.NotFound, "x")
	_, err = f.c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{})
	wantCode(t, err, codes.InvalidArgument, "volume_id")
}

func TestModifyMergesKnownParameters(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	req := createReq("a", Mi, nil, seg("z1", "n1"))
	req.MutableParameters = map[string]string{MutableTier: "standard"}
	created, err := f.c.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()
	if _, err := f.c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id,
		MutableParameters: map[string]string{MutableTier: "fast"}}); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if v := f.c.st.Volumes[id]; v.Mutable[MutableTier] != "fast" {
		t.Fatalf("after modify and restart: %+v", v.Mutable)
	}
	_, err = f.c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id,
		MutableParameters: map[string]string{"iops": "3000"}})
	wantCode(t, err, codes.InvalidArgument, `"iops" is unknown`)
	_, err = f.c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id,
		MutableParameters: map[string]string{MutableTier: "gold"}})
	wantCode(t, err, codes.InvalidArgument, "fast, standard")
	_, err = f.c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: "nope"})
	wantCode(t, err, codes.NotFound, "nope")
	bad := createReq("b", Mi, nil, seg("z1", "n1"))
	bad.MutableParameters = map[string]string{MutableTier: "gold"}
	_, err = f.c.CreateVolume(ctx, bad)
	wantCode(t, err, codes.InvalidArgument, "gold")
}

package driver

// What the example vendor packages rely on: a per-node key of the driver's own on the
// wire, topology from node labels, and the attach faults of the broken packages.

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

const vendorKey = "vendor.example.com/node"

func TestOwnNodeKeyOnTheWire(t *testing.T) {
	if got := ToWire(Segment{HostnameKey: "n1", ZoneKey: "z1"}, vendorKey); !reflect.DeepEqual(got, Segment{vendorKey: "n1", ZoneKey: "z1"}) {
		t.Fatalf("ToWire: %v", got)
	}
	if got := FromWire(Segment{vendorKey: "n1"}, vendorKey); !reflect.DeepEqual(got, Segment{HostnameKey: "n1"}) {
		t.Fatalf("FromWire: %v", got)
	}
	if got := FromWire(Segment{HostnameKey: "n1"}, ""); !reflect.DeepEqual(got, Segment{HostnameKey: "n1"}) {
		t.Fatalf("no key: %v", got)
	}

	f := newFixture(t)
	f.cfg.NodeKey = vendorKey
	f.restart()
	ctx := context.Background()
	req := &csi.CreateVolumeRequest{
		Name: "pvc-own", Parameters: map[string]string{ParamTopology: ModeNode},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, CapacityRange: &csi.CapacityRange{RequiredBytes: Mi},
		AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: []*csi.Topology{{Segments: Segment{vendorKey: "n2"}}, {Segments: Segment{vendorKey: "n1"}}},
			Preferred: []*csi.Topology{{Segments: Segment{vendorKey: "n1"}}, {Segments: Segment{vendorKey: "n2"}}},
		},
	}
	r, err := f.c.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetVolume().GetAccessibleTopology(); len(got) != 1 || !reflect.DeepEqual(got[0].GetSegments(), map[string]string{vendorKey: "n1"}) {
		t.Fatalf("a node-local volume on the selected node, named by the driver's own key: %v", got)
	}

	n := NewNode(NodeConfig{NodeID: "n1", Hostname: "n1", NodeKey: vendorKey}, nil)
	info, _ := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if !reflect.DeepEqual(info.GetAccessibleTopology().GetSegments(), map[string]string{vendorKey: "n1"}) {
		t.Fatalf("NodeGetInfo with the driver's own key: %v", info)
	}
}

func TestNodeGetInfoWithLabelTopology(t *testing.T) {
	n := NewNode(NodeConfig{NodeID: "n1", Hostname: "n1", Zone: "z1",
		Labels: map[string]string{ZoneKey: "z1", "topology.kubernetes.io/region": "r1"}}, nil)
	info, _ := n.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	want := map[string]string{HostnameKey: "n1", ZoneKey: "z1", "topology.kubernetes.io/region": "r1"}
	if !reflect.DeepEqual(info.GetAccessibleTopology().GetSegments(), want) {
		t.Fatalf("NodeGetInfo: %v", info.GetAccessibleTopology())
	}
}

func publishReq(id, node string) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: mountCap(snw)}
}

func TestAttachLimitTheDriverDoesNotReport(t *testing.T) {
	f := newFixture(t)
	f.cfg.FaultAttachLimit = 2
	f.restart()
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"pvc-1", "pvc-2", "pvc-3"} {
		r, err := f.c.CreateVolume(ctx, createReq(name, Mi, nil, seg("z1", "n1")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetVolume().GetVolumeId())
	}
	for _, id := range ids[:2] {
		if _, err := f.c.ControllerPublishVolume(ctx, publishReq(id, "n1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.c.ControllerPublishVolume(ctx, publishReq(ids[0], "n1")); err != nil {
		t.Fatalf("a repeated publish of an attached volume is no new attachment: %v", err)
	}
	_, err := f.c.ControllerPublishVolume(ctx, publishReq(ids[2], "n1"))
	wantCode(t, err, codes.ResourceExhausted, "at most 2")
	if _, err := f.c.ControllerPublishVolume(ctx, publishReq(ids[2], "n2")); err != nil {
		t.Fatalf("another node has room: %v", err)
	}
}

func TestNeverAttachWaitsForTheCallersDeadline(t *testing.T) {
	f := newFixture(t)
	f.cfg.FaultNeverAttach = true
	f.restart()
	r, err := f.c.CreateVolume(context.Background(), createReq("pvc-1", Mi, nil, seg("z1", "n1")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = f.c.ControllerPublishVolume(ctx, publishReq(r.GetVolume().GetVolumeId(), "n1"))
	wantCode(t, err, codes.DeadlineExceeded)
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("answered before the caller gave up")
	}
}
